import { afterAll, expect, test } from "bun:test";
import { loadEdgeConfig } from "../../common/config.ts";
import { BunOnlyError, buildEdgeDeps } from "../../common/edge-deps.ts";
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

test("a configuration missing several services names every one of them in one error, not one per start", () => {
  let error: unknown;
  try {
    buildEdgeDeps(loadEdgeConfig({ QDRANT_URL: UNREACHABLE }), { write: () => {} });
  } catch (err) {
    error = err;
  }
  expect(error).toBeInstanceOf(BunOnlyError);
  expect((error as BunOnlyError).variables).toEqual(["DATABASE_URL", "UPSTASH_REDIS_REST_URL", "TYPESENSE_URL", "LLM_GATEWAY_URL"]);
  expect((error as BunOnlyError).message.split("\n")).toEqual([
    "4 settings the edge needs:",
    expect.stringMatching(/^ {2}- DATABASE_URL is not set/),
    expect.stringMatching(/^ {2}- UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN are not set/),
    expect.stringMatching(/^ {2}- TYPESENSE_URL is not set/),
    expect.stringMatching(/^ {2}- LLM_GATEWAY_URL is not set/),
  ]);
});
