/**
 * What METRICS_AGGREGATION=kv costs an API process (an isolate on an edge runtime): CPU per request of
 * the HTTP metrics alone, and with the aggregation (its request counter plus each flush amortised over
 * the requests of its batch: the registry read, the deltas, the store command and its client's work),
 * on the in-process store, Redis over TCP and Upstash REST (the bridge of tests/support); the store
 * commands per batch; and a scrape's cost. Runs alone: `bun bench/metrics-aggregation.ts [--requests N]`.
 */
import { loadavg } from "node:os";
import { withHttpMetrics } from "../api/http-metrics.ts";
import type { KeyValueStore } from "../common/kv/index.ts";
import { createMemoryKeyValueStore } from "../common/kv/memory.ts";
import { createRedisKeyValueStore } from "../common/kv/redis.ts";
import { createUpstashKeyValueStore } from "../common/kv/upstash.ts";
import { createMetrics } from "../common/metrics/index.ts";
import { DEFAULT_METRICS_FLUSH_REQUESTS, enableKvMetricsAggregation } from "../common/metrics/kv-aggregation.ts";
import { deleteKeysWithPrefix, probeRedis, uniqueKeyPrefix } from "../tests/support/redis.ts";
import { startUpstashBridge } from "../dev/edge/upstash-bridge.ts";
import { answerHelp, machineHeader, markdownTable, option } from "./support.ts";

/** The API's routes as the metrics middleware sees them: a spread of series like a real scrape's. */
const ROUTES = [
  { method: "GET", path: "/health" },
  { method: "GET", path: "/metrics" },
  { method: "POST", path: "/character/chat" },
  { method: "POST", path: "/character/processing" },
];
const PATHS = ["/health", "/character/chat", "/character/processing", "/nowhere"];
const STATUSES = [200, 200, 200, 404, 429];
const ROUNDS = 5;

const cpuMicros = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

function requestsOf(count: number): Request[] {
  return Array.from({ length: count }, (_, i) => {
    const path = PATHS[i % PATHS.length]!;
    return new Request(`http://localhost${path}`, { method: path === "/health" ? "GET" : "POST" });
  });
}

/** CPU µs per request through the metrics middleware, `aggregate` deciding whether the aggregation is on. */
async function measure(requests: readonly Request[], kv: KeyValueStore | undefined, keyPrefix: string) {
  const metrics = createMetrics({ defaultMetrics: false });
  let commands = 0;
  const counted: KeyValueStore | undefined = kv && {
    ...kv,
    hincrbyfloat: (key, increments) => (commands++, kv.hincrbyfloat(key, increments)),
    hset: (key, fields) => (commands++, kv.hset(key, fields)),
    hgetall: (key) => (commands++, kv.hgetall(key)),
    hdel: (key, fields) => (commands++, kv.hdel(key, fields)),
  };
  const aggregation = counted && enableKvMetricsAggregation(metrics, counted, { keyPrefix, flushIntervalMs: 600_000 });
  // Some chat and token series too, as a running API has them.
  metrics.chat.requests.inc({ outcome: "ok" });
  metrics.chat.timeToFirstToken.observe(0.3);
  metrics.llm.tokens.inc({ purpose: "chat", type: "completion" }, 50);
  let n = 0;
  const handle = withHttpMetrics({ routes: ROUTES }, async () => new Response(null, { status: STATUSES[n++ % STATUSES.length] }), metrics);
  // Warm-up: the JIT, the series, the store's connection.
  for (const r of requests.slice(0, 2_000)) await handle(r);
  await aggregation?.flush();
  commands = 0;
  const before = cpuMicros();
  for (const r of requests) {
    await handle(r);
    // As an edge entry hands the flush to waitUntil: the isolate finishes it before its next request.
    await aggregation?.settled();
  }
  const perRequest = (cpuMicros() - before) / requests.length;
  const writeCommands = commands;
  let scrapeMicros: number | undefined;
  if (aggregation) {
    const start = cpuMicros();
    for (let i = 0; i < 20; i++) await aggregation.render();
    scrapeMicros = (cpuMicros() - start) / 20;
    await aggregation.close();
  }
  return { perRequest, writeCommands, scrapeMicros };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const count = Number(option("--requests") ?? 20_000);
  const requests = requestsOf(count);
  const redis = await probeRedis();
  const prefix = uniqueKeyPrefix("bench-metrics");
  const stores: { label: string; open(): Promise<{ kv?: KeyValueStore; close(): Promise<void> }> }[] = [
    { label: "off (the HTTP metrics alone)", open: async () => ({ close: async () => {} }) },
    {
      label: "kv: in-process store",
      open: async () => {
        const kv = createMemoryKeyValueStore();
        return { kv, close: () => kv.close() };
      },
    },
  ];
  if (redis.reachable) {
    stores.push(
      {
        label: "kv: Redis over TCP (Bun)",
        open: async () => {
          const kv = createRedisKeyValueStore({ url: redis.url });
          return { kv, close: () => kv.close() };
        },
      },
      {
        label: "kv: Upstash REST (loopback bridge to Redis)",
        open: async () => {
          const bridge = await startUpstashBridge({ redisUrl: redis.url });
          const kv = createUpstashKeyValueStore({ url: bridge.url, token: bridge.token });
          return { kv, close: async () => (await kv.close(), await bridge.stop()) };
        },
      },
    );
  }
  const rows: string[][] = [];
  let baseline = 0;
  for (const store of stores) {
    const runs: Awaited<ReturnType<typeof measure>>[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const { kv, close } = await store.open();
      try {
        runs.push(await measure(requests, kv, `${prefix}${round}`));
      } finally {
        await close();
      }
    }
    const cpu = median(runs.map((r) => r.perRequest));
    if (!store.label.startsWith("kv")) baseline = cpu;
    const scrape = runs[0]!.scrapeMicros;
    rows.push([
      store.label,
      cpu.toFixed(2),
      store.label.startsWith("kv") ? `+${(cpu - baseline).toFixed(2)}` : "–",
      store.label.startsWith("kv") ? ((runs[0]!.writeCommands / count) * DEFAULT_METRICS_FLUSH_REQUESTS).toFixed(2) : "0",
      scrape === undefined ? "–" : (scrape / 1000).toFixed(2),
    ]);
  }
  if (redis.reachable) await deleteKeysWithPrefix(prefix, redis.url);
  console.log(`${machineHeader()} · load average ${loadavg().map((x) => x.toFixed(1)).join(", ")}`);
  console.log(
    `\n${count.toLocaleString("en")} requests through the HTTP metrics middleware (4 routes, 5 statuses), median of ${ROUNDS} runs; ` +
      `aggregation flushing every ${DEFAULT_METRICS_FLUSH_REQUESTS} requests (the default), each flush awaited before the next request:\n`,
  );
  console.log(
    markdownTable(
      ["METRICS_AGGREGATION", "CPU µs per request", "aggregation's share", `store commands per ${DEFAULT_METRICS_FLUSH_REQUESTS} requests`, "scrape (render) CPU ms"],
      rows,
    ),
  );
}

if (import.meta.main) {
  answerHelp("usage: bun bench/metrics-aggregation.ts [--requests N]\n\nWhat METRICS_AGGREGATION=kv costs an API process: CPU per request, store commands per batch, a scrape's cost.");
  await main();
}
