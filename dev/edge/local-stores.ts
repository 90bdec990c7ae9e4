import { join } from "node:path";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { startIndexStandIn, type IndexStandIn } from "./index-stand-in.ts";
import { startNeonBridge, type NeonBridge } from "./neon-bridge.ts";
import { startOfflineGateway, type OfflineGateway } from "./offline-gateway.ts";
import { startPgliteServer, type PgliteServer } from "./pglite-server.ts";
import { startUpstashBridge, type UpstashBridge } from "./upstash-bridge.ts";

/**
 * Everything the edge API needs, on this machine, with nothing to sign up for: Postgres behind the
 * Neon bridge, Redis behind the Upstash REST bridge, Qdrant and Typesense as the index stand-in, and
 * a model gateway. Each store is the one given (a local Postgres, a local Redis, a gateway) or else
 * an embedded one: PGlite under the data dir served over the Postgres protocol, the in-process
 * key-value store, the offline provider behind an OpenAI-compatible gateway.
 *
 * Returns the environment of the edge API (the production drivers, pointed at the bridges) and of
 * the Bun ingest worker (the same stores, reached as Bun reaches them), so both see one world.
 */

export interface LocalStoresOptions {
  /** A postgres:// URL of a server on this machine (the Neon bridge reaches loopback only); PGlite under dataDir when unset. */
  databaseUrl?: string;
  /** A redis:// URL; the in-process store when unset. */
  redisUrl?: string;
  /** An OpenAI-compatible gateway (with llmApiKey); the offline provider when unset. */
  llmGatewayUrl?: string;
  llmApiKey?: string;
  /** Where the embedded Postgres keeps its files; in memory when unset. */
  dataDir?: string;
}

export interface LocalStores {
  /** For the API on Deno or workerd. */
  readonly apiEnv: Readonly<Record<string, string>>;
  /** For the ingest worker on Bun (and anything else on Bun, e.g. the sample book's seeding). */
  readonly workerEnv: Readonly<Record<string, string>>;
  /** Whether the database is the embedded one started here (so the frontend's tables are ours to write). */
  readonly embeddedDatabase: boolean;
  /** One line per service: what serves it. */
  readonly summary: readonly string[];
  readonly neon: NeonBridge;
  readonly upstash: UpstashBridge;
  readonly indexes: IndexStandIn;
  stop(): Promise<void>;
}

/** A URL with its password hidden, for the summary. */
const shown = (url: string) => url.replace(/\/\/([^:@/]+):[^@/]*@/, "//$1:***@");

export async function startLocalStores(options: LocalStoresOptions = {}): Promise<LocalStores> {
  const stops: (() => Promise<unknown> | void)[] = [];
  const stop = async () => {
    for (const s of stops.reverse()) await Promise.resolve(s()).catch(() => {});
  };
  try {
    let pglite: PgliteServer | undefined;
    if (!options.databaseUrl) {
      pglite = await startPgliteServer(options.dataDir ? { dataDir: join(options.dataDir, "pg") } : {});
      stops.push(() => pglite!.stop());
    }
    const databaseUrl = options.databaseUrl ?? pglite!.url;
    const neon = startNeonBridge();
    stops.push(() => neon.stop());

    const memory = options.redisUrl ? undefined : createMemoryKeyValueStore();
    if (memory) stops.push(() => memory.close());
    const upstash = await startUpstashBridge(options.redisUrl ? { redisUrl: options.redisUrl } : { store: memory! });
    stops.push(() => upstash.stop());

    const indexes = startIndexStandIn();
    stops.push(() => indexes.close());

    let gateway: OfflineGateway | undefined;
    if (!options.llmGatewayUrl) {
      gateway = startOfflineGateway();
      stops.push(() => gateway!.stop());
    }

    const indexEnv = {
      QDRANT_URL: indexes.qdrant.url,
      QDRANT_API_KEY: indexes.qdrant.apiKey,
      TYPESENSE_URL: indexes.typesense.url,
      TYPESENSE_API_KEY: indexes.typesense.apiKey,
    };
    const upstashEnv = { UPSTASH_REDIS_REST_URL: upstash.url, UPSTASH_REDIS_REST_TOKEN: upstash.token };
    const givenLlm = options.llmGatewayUrl ? { LLM_GATEWAY_URL: options.llmGatewayUrl, ...(options.llmApiKey ? { LLM_API_KEY: options.llmApiKey } : {}) } : {};
    const apiEnv = {
      DATABASE_URL: databaseUrl,
      NEON_WS_PROXY: neon.address,
      NEON_HTTP_ENDPOINT: neon.httpEndpoint,
      ...upstashEnv,
      ...indexEnv,
      ...(gateway ? { LLM_GATEWAY_URL: gateway.baseURL } : givenLlm),
    };
    // The worker reaches Postgres and Redis directly when they are real servers; the in-process
    // store lives in this process, so it reaches that through the bridge like the API. Without a
    // gateway it runs the offline provider itself: the same vectors the offline gateway answers.
    const workerEnv = {
      DATABASE_URL: databaseUrl,
      DATABASE_DRIVER: "postgres",
      ...(options.redisUrl ? { REDIS_URL: options.redisUrl } : upstashEnv),
      ...indexEnv,
      ...givenLlm,
    };
    const summary = [
      `Postgres     ${pglite ? `embedded (PGlite${options.dataDir ? ` in ${join(options.dataDir, "pg")}` : ", in memory"}) on ${pglite.url}` : shown(databaseUrl)}, Neon proxy ws://${neon.address}, SQL over HTTP ${neon.httpEndpoint}`,
      `Redis        ${options.redisUrl ? shown(options.redisUrl) : "in-process store"}, Upstash REST ${upstash.url}`,
      `Indexes      Qdrant ${indexes.qdrant.url}, Typesense ${indexes.typesense.url} (in memory, a stand-in)`,
      `Model        ${gateway ? `offline provider, gateway ${gateway.baseURL}` : shown(options.llmGatewayUrl!)}`,
    ];
    return { apiEnv, workerEnv, embeddedDatabase: pglite !== undefined, summary, neon, upstash, indexes, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
