import collectDefaultMetrics from "prom-client/lib/defaultMetrics.js";
import { createCatalogueMetrics, type Metrics, type MetricsRole } from "./catalogue.ts";
import { Registry } from "./prom.ts";

export { METRICS_ROLES, type Metrics, type MetricsRole } from "./catalogue.ts";

/**
 * The metrics of a process: the catalogue (catalogue.ts) and, first in the exposition, prom-client's
 * process metrics (CPU, memory, event loop).
 */

/**
 * Left out of prom-client's defaults: the per-heap-space gauges are slow to collect under Bun, and
 * the `nodejs_active_*_total` gauges break the rule that only counters end in `_total` (promtool
 * rejects them); their `nodejs_active_*` twins carry the same numbers.
 */
const EXCLUDED_DEFAULT_METRIC_PREFIXES = ["nodejs_heap_space_", "nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

/**
 * How often the process metrics sample the event loop's lag (`nodejs_eventloop_lag_*`). prom-client's
 * 10 ms woke the process a hundred times a second: about 3 ms of CPU per second when idle, which a
 * reply streamed over seconds paid per token (a tenth or more of its CPU per token at one session);
 * at 100 ms it costs a quarter of that, and a lag worth alerting on still shows.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event loop); on by default, off in tests that compare output. */
  defaultMetrics?: boolean;
  /** The roles whose metrics this process exposes; both by default. */
  roles?: readonly MetricsRole[];
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    for (const metric of registry.getMetricsAsArray()) {
      const name = (metric as unknown as { name: string }).name;
      if (EXCLUDED_DEFAULT_METRIC_PREFIXES.some((p) => name.startsWith(p))) registry.removeSingleMetric(name);
    }
  }
  return createCatalogueMetrics({ registry, ...(options.roles ? { roles: options.roles } : {}) });
}
