import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { LlmPurpose } from "./llm/index.ts";

/**
 * The whole metric catalogue, registered once per process on its own registry (never the global
 * one, so tests can build as many apps as they like). The API serves it on /metrics; a worker
 * running alone serves the same catalogue on METRICS_PORT.
 */

/** Label value for requests that matched no route, so scanners cannot create new series. */
export const UNMATCHED_ENDPOINT = "unmatched";

export const PIPELINE_PHASES = ["download", "booknlp", "extract", "prompt", "index", "total"] as const;
export type PipelinePhase = (typeof PIPELINE_PHASES)[number];

export const JOB_STATUSES = ["completed", "failed", "retried", "dead_lettered"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export const CHAT_OUTCOMES = ["ok", "404", "429", "502", "aborted"] as const;
export type ChatOutcome = (typeof CHAT_OUTCOMES)[number];

const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const PIPELINE_BUCKETS = [0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
const TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10];

/**
 * Left out of prom-client's defaults: the per-heap-space gauges are slow to collect under Bun, and
 * the `nodejs_active_*_total` gauges break the rule that only counters end in `_total` (promtool
 * rejects them); their `nodejs_active_*` twins carry the same numbers.
 */
const EXCLUDED_DEFAULT_METRIC_PREFIXES = ["nodejs_heap_space_", "nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

export interface Metrics {
  readonly registry: Registry;
  http: {
    requests: Counter<"method" | "endpoint" | "status_code">;
    duration: Histogram<"method" | "endpoint">;
    inProgress: Gauge<"method" | "endpoint">;
    /**
     * Runs `flush` before the request counter and the in-progress gauge are read (an exposition, or
     * their get()), so that a recorder that counts in plain numbers on the request path writes them
     * there first.
     */
    beforeRead(flush: () => void): void;
  };
  processing: {
    jobsQueued: Counter;
    queueDepth: Gauge;
    activeWorkers: Gauge;
    jobsProcessed: Counter<"status">;
    pipelineDuration: Histogram<"phase">;
    itemsSkipped: Counter<"kind">;
  };
  indexing: {
    chunks: Counter<"store">;
    duration: Histogram<"store">;
    errors: Counter<"store">;
  };
  chat: {
    requests: Counter<"outcome">;
    timeToFirstToken: Histogram;
    lockUnavailable: Counter;
  };
  llm: {
    tokens: Counter<"purpose" | "type">;
  };
}

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event loop); on by default, off in tests that compare output. */
  defaultMetrics?: boolean;
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    for (const metric of registry.getMetricsAsArray()) {
      const name = (metric as unknown as { name: string }).name;
      if (EXCLUDED_DEFAULT_METRIC_PREFIXES.some((p) => name.startsWith(p))) registry.removeSingleMetric(name);
    }
  }
  const registers = [registry];
  const httpFlushes: (() => void)[] = [];
  const flushHttp = () => {
    for (const flush of httpFlushes) flush();
  };

  return {
    registry,
    http: {
      requests: new Counter({
        name: "http_requests_total",
        help: "HTTP requests handled, by method, route template and status code.",
        labelNames: ["method", "endpoint", "status_code"],
        registers,
        collect: flushHttp,
      }),
      duration: new Histogram({
        name: "http_request_duration_seconds",
        help: "HTTP request duration in seconds, until the last byte of a stream.",
        labelNames: ["method", "endpoint"],
        buckets: HTTP_BUCKETS,
        registers,
      }),
      inProgress: new Gauge({
        name: "http_requests_in_progress",
        help: "HTTP requests being handled right now, streams included.",
        labelNames: ["method", "endpoint"],
        registers,
        collect: flushHttp,
      }),
      beforeRead: (flush) => void httpFlushes.push(flush),
    },
    processing: {
      jobsQueued: new Counter({
        name: "processing_jobs_queued_total",
        help: "Book processing jobs pushed onto processing_queue.",
        registers,
      }),
      queueDepth: new Gauge({
        name: "processing_queue_depth",
        help: "Jobs waiting in processing_queue when last observed.",
        registers,
      }),
      activeWorkers: new Gauge({
        name: "processing_active_workers",
        help: "Ingest workers currently processing a job.",
        registers,
      }),
      jobsProcessed: new Counter({
        name: "processing_jobs_processed_total",
        help: "Book processing jobs finished, by status.",
        labelNames: ["status"],
        registers,
      }),
      pipelineDuration: new Histogram({
        name: "processing_pipeline_duration_seconds",
        help: "Time spent in each ingestion pipeline phase.",
        labelNames: ["phase"],
        buckets: PIPELINE_BUCKETS,
        registers,
      }),
      itemsSkipped: new Counter({
        name: "processing_items_skipped_total",
        help: "Characters, chunk batches or embeddings skipped after their retries failed.",
        labelNames: ["kind"],
        registers,
      }),
    },
    indexing: {
      chunks: new Counter({
        name: "indexing_chunks_total",
        help: "Chunks written to an index, by store (qdrant = vector index, typesense = full-text index).",
        labelNames: ["store"],
        registers,
      }),
      duration: new Histogram({
        name: "indexing_duration_seconds",
        help: "Time to write one batch of chunks to an index, by store.",
        labelNames: ["store"],
        buckets: HTTP_BUCKETS,
        registers,
      }),
      errors: new Counter({
        name: "indexing_errors_total",
        help: "Failed index writes, by store.",
        labelNames: ["store"],
        registers,
      }),
    },
    chat: {
      requests: new Counter({
        name: "chat_requests_total",
        help: "Chat requests by outcome (ok, 404, 429, 502, aborted).",
        labelNames: ["outcome"],
        registers,
      }),
      timeToFirstToken: new Histogram({
        name: "chat_time_to_first_token_seconds",
        help: "From request received to first token sent.",
        buckets: TTFT_BUCKETS,
        registers,
      }),
      lockUnavailable: new Counter({
        name: "chat_lock_unavailable_total",
        help: "Chats that proceeded without the session lock because the key-value store failed.",
        registers,
      }),
    },
    llm: {
      tokens: new Counter({
        name: "llm_tokens_total",
        help: "LLM tokens used, by purpose (rewrite, chat, summary, extract, persona, characters, embedding) and type (prompt, completion).",
        labelNames: ["purpose", "type"],
        registers,
      }),
    },
  };
}

/** The UsageListener the composition root hands to the LLM adapter. */
export function countTokens(metrics: Metrics, purpose: LlmPurpose, prompt: number, completion: number): void {
  if (prompt > 0) metrics.llm.tokens.inc({ purpose, type: "prompt" }, prompt);
  if (completion > 0) metrics.llm.tokens.inc({ purpose, type: "completion" }, completion);
}
