import { afterEach, describe, expect, test } from "bun:test";
import perfHooks from "node:perf_hooks";
import { createMetrics, EVENT_LOOP_SAMPLE_MS } from "../../common/metrics/index.ts";

/** The process metrics as the API and the worker collect them. */

const original = perfHooks.monitorEventLoopDelay;
afterEach(() => {
  perfHooks.monitorEventLoopDelay = original;
});

describe("process metrics", () => {
  test("the event loop's lag is sampled every EVENT_LOOP_SAMPLE_MS (100 ms), not every 10 ms, so an idle process is not woken a hundred times a second", () => {
    const resolutions: (number | undefined)[] = [];
    perfHooks.monitorEventLoopDelay = (options) => {
      resolutions.push(options?.resolution);
      return original(options);
    };
    const metrics = createMetrics();
    expect(resolutions).toEqual([EVENT_LOOP_SAMPLE_MS]);
    expect(EVENT_LOOP_SAMPLE_MS).toBe(100);
    expect(metrics.registry.getSingleMetric("nodejs_eventloop_lag_p99_seconds")).toBeDefined();
  });
});
