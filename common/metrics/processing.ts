import { Counter, Gauge, Histogram, type Registry } from "./prom.ts";

/** The job, queue and pipeline metrics of SPEC's catalogue (SPEC: POST /character/chat, Metric catalogue; the worker's, and the API's queue pushes), and ours beside them. */

/**
 * Every timed step of an ingestion, in order, as the pipeline reports them (the CLI prints all of
 * them, the benchmark tabulates them): `text` is the file decoded, cut to the work and its language
 * told; `guard` the spoiler guard's data (common/spoiler-guard/shingles.ts) built and written.
 */
export const PIPELINE_PHASES = ["download", "text", "booknlp", "extract", "prompt", "index", "guard", "total"] as const;
export type PipelinePhase = (typeof PIPELINE_PHASES)[number];
/** The `phase` values SPEC gives processing_pipeline_duration_seconds; download and total have metrics of their own. */
export const CATALOGUE_PHASES = ["booknlp", "extract", "prompt", "index"] as const;
type CataloguePhase = (typeof CATALOGUE_PHASES)[number];
/** The steps SPEC's catalogue does not name, timed in processing_step_duration_seconds{step}. */
export const OTHER_STEPS = ["text", "guard"] as const;
type OtherStep = (typeof OTHER_STEPS)[number];

/** A job is `completed`, or `failed` once when given up on (rejected, or out of attempts). */
export const JOB_STATUSES = ["completed", "failed"] as const;
/** A character found in the book either gets its persona (`completed`) or is skipped after a pass failed it. */
export const CHARACTER_STATUSES = ["completed", "failed"] as const;

const PIPELINE_BUCKETS = [0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

export interface ProcessingMetrics {
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
  stepDuration: Histogram<"step">;
  jobDuration: Histogram;
  itemsSkipped: Counter<"kind">;
}

export function createProcessingMetrics(registers: { api: Registry[]; worker: Registry[]; both: Registry[] }): ProcessingMetrics {
  const { api, worker, both } = registers;
  return {
    jobsQueued: new Counter({
      name: "processing_jobs_queued_total",
      help: "Book processing jobs pushed onto processing_queue.",
      registers: api,
    }),
    queueDepth: new Gauge({
      // Both processes see the shared queue: the API after each push, the worker after each claim.
      name: "processing_queue_depth",
      // Summed over isolates it would count one queue many times: with METRICS_AGGREGATION=kv the largest live reading shows.
      aggregator: "max",
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
    stepDuration: new Histogram({
      name: "processing_step_duration_seconds",
      help: "Time spent in each ingestion step outside SPEC's phases: text (decode, cut to the work, language), guard (the spoiler guard's data).",
      labelNames: ["step"],
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
  };
}

/** Records a pipeline step's time under the metric SPEC gives its phase, or under ours for the others. */
export function observePhase(metrics: { processing: ProcessingMetrics }, phase: PipelinePhase, seconds: number): void {
  if (phase === "download") metrics.processing.downloadDuration.observe(seconds);
  else if (phase === "total") metrics.processing.jobDuration.observe(seconds);
  else if (phase === "text" || phase === "guard") metrics.processing.stepDuration.observe({ step: phase satisfies OtherStep }, seconds);
  else metrics.processing.pipelineDuration.observe({ phase: phase satisfies CataloguePhase }, seconds);
}
