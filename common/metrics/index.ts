import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { LlmPurpose } from "../llm/index.ts";
import type { IndexStoreLabel } from "../retrieval/types.ts";

/**
 * The metric catalogue of SPEC (names, types, labels and label values exactly as it lists them) and
 * our own metrics under names of their own, on a registry per process (never the global one, so
 * tests can build as many apps as they like).
 *
 * Every metric object always exists, so code never asks which process it runs in; a process exposes
 * those of its roles: the API the HTTP, queueing and chat metrics, the worker the processing and
 * indexing metrics, `npm start` (both roles in one process) all of them.
 */

/** One label set of a SeriesHistogram: observing costs a bucket search and three additions. */
export interface HistogramSeries {
  observe(value: number): void;
}

/**
 * A histogram for the request path. prom-client's own `observe` validates and hashes the labels on
 * every call, which cost `GET /health` a quarter of a bare server's rate; here `series(labels)` is
 * made once per label set and counts in plain numbers. It registers on prom-client registries like
 * their own metrics (the `get()` and `reset()` they call) and reads out in the same exposition format.
 */
export class SeriesHistogram<T extends string> {
  readonly type = "histogram";
  readonly aggregator = "sum";
  readonly name: string;
  readonly help: string;
  private readonly bounds: readonly number[];
  private readonly entries: { labels: Record<T, string>; buckets: Float64Array; sum: number; count: number }[] = [];

  /** `labelNames` as prom-client takes them: they type the series' labels. */
  constructor(config: { name: string; help: string; labelNames: readonly T[]; buckets: readonly number[]; registers: readonly Registry[] }) {
    this.name = config.name;
    this.help = config.help;
    this.bounds = [...config.buckets].sort((a, b) => a - b);
    for (const registry of config.registers) registry.registerMetric(this as unknown as Parameters<Registry["registerMetric"]>[0]);
  }

  series(labels: Record<T, string>): HistogramSeries {
    const entry = { labels: { ...labels }, buckets: new Float64Array(this.bounds.length), sum: 0, count: 0 };
    this.entries.push(entry);
    const bounds = this.bounds;
    return {
      observe(value) {
        entry.sum += value;
        entry.count++;
        for (let i = 0; i < bounds.length; i++) {
          if (value <= bounds[i]!) {
            entry.buckets[i]!++;
            break;
          }
        }
      },
    };
  }

  async get() {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const { labels, buckets, sum, count } of this.entries) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += buckets[i]!;
        values.push({ labels: { le, ...labels }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push(
        { labels: { le: "+Inf", ...labels }, value: count, metricName: `${this.name}_bucket` },
        { labels: { ...labels }, value: sum, metricName: `${this.name}_sum` },
        { labels: { ...labels }, value: count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset() {
    for (const entry of this.entries) {
      entry.buckets.fill(0);
      entry.sum = 0;
      entry.count = 0;
    }
  }
}

/** Label value for requests that matched no route, so scanners cannot create new series. */
export const UNMATCHED_ENDPOINT = "unmatched";

export type MetricsRole = "api" | "worker";
export const METRICS_ROLES: readonly MetricsRole[] = ["api", "worker"];

/** Every timed step of an ingestion, as the pipeline reports them (the CLI prints all of them). */
export const PIPELINE_PHASES = ["download", "booknlp", "extract", "prompt", "index", "total"] as const;
export type PipelinePhase = (typeof PIPELINE_PHASES)[number];
/** The `phase` values SPEC gives processing_pipeline_duration_seconds; download and total have metrics of their own. */
export const CATALOGUE_PHASES = ["booknlp", "extract", "prompt", "index"] as const;
type CataloguePhase = (typeof CATALOGUE_PHASES)[number];

/** A job is `completed`, or `failed` once when given up on (rejected, or out of attempts). */
export const JOB_STATUSES = ["completed", "failed"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
/** A character found in the book either gets its persona (`completed`) or is skipped after a pass failed it. */
export const CHARACTER_STATUSES = ["completed", "failed"] as const;
/**
 * indexing_duration_seconds{pipeline}: how long one batch of chunks took through one of the two
 * index pipelines, retries included. `vector`: embedding the batch and writing it to the vector
 * index; `full_text`: writing it to the full-text index.
 */
export const INDEXING_PIPELINES = ["vector", "full_text"] as const;
export type IndexingPipeline = (typeof INDEXING_PIPELINES)[number];
/** The `store` label: the role of the index, whichever adapter serves it. */
const INDEX_STORES: readonly IndexStoreLabel[] = ["qdrant", "typesense"];

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
    duration: SeriesHistogram<"method" | "endpoint">;
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
    jobsRetried: Counter;
    jobsDeadLettered: Counter;
    charactersExtracted: Counter;
    charactersProcessed: Counter<"status">;
    pipelineDuration: Histogram<"phase">;
    downloadDuration: Histogram;
    jobDuration: Histogram;
    itemsSkipped: Counter<"kind">;
  };
  indexing: {
    chunksGenerated: Counter;
    chunksIndexed: Counter<"store">;
    embeddingsGenerated: Counter;
    duration: Histogram<"pipeline">;
    writeDuration: Histogram<"store">;
    errors: Counter<"store">;
  };
  chat: {
    requests: Counter<"outcome">;
    timeToFirstToken: Histogram;
    lockUnavailable: Counter;
    /** Prompt parts cut (or messages and passages left out) to fit the context budget (common/prompt/budget.ts). */
    promptTrims: Counter<"purpose" | "part">;
  };
  llm: {
    tokens: Counter<"purpose" | "type">;
  };
}

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event loop); on by default, off in tests that compare output. */
  defaultMetrics?: boolean;
  /** The roles whose metrics this process exposes; both by default. */
  roles?: readonly MetricsRole[];
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
  const roles = options.roles ?? METRICS_ROLES;
  /** Where a metric of these roles registers: this registry if the process plays one of them. */
  const of = (...owners: MetricsRole[]) => (owners.some((r) => roles.includes(r)) ? [registry] : []);
  const api = of("api");
  const worker = of("worker");
  const both = of("api", "worker");
  const httpFlushes: (() => void)[] = [];
  const flushHttp = () => {
    for (const flush of httpFlushes) flush();
  };

  const metrics: Metrics = {
    registry,
    http: {
      requests: new Counter({
        name: "http_requests_total",
        help: "HTTP requests handled, by method, route template and status code.",
        labelNames: ["method", "endpoint", "status_code"],
        registers: api,
        collect: flushHttp,
      }),
      duration: new SeriesHistogram({
        name: "http_request_duration_seconds",
        help: "HTTP request duration in seconds, until the last byte of a stream.",
        labelNames: ["method", "endpoint"],
        buckets: HTTP_BUCKETS,
        registers: api,
      }),
      inProgress: new Gauge({
        name: "http_requests_in_progress",
        help: "HTTP requests being handled right now, streams included.",
        labelNames: ["method", "endpoint"],
        registers: api,
        collect: flushHttp,
      }),
      beforeRead: (flush) => void httpFlushes.push(flush),
    },
    processing: {
      jobsQueued: new Counter({
        name: "processing_jobs_queued_total",
        help: "Book processing jobs pushed onto processing_queue.",
        registers: api,
      }),
      queueDepth: new Gauge({
        // Both processes see the shared queue: the API after each push, the worker after each claim.
        name: "processing_queue_depth",
        help: "Jobs waiting in processing_queue when this process last looked.",
        registers: both,
      }),
      activeWorkers: new Gauge({
        name: "processing_active_workers",
        help: "Ingest workers currently processing a job.",
        registers: worker,
      }),
      jobsProcessed: new Counter({
        name: "processing_jobs_processed_total",
        help: "Book processing jobs finished: completed, or failed (rejected, or given up on after its last attempt).",
        labelNames: ["status"],
        registers: worker,
      }),
      jobsRetried: new Counter({
        name: "processing_jobs_retried_total",
        help: "Job attempts that failed (or whose worker went away) and were queued again.",
        registers: worker,
      }),
      jobsDeadLettered: new Counter({
        name: "processing_jobs_dead_lettered_total",
        help: "Queue entries moved to the dead-letter list: jobs out of attempts, and entries that are not job records.",
        registers: worker,
      }),
      charactersExtracted: new Counter({
        name: "processing_characters_extracted_total",
        help: "Characters found in books by the book NLP step (or the LLM discovery pass).",
        registers: worker,
      }),
      charactersProcessed: new Counter({
        name: "processing_characters_processed_total",
        help: "Characters through both LLM passes (completed) or skipped after a pass failed them (failed).",
        labelNames: ["status"],
        registers: worker,
      }),
      pipelineDuration: new Histogram({
        name: "processing_pipeline_duration_seconds",
        help: "Time spent in each ingestion pipeline phase (booknlp, extract, prompt, index).",
        labelNames: ["phase"],
        buckets: PIPELINE_BUCKETS,
        registers: worker,
      }),
      downloadDuration: new Histogram({
        name: "processing_download_duration_seconds",
        help: "Time to download a book file to the worker.",
        buckets: PIPELINE_BUCKETS,
        registers: worker,
      }),
      jobDuration: new Histogram({
        name: "processing_job_duration_seconds",
        help: "Time from a job's start to its end, every phase included.",
        buckets: PIPELINE_BUCKETS,
        registers: worker,
      }),
      itemsSkipped: new Counter({
        name: "processing_items_skipped_total",
        help: "Characters, chunk batches or embeddings skipped after their retries failed.",
        labelNames: ["kind"],
        registers: worker,
      }),
    },
    indexing: {
      chunksGenerated: new Counter({
        name: "indexing_chunks_generated_total",
        help: "Chunks the books were split into.",
        registers: worker,
      }),
      chunksIndexed: new Counter({
        name: "indexing_chunks_indexed_total",
        help: "Chunks written to an index, by store (qdrant = vector index, typesense = full-text index, whichever adapter serves it).",
        labelNames: ["store"],
        registers: worker,
      }),
      embeddingsGenerated: new Counter({
        name: "indexing_embeddings_generated_total",
        help: "Chunk embeddings received from the embedding model.",
        registers: worker,
      }),
      duration: new Histogram({
        name: "indexing_duration_seconds",
        help: "Time for one batch of chunks through an index pipeline, retries included (vector = embed and write to the vector index; full_text = write to the full-text index).",
        labelNames: ["pipeline"],
        buckets: HTTP_BUCKETS,
        registers: worker,
      }),
      writeDuration: new Histogram({
        name: "indexing_write_duration_seconds",
        help: "Time of one try at writing a batch of chunks to an index, by store.",
        labelNames: ["store"],
        buckets: HTTP_BUCKETS,
        registers: worker,
      }),
      errors: new Counter({
        name: "indexing_errors_total",
        help: "Failed index writes, by store.",
        labelNames: ["store"],
        registers: worker,
      }),
    },
    chat: {
      requests: new Counter({
        name: "chat_requests_total",
        help: "Chat requests by outcome (ok, 404, 429, 502, aborted).",
        labelNames: ["outcome"],
        registers: api,
      }),
      timeToFirstToken: new Histogram({
        name: "chat_time_to_first_token_seconds",
        help: "From request received to first token sent.",
        buckets: TTFT_BUCKETS,
        registers: api,
      }),
      lockUnavailable: new Counter({
        name: "chat_lock_unavailable_total",
        help: "Chats that proceeded without the session lock because the key-value store failed.",
        registers: api,
      }),
      promptTrims: new Counter({
        name: "chat_prompt_trims_total",
        help: "Prompt parts cut, or history messages and passages left out, to fit the context budget, by request purpose (chat, rewrite, summary) and part (persona, preferences, passages, summary, history, user_message).",
        labelNames: ["purpose", "part"],
        registers: api,
      }),
    },
    llm: {
      tokens: new Counter({
        name: "llm_tokens_total",
        help: "LLM tokens used, by purpose (rewrite, chat, summary, extract, persona, characters, embedding) and type (prompt, completion).",
        labelNames: ["purpose", "type"],
        registers: both,
      }),
    },
  };
  // Every label value SPEC names exists from the start at 0, so an alert on, say, failed jobs has a
  // series to watch before the first failure.
  for (const status of JOB_STATUSES) metrics.processing.jobsProcessed.inc({ status }, 0);
  for (const status of CHARACTER_STATUSES) metrics.processing.charactersProcessed.inc({ status }, 0);
  for (const store of INDEX_STORES) metrics.indexing.chunksIndexed.inc({ store }, 0);
  return metrics;
}

/** Records a pipeline step's time under the metric SPEC gives its phase, or under ours for the other two. */
export function observePhase(metrics: Metrics, phase: PipelinePhase, seconds: number): void {
  if (phase === "download") metrics.processing.downloadDuration.observe(seconds);
  else if (phase === "total") metrics.processing.jobDuration.observe(seconds);
  else metrics.processing.pipelineDuration.observe({ phase: phase satisfies CataloguePhase }, seconds);
}

/** The UsageListener the composition root hands to the LLM adapter. */
export function countTokens(metrics: Metrics, purpose: LlmPurpose, prompt: number, completion: number): void {
  if (prompt > 0) metrics.llm.tokens.inc({ purpose, type: "prompt" }, prompt);
  if (completion > 0) metrics.llm.tokens.inc({ purpose, type: "completion" }, completion);
}
