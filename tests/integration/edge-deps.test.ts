import { afterAll, expect, test } from "bun:test";
import { loadEdgeConfig } from "../../common/config.ts";
import { buildEdgeDeps } from "../../common/edge-deps.ts";
import { DEFAULT_METRICS_KEY_PREFIX } from "../../common/metrics/kv-aggregation.ts";

/**
 * The edge's composition root against a loopback store that speaks enough of the Upstash REST
 * protocol to record the commands it is sent; nothing else is reached (building does no I/O).
 */

const commands: unknown[][] = [];
const store = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(request) {
    const body: unknown = await request.json();
    const sent = new URL(request.url).pathname === "/" ? [body] : (body as unknown[]);
    for (const command of sent) commands.push(command as unknown[]);
    const results = sent.map(() => ({ result: 1 }));
    return Response.json(new URL(request.url).pathname === "/" ? results[0] : results);
  },
});
afterAll(() => store.stop(true));

const UNREACHABLE = "http://127.0.0.1:9";

test("closing the edge's dependencies flushes the series the isolate recorded since its last flush", async () => {
  const config = loadEdgeConfig({
    DATABASE_URL: "postgres://u:p@127.0.0.1:9/none",
    UPSTASH_REDIS_REST_URL: `http://127.0.0.1:${store.port}`,
    UPSTASH_REDIS_REST_TOKEN: "token",
    QDRANT_URL: UNREACHABLE,
    TYPESENSE_URL: UNREACHABLE,
    TYPESENSE_API_KEY: "key",
    LLM_GATEWAY_URL: `${UNREACHABLE}/v1`,
  });
  const deps = buildEdgeDeps(config, { write: () => {} });
  deps.metrics.http.requests.inc({ method: "GET", endpoint: "/health", status_code: "200" });
  expect(commands).toEqual([]);
  await deps.close();
  const written = commands.filter((command) => command.includes(`${DEFAULT_METRICS_KEY_PREFIX}:totals`));
  expect(written.map((command) => String(command[0]).toUpperCase())).toEqual(["EVAL"]);
  expect(written[0]).toContain(JSON.stringify(["http_requests_total", [["endpoint", "/health"], ["method", "GET"], ["status_code", "200"]]]));
});
