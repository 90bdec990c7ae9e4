import { afterAll } from "bun:test";
import type { Database } from "../../common/db/index.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { createIngestEnv, startBookServer, startScriptedGateway, type BookServer, type IngestEnv, type ScriptedGateway } from "../fixtures/ingest/harness.ts";
import { openEmbeddedDatabase } from "./embedded-stores.ts";

export interface IngestSuiteOptions {
  /** One migrated PGlite for every env of the file (the default); false gives each env its own. */
  sharedDatabase?: boolean;
}

export interface IngestSetupOptions {
  /** Stores for the env; when absent, the file's shared database, or the env's own. */
  db?: Database;
  kv?: KeyValueStore;
  /** Settings over the env's defaults, as the process environment would give them. */
  env?: Record<string, string>;
  /** Scripts the gateway before the env is built. */
  configure?: (gateway: ScriptedGateway) => void;
}

export interface IngestSuite {
  books: BookServer;
  /** The shared database; reading it without `sharedDatabase` throws. */
  readonly db: Database;
  /** A scripted gateway and worker dependencies in a fresh data dir, both closed after the file's tests. */
  setup(options?: IngestSetupOptions): Promise<{ gateway: ScriptedGateway; env: IngestEnv }>;
  /** Runs `cleanup` after the file's tests, later registrations first, before the book server stops. */
  defer(cleanup: () => Promise<void> | void): void;
}

/**
 * What an ingestion test file opens once and closes after its tests: the loopback book server and,
 * unless told otherwise, one database. Await it at the top of the file: it registers the afterAll.
 */
export async function openIngestSuite(options: IngestSuiteOptions = {}): Promise<IngestSuite> {
  const books = startBookServer();
  const shared = (options.sharedDatabase ?? true) ? await openEmbeddedDatabase() : undefined;
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    books.stop();
    await shared?.close();
  });
  return {
    books,
    get db() {
      if (!shared) throw new Error("this ingest suite was opened without a shared database");
      return shared;
    },
    async setup({ db = shared, kv, env: settings, configure } = {}) {
      const gateway = startScriptedGateway();
      configure?.(gateway);
      const env = await createIngestEnv({ gateway, books, db, kv, env: settings });
      cleanups.push(() => gateway.stop(), () => env.close());
      return { gateway, env };
    },
    defer(cleanup) {
      cleanups.push(cleanup);
    },
  };
}
