import { describe, expect, test } from "bun:test";
import { Histogram, Registry } from "prom-client";
import { SeriesHistogram } from "../../common/metrics/series-histogram.ts";

const BUCKETS = [0.005, 0.05, 0.5, 5];

/** The same observations through prom-client's Histogram and through SeriesHistogram, as exposition text. */
async function both(observations: [Record<"method" | "endpoint", string>, number][]) {
  const reference = new Registry();
  const ours = new Registry();
  const histogram = new Histogram({ name: "request_seconds", help: "Request duration.", labelNames: ["method", "endpoint"], buckets: BUCKETS, registers: [reference] });
  const fast = new SeriesHistogram({ name: "request_seconds", help: "Request duration.", labelNames: ["method", "endpoint"], buckets: BUCKETS, registers: [ours] });
  const series = new Map<string, ReturnType<typeof fast.series>>();
  for (const [labels, value] of observations) {
    histogram.observe(labels, value);
    const key = JSON.stringify(labels);
    if (!series.has(key)) series.set(key, fast.series(labels));
    series.get(key)!.observe(value);
  }
  return { reference: await reference.metrics(), ours: await ours.metrics() };
}

describe("SeriesHistogram", () => {
  test.each([
    ["one observation", [[{ method: "GET", endpoint: "/health" }, 0.001]]],
    ["values on bucket bounds, past the last bucket, and zero", [[{ method: "GET", endpoint: "/health" }, 0.005], [{ method: "GET", endpoint: "/health" }, 7], [{ method: "GET", endpoint: "/health" }, 0]]],
    [
      "two label sets",
      [
        [{ method: "GET", endpoint: "/health" }, 0.002],
        [{ method: "POST", endpoint: "/character/chat" }, 0.4],
        [{ method: "GET", endpoint: "/health" }, 0.02],
      ],
    ],
  ] as const)("reads out exactly as prom-client's Histogram: %s", async (_, observations) => {
    const { reference, ours } = await both(observations.map(([labels, value]) => [{ ...labels }, value]));
    expect(ours).toBe(reference);
  });

  test("a reset zeroes every series, which keep counting after it", async () => {
    const registry = new Registry();
    const fast = new SeriesHistogram({ name: "request_seconds", help: "Request duration.", labelNames: ["endpoint"], buckets: BUCKETS, registers: [registry] });
    const health = fast.series({ endpoint: "/health" });
    health.observe(1);
    registry.resetMetrics();
    expect(await registry.metrics()).toContain('request_seconds_count{endpoint="/health"} 0');
    health.observe(1);
    expect(await registry.metrics()).toContain('request_seconds_count{endpoint="/health"} 1');
  });
});
