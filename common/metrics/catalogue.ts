import { Registry } from "./prom.ts";
import { createChatMetrics, type ChatMetrics } from "./chat.ts";
import { createHttpMetrics, type HttpMetrics } from "./http.ts";
import { createIndexingMetrics, INDEX_STORES, type IndexingMetrics } from "./indexing.ts";
import { createLlmMetrics, type LlmMetrics } from "./llm.ts";
import { CHARACTER_STATUSES, createProcessingMetrics, JOB_STATUSES, type ProcessingMetrics } from "./processing.ts";

/**
 * The metric catalogue of SPEC (SPEC: POST /character/chat, Metric catalogue: names, types, labels and label values exactly as it lists them) and
 * our own metrics under names of their own, on a registry per process (never the global one, so
 * tests can build as many apps as they like). Without the process metrics (index.ts adds those), so
 * an edge isolate, which has no process to describe, loads none of prom-client's Node-only parts.
 *
 * Every metric object always exists, so code never asks which process it runs in; a process exposes
 * those of its roles: the API the HTTP, queueing and chat metrics, the worker the processing and
 * indexing metrics, `npm start` (both roles in one process) all of them.
 */

export type MetricsRole = "api" | "worker";
export const METRICS_ROLES: readonly MetricsRole[] = ["api", "worker"];

/**
 * Series summed across processes through the key-value store (common/metrics/kv-aggregation.ts),
 * for isolate runtimes where a scrape reaches one isolate of many.
 */
export interface MetricsAggregation {
  /** Counts one finished request and starts a flush when one is due. */
  requestFinished(): void;
  /** Writes what this isolate recorded since its last flush; resolves once written (or failed and kept for the next). */
  flush(): Promise<void>;
  /** Resolves once no flush is in flight: what an edge entry hands to `waitUntil` after a response. */
  settled(): Promise<void>;
  /** The exposition summed over every isolate, this one flushed first. Rejects with KvError when the store fails. */
  render(): Promise<string>;
  /** Stops the flush timer and flushes one last time. */
  close(): Promise<void>;
}

export interface Metrics {
  readonly registry: Registry;
  /** Set by enableKvMetricsAggregation: the HTTP metrics count requests into it and `/metrics` renders its sums. */
  aggregation?: MetricsAggregation;
  http: HttpMetrics;
  processing: ProcessingMetrics;
  indexing: IndexingMetrics;
  chat: ChatMetrics;
  llm: LlmMetrics;
}

/** Registers the catalogue's metrics of these roles (both by default) on `registry`, a new one when absent. */
export function createCatalogueMetrics(options: { registry?: Registry; roles?: readonly MetricsRole[] } = {}): Metrics {
  const registry = options.registry ?? new Registry();
  const roles = options.roles ?? METRICS_ROLES;
  /** Where a metric of these roles registers: this registry if the process plays one of them. */
  const of = (...owners: MetricsRole[]) => (owners.some((r) => roles.includes(r)) ? [registry] : []);
  const api = of("api");
  const worker = of("worker");
  const both = of("api", "worker");

  // Created in this order, which is the order of the exposition.
  const metrics: Metrics = {
    registry,
    http: createHttpMetrics(api),
    processing: createProcessingMetrics({ api, worker, both }),
    indexing: createIndexingMetrics(worker),
    chat: createChatMetrics(api),
    llm: createLlmMetrics(both),
  };
  // Every label value SPEC's catalogue names exists from the start at 0, so an alert on, say, failed jobs has a
  // series to watch before the first failure.
  for (const status of JOB_STATUSES) metrics.processing.jobsProcessed.inc({ status }, 0);
  for (const status of CHARACTER_STATUSES) metrics.processing.charactersProcessed.inc({ status }, 0);
  for (const store of INDEX_STORES) metrics.indexing.chunksIndexed.inc({ store }, 0);
  return metrics;
}
