import { createApp, type AppDeps } from "../../api/app.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import { migrate } from "../../common/db/migrate.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { silentLogger } from "../../common/log.ts";
import { createMetrics } from "../../common/metrics/index.ts";

/** A dependency a test did not provide: touching it fails the test with a message naming it. */
function notProvided<T extends object>(name: string): T {
  return new Proxy({} as T, {
    get(_, property) {
      throw new Error(`this test app has no ${name} (reading .${String(property)}); pass one to buildTestApp`);
    },
  });
}

/**
 * An app on embedded stores (in-memory PGlite, in-process KV) for in-process tests. Each call builds
 * fresh stores; pass overrides to swap any dependency. The language model and the indexes must be
 * passed by tests that chat (tests/support/chat.ts builds them).
 */
export async function buildTestApp(overrides: Partial<AppDeps> = {}) {
  let db = overrides.db;
  if (!db) {
    db = await createPgliteDatabase();
    await migrate(db);
  }
  const deps: AppDeps = {
    db,
    kv: createMemoryKeyValueStore(),
    metrics: createMetrics({ defaultMetrics: false }),
    logger: silentLogger,
    probeBook: async (url) => ({ url, bytes: 0, contentType: "text/plain" }),
    llm: notProvided("language model"),
    vectorIndex: notProvided("vector index"),
    textIndex: notProvided("text index"),
    reranker: undefined,
    ...overrides,
  };
  const { app, fetch, settle } = createApp(deps);
  const request = (path: string, init?: RequestInit) => fetch(new Request(`http://localhost${path}`, init));
  const postJson = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    request(path, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  return { app, fetch, settle, deps, request, postJson };
}

/** The value of one series in a Prometheus text exposition, or undefined when absent. */
export function metricValue(exposition: string, series: string): number | undefined {
  const line = exposition.split("\n").find((l) => l.startsWith(series + " "));
  return line ? Number(line.slice(series.length + 1)) : undefined;
}
