import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import { KvError, type KeyValueStore } from "../../common/kv/index.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { combineGauge, enableKvMetricsAggregation, type KvMetricsAggregationOptions } from "../../common/metrics/kv-aggregation.ts";
import { MAX_AGGREGATED_FIELDS } from "../../common/metrics/kv-aggregation-fields.ts";
import { createLogger } from "../../common/log.ts";
import { createMetrics } from "../../common/metrics/index.ts";
import { buildTestApp, metricValue } from "../support/app.ts";
import { deleteKeysWithPrefix, probeRedis, uniqueKeyPrefix } from "../support/redis.ts";

/**
 * METRICS_AGGREGATION=kv: several API processes (isolates on an edge runtime) share one key-value
 * store; each flushes its series in batches and a scrape of any of them shows the sums.
 */

const redis = await probeRedis();
const PROMTOOL = ["/usr/bin/promtool", "/usr/local/bin/promtool"].find(existsSync);
/** Longer than any test: flushes happen because of requests or explicit calls, never a timer. */
const NEVER_MS = 600_000;

let db: Database;
beforeAll(async () => {
  db = await createPgliteDatabase();
  await migrate(db);
});
afterAll(async () => {
  await db?.close();
});

const fakeClock = (start = 1_700_000_000_000) => {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
};

/** A store that counts the commands it is asked for, and fails the next `failNext` hash writes. */
function countingStore(kv: KeyValueStore) {
  const calls: string[] = [];
  let failNext = 0;
  const store: KeyValueStore = {
    ...kv,
    hincrbyfloat: (key, increments) => {
      calls.push("hincrbyfloat");
      if (failNext > 0) return failNext--, Promise.reject(new KvError("redis: connection refused"));
      return kv.hincrbyfloat(key, increments);
    },
    hset: (key, fields) => (calls.push("hset"), kv.hset(key, fields)),
    hgetall: (key) => (calls.push("hgetall"), kv.hgetall(key)),
    hdel: (key, fields) => (calls.push("hdel"), kv.hdel(key, fields)),
  };
  return { store, calls, failNextWrites: (n: number) => void (failNext = n) };
}

async function isolate(kv: KeyValueStore, options: KvMetricsAggregationOptions) {
  const metrics = createMetrics({ defaultMetrics: false });
  const aggregation = enableKvMetricsAggregation(metrics, kv, { flushIntervalMs: NEVER_MS, ...options });
  const app = await buildTestApp({ db, kv, metrics });
  return { ...app, metrics, aggregation, scrape: async () => (await app.request("/metrics")).text() };
}

const HEALTH_OK = 'http_requests_total{method="GET",endpoint="/health",status_code="200"}';
const HEALTH_COUNT = 'http_request_duration_seconds_count{method="GET",endpoint="/health"}';

const stores: { name: string; skip: boolean; open(): { kv: KeyValueStore; prefix: string; cleanup(): Promise<void> } }[] = [
  {
    name: "the in-process store",
    skip: false,
    open: () => {
      const kv = createMemoryKeyValueStore();
      return { kv, prefix: "metrics:api", cleanup: () => kv.close() };
    },
  },
  {
    name: "Redis",
    skip: !redis.reachable,
    open: () => {
      const kv = createRedisKeyValueStore({ url: redis.url });
      const prefix = uniqueKeyPrefix("metrics-aggregation");
      return { kv, prefix, cleanup: async () => (await deleteKeysWithPrefix(prefix, redis.url), kv.close()) };
    },
  },
];

for (const variant of stores) {
  describe.skipIf(variant.skip)(`metrics summed across isolates on ${variant.name}`, () => {
    test("requests served by two isolates are summed at a scrape of either, histograms bucket by bucket", async () => {
      const { kv, prefix, cleanup } = variant.open();
      try {
        const a = await isolate(kv, { keyPrefix: prefix, flushRequests: 2, isolateId: "a" });
        const b = await isolate(kv, { keyPrefix: prefix, flushRequests: 2, isolateId: "b" });
        for (let i = 0; i < 3; i++) await a.request("/health");
        for (let i = 0; i < 2; i++) await b.request("/health");
        await b.request("/nowhere");
        const fromA = await a.scrape();
        await a.aggregation.settled();
        const fromB = await b.scrape();
        for (const exposition of [fromA, fromB]) {
          expect(metricValue(exposition, HEALTH_OK)).toBe(5);
          expect(metricValue(exposition, HEALTH_COUNT)).toBe(5);
          expect(metricValue(exposition, 'http_request_duration_seconds_bucket{le="+Inf",method="GET",endpoint="/health"}')).toBe(5);
        }
        // B's third request waits in B for its next batch: not in A's scrape yet, in B's own (which flushes first).
        expect(metricValue(fromA, 'http_requests_total{method="GET",endpoint="unmatched",status_code="404"}')).toBeUndefined();
        expect(metricValue(fromB, 'http_requests_total{method="GET",endpoint="unmatched",status_code="404"}')).toBe(1);
        expect(metricValue(await a.scrape(), 'http_requests_total{method="GET",endpoint="unmatched",status_code="404"}')).toBe(1);
        // A scrape flushes its isolate first; the scrape itself is counted in that isolate's next batch.
        expect(metricValue(fromB, 'http_requests_total{method="GET",endpoint="/metrics",status_code="200"}')).toBeUndefined();
        await Promise.all([a.aggregation.close(), b.aggregation.close()]);
      } finally {
        await cleanup();
      }
    });
  });
}

describe("metrics aggregation through the key-value store", () => {
  test("the aggregated exposition has a single process's families, help, types and labels, and promtool accepts it", async () => {
    const kv = createMemoryKeyValueStore();
    const a = await isolate(kv, { isolateId: "a" });
    await a.request("/health");
    await a.postJson("/character/chat", { nope: true });
    a.metrics.chat.requests.inc({ outcome: "ok" });
    a.metrics.chat.timeToFirstToken.observe(0.2);
    a.metrics.llm.tokens.inc({ purpose: "chat", type: "completion" }, 7);
    a.metrics.processing.jobsQueued.inc();
    const plain = await a.metrics.registry.metrics();
    const aggregated = await a.aggregation.render();
    const shape = (text: string) => text.split("\n").filter((line) => line.startsWith("# "));
    expect(shape(aggregated)).toEqual(shape(plain));
    // The same series with the same values, whatever the order of their labels.
    const series = (text: string) =>
      text
        .split("\n")
        .filter((line) => line && !line.startsWith("#"))
        .map((line) => {
          const [, name, labels = "", value] = /^([^{ ]+)(?:\{(.*)\})? (.*)$/.exec(line)!;
          return `${name}{${labels.split(",").sort().join(",")}} ${value}`;
        })
        .sort();
    expect(series(aggregated)).toEqual(series(plain));
    expect(metricValue(aggregated, 'llm_tokens_total{purpose="chat",type="completion"}')).toBe(7);
    if (PROMTOOL) {
      const dir = await mkdtemp(join(tmpdir(), "metrics-aggregation-"));
      try {
        await writeFile(join(dir, "metrics.txt"), aggregated);
        const check = Bun.spawnSync([PROMTOOL, "check", "metrics"], { stdin: Bun.file(join(dir, "metrics.txt")), stdout: "pipe", stderr: "pipe" });
        expect(check.stdout.toString() + check.stderr.toString()).toBe("");
        expect(check.exitCode).toBe(0);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
    await a.aggregation.close();
  });

  test("an isolate writes nothing per request: one flush when N requests or T seconds have passed, whichever first", async () => {
    const clock = fakeClock();
    const { store, calls } = countingStore(createMemoryKeyValueStore());
    const a = await isolate(store, { isolateId: "a", flushRequests: 5, flushIntervalMs: 10_000, now: clock.now });
    for (let i = 0; i < 4; i++) await a.request("/health");
    expect(calls).toEqual([]);
    await a.request("/health");
    await a.aggregation.settled();
    expect(calls.filter((c) => c === "hincrbyfloat")).toHaveLength(1);
    calls.length = 0;
    await a.request("/health");
    expect(calls).toEqual([]);
    clock.advance(10_000);
    await a.request("/health");
    await a.aggregation.settled();
    expect(calls.filter((c) => c === "hincrbyfloat")).toHaveLength(1);
    // Nothing moved since: a flush has nothing to write.
    calls.length = 0;
    await a.aggregation.flush();
    expect(calls).toEqual([]);
    expect(metricValue(await a.aggregation.render(), HEALTH_OK)).toBe(7);
    await a.aggregation.close();
  });

  test("a flush the store refused is neither lost nor counted twice: its deltas go with the next", async () => {
    const { store, failNextWrites } = countingStore(createMemoryKeyValueStore());
    const a = await isolate(store, { isolateId: "a", flushRequests: 1 });
    failNextWrites(2);
    await a.request("/health");
    await a.aggregation.settled();
    await a.request("/health");
    await a.aggregation.settled();
    await a.request("/health");
    await a.aggregation.settled();
    expect(metricValue(await a.aggregation.render(), HEALTH_OK)).toBe(3);
    await a.aggregation.close();
  });

  test("a flush the store refused is tried again an interval later though no request comes", async () => {
    const kv = createMemoryKeyValueStore();
    const { store, calls, failNextWrites } = countingStore(kv);
    const a = await isolate(store, { isolateId: "a", flushRequests: 1, flushIntervalMs: 100 });
    failNextWrites(1);
    await a.request("/health");
    for (let waited = 0; calls.filter((c) => c === "hincrbyfloat").length < 2 && waited < 10_000; waited += 20) await Bun.sleep(20);
    await a.aggregation.settled();
    expect(calls.filter((c) => c === "hincrbyfloat")).toHaveLength(2);
    expect(metricValue(await a.aggregation.render(), HEALTH_OK)).toBe(1);
    await a.aggregation.close();
  });

  test("gauges are combined over live isolates, and a dead isolate's readings drop out once they expire", async () => {
    const clock = fakeClock();
    const kv = createMemoryKeyValueStore({ now: clock.now });
    const options = { gaugeTtlMs: 60_000, flushIntervalMs: 10_000, now: clock.now };
    const a = await isolate(kv, { ...options, isolateId: "a" });
    const b = await isolate(kv, { ...options, isolateId: "b" });
    const chat = { method: "POST", endpoint: "/character/chat" };
    a.metrics.http.inProgress.labels(chat).set(2);
    a.metrics.processing.queueDepth.set(4);
    b.metrics.http.inProgress.labels(chat).set(1);
    b.metrics.processing.queueDepth.set(3);
    await a.aggregation.flush();
    const both = await b.aggregation.render();
    expect(metricValue(both, 'http_requests_in_progress{method="POST",endpoint="/character/chat"}')).toBe(3);
    // One queue seen by two isolates is not two queues: the largest reading shows.
    expect(metricValue(both, "processing_queue_depth")).toBe(4);

    // A is gone (evicted mid-request); B keeps flushing.
    clock.advance(61_000);
    const after = await b.aggregation.render();
    expect(metricValue(after, 'http_requests_in_progress{method="POST",endpoint="/character/chat"}')).toBe(1);
    expect(metricValue(after, "processing_queue_depth")).toBe(3);
    expect(Object.keys(await kv.hgetall("metrics:api:gauges"))).toEqual(["b"]);
    await Promise.all([a.aggregation.close(), b.aggregation.close()]);
  });

  test("a closed aggregation flushes once more and then never again, even with gauges above zero", async () => {
    const { store, calls } = countingStore(createMemoryKeyValueStore());
    const a = await isolate(store, { isolateId: "a", flushIntervalMs: 100 });
    a.metrics.processing.queueDepth.set(2);
    await a.request("/health");
    await a.aggregation.close();
    expect(calls).toEqual(["hincrbyfloat", "hset"]);
    // A timer left running would write this change to a store that may be closed by now.
    a.metrics.processing.queueDepth.set(5);
    await Bun.sleep(300);
    expect(calls).toEqual(["hincrbyfloat", "hset"]);
  });

  test("/metrics answers 503 with an error body when the store fails", async () => {
    const kv = createMemoryKeyValueStore();
    const a = await isolate({ ...kv, hgetall: () => Promise.reject(new KvError("upstash HGETALL: fetch failed")) }, { isolateId: "a" });
    const res = await a.request("/metrics");
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: "metrics store unavailable" });
    await a.aggregation.close();
  });

  test.each([
    ["sum", [2, 1, 0], 3],
    ["max", [2, 5, 1], 5],
    ["min", [2, 5, 1], 1],
    ["average", [2, 4], 3],
    ["sum", [], 0],
    ["max", [], 0],
  ] as const)("a gauge aggregated by %s over %p reads %d", (aggregator, readings, expected) => {
    expect(combineGauge(aggregator, readings)).toBe(expected);
  });
});

describe("fields in the metrics hashes that no isolate of this catalogue wrote", () => {
  const FAR_FUTURE = 9e15;
  const foreignTotals: [string, string, string][] = [
    ["not JSON", "hello", "1"],
    ["labels that are not a list", '["http_requests_total","x"]', "1"],
    ["labels that are not pairs", '["http_requests_total",[1,2]]', "1"],
    ["a label name the format forbids", '["http_requests_total",[["bad label","x"]]]', "1"],
    ["a label the family does not have", '["http_requests_total",[["endpoint","/x"],["evil","1"],["method","GET"],["status_code","200"]]]', "1"],
    ["a reserved label name", '["http_requests_total",[["__name__","x"]]]', "1"],
    ["a histogram's bare name", '["http_request_duration_seconds",[["endpoint","/x"],["method","GET"]]]', "1"],
    ["a bucket without its bound", '["http_request_duration_seconds_bucket",[["endpoint","/x"],["method","GET"]]]', "1"],
    ["a bucket with a bound that is no number", '["http_request_duration_seconds_bucket",[["endpoint","/x"],["le","abc"],["method","GET"]]]', "1"],
    ["a bound on a counter", '["http_requests_total",[["endpoint","/x"],["le","1"]]]', "1"],
    ["a family this process does not have", '["foreign_metric_total",[]]', "1"],
    ["a gauge's series among the sums", '["http_requests_in_progress",[["endpoint","/x"],["method","GET"]]]', "1"],
    ["a series spelt with its labels unsorted", '["http_requests_total",[["method","GET"],["endpoint","/health"],["status_code","200"]]]', "1"],
    ["a value that is no number", '["http_requests_total",[["endpoint","/y"],["method","GET"],["status_code","200"]]]', "abc"],
    ["a negative count", '["http_requests_total",[["endpoint","/y"],["method","GET"],["status_code","200"]]]', "-4"],
    ["a field too long to be a series", `["http_requests_total",[["endpoint","/${"x".repeat(2_000)}"],["method","GET"],["status_code","200"]]]`, "1"],
  ];
  const foreignGauges: [string, string][] = [
    ["not JSON", "hello"],
    ["null", "null"],
    ["an expiry that is no number", '{"expiresAt":"soon","values":{}}'],
    ["values that are a list", `{"expiresAt":${FAR_FUTURE},"values":[1]}`],
    ["a reading of no gauge", `{"expiresAt":${FAR_FUTURE},"values":{"garbage":1,"[\\"http_requests_total\\",[]]":1}}`],
    ["a reading that is no number", `{"expiresAt":${FAR_FUTURE},"values":{"[\\"processing_queue_depth\\",[]]":"x"}}`],
  ];

  async function withForeign(write: (kv: KeyValueStore) => Promise<void>) {
    const kv = createMemoryKeyValueStore();
    const a = await isolate(kv, { isolateId: "a" });
    for (let i = 0; i < 3; i++) await a.request("/health");
    a.metrics.processing.queueDepth.set(2);
    const clean = await a.aggregation.render();
    await write(kv);
    return { a, clean };
  }

  test.each(foreignTotals)("a field in the sums with %s is skipped: /metrics answers 200 and the exposition is the same", async (_, field, value) => {
    const { a, clean } = await withForeign((kv) => kv.hset("metrics:api:totals", { [field]: value }));
    expect(await a.aggregation.render()).toBe(clean);
    expect((await a.request("/metrics")).status).toBe(200);
    await a.aggregation.close();
  });

  test.each(foreignGauges)("an entry in the gauges with %s is skipped and removed: /metrics answers 200 and the exposition is the same", async (_, json) => {
    const { a, clean } = await withForeign((kv) => kv.hset("metrics:api:gauges", { intruder: json }));
    expect(await a.aggregation.render()).toBe(clean);
    expect((await a.request("/metrics")).status).toBe(200);
    await a.aggregation.close();
  });

  test.skipIf(!PROMTOOL)("promtool accepts the exposition with every foreign field at once", async () => {
    const { a } = await withForeign(async (kv) => {
      await kv.hset("metrics:api:totals", Object.fromEntries(foreignTotals.map(([, field, value]) => [field, value])));
      await kv.hset("metrics:api:gauges", Object.fromEntries(foreignGauges.map(([what, json]) => [what, json])));
    });
    const dir = await mkdtemp(join(tmpdir(), "metrics-aggregation-"));
    try {
      await writeFile(join(dir, "metrics.txt"), await a.aggregation.render());
      const check = Bun.spawnSync([PROMTOOL!, "check", "metrics"], { stdin: Bun.file(join(dir, "metrics.txt")), stdout: "pipe", stderr: "pipe" });
      expect(check.stdout.toString() + check.stderr.toString()).toBe("");
      expect(check.exitCode).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    await a.aggregation.close();
  });

  test("100,000 well-formed series added by someone else: a scrape reads at most MAX_AGGREGATED_FIELDS of them, and this process's own series all", async () => {
    const kv = createMemoryKeyValueStore();
    const lines: string[] = [];
    const metrics = createMetrics({ defaultMetrics: false });
    const aggregation = enableKvMetricsAggregation(metrics, kv, { flushIntervalMs: NEVER_MS, isolateId: "a", logger: createLogger({ write: (l) => lines.push(l) }) });
    const a = await buildTestApp({ db, kv, metrics });
    const flood = Object.fromEntries(
      Array.from({ length: 100_000 }, (_, i) => [JSON.stringify(["http_requests_total", [["endpoint", `/f${i}`], ["method", "GET"], ["status_code", "200"]]]), "1"]),
    );
    // Written before this process's own series, so that they come first in the hash.
    await kv.hset("metrics:api:totals", flood);
    for (let i = 0; i < 3; i++) await a.request("/health");
    const exposition = await aggregation.render();
    const samples = exposition.split("\n").filter((line) => line.startsWith("http_requests_total{"));
    expect(samples.length).toBeLessThanOrEqual(MAX_AGGREGATED_FIELDS + 1);
    expect(metricValue(exposition, HEALTH_OK)).toBe(3);
    expect(lines.some((line) => line.includes("metrics totals hash too large"))).toBe(true);
    await aggregation.close();
  });
});
