import type { BookInfo } from "../../common/llm/prompt-format.ts";
import type { Book } from "../../common/contract/rows.ts";
import type { DownloadOptions, ResolveHost } from "../../common/file-url.ts";
import type { Logger, LogFields } from "../../common/log.ts";
import type { PipelinePhase } from "../../common/metrics/processing.ts";
import type { SelectionOptions } from "../characters/character-selection.ts";
import { DEFAULT_ITEM_RETRIES, DEFAULT_ITEM_RETRY_BASE_DELAY_MS, type ItemRetryOptions } from "./isolate-failures.ts";
import type { Deps } from "../../common/deps.ts";

/** One ingestion as every phase sees it: the job, what it runs on, its options, and how it counts skips and reports progress. */

/** What a run takes from the composition root; `kv` only to drop the chat cache's copies of the characters it rewrites. */
export type PipelineDeps = Pick<Deps, "config" | "logger" | "metrics" | "db" | "kv" | "llm" | "vectorIndex" | "textIndex">;

/** Where the book's text comes from: the job's file_url, or a local file (the CLI). */
export type BookSource = { url: string } | { path: string };

export interface PipelineJob {
  bookId: string;
  source: BookSource;
  jobId?: string;
}

export type SkipKind = "character" | "embedding_batch" | "chunk_batch" | "discovery_batch";

export interface ProgressEvent {
  phase: Exclude<PipelinePhase, "total">;
  done: number;
  /** 0 when unknown (a download without Content-Length). */
  total: number;
}

export interface PipelineOptions {
  signal?: AbortSignal;
  /** Parent of the per-book temporary folder; the system's temp folder by default. */
  workDir?: string;
  selection?: SelectionOptions;
  /** Overrides the configured CHARACTER_CONCURRENCY. */
  characterConcurrency?: number;
  retries?: number;
  retryBaseDelayMs?: number;
  index?: { batchSize?: number; concurrency?: number; chunkTokens?: number };
  /**
   * Start the index preparation only once the NLP step has found the characters (English books, whose
   * NLP runs here); by default when the machine has fewer than MIN_CORES_FOR_INDEX_BESIDE_NLP cores.
   */
  indexAfterNlp?: boolean;
  discovery?: { samples?: number; samplesPerCall?: number };
  downloadTimeoutMs?: number;
  /** Overrides the configured CHARACTER_CHECKPOINTS. */
  characterCheckpoints?: number;
  /** Overrides DEFAULT_MIN_DOWNLOAD_BYTES_PER_SECOND and its grace period (common/file-url.ts). */
  downloadMinRate?: { bytesPerSecond: number; graceMs: number };
  booknlpTimeoutMs?: number;
  /** For tests: the fetch and DNS the download uses. */
  fetch?: DownloadOptions["fetch"];
  resolveHost?: ResolveHost;
  onProgress?: (event: ProgressEvent) => void;
}

export interface Run {
  deps: PipelineDeps;
  job: PipelineJob;
  log: Logger;
  signal: AbortSignal | undefined;
  options: PipelineOptions;
  retry: ItemRetryOptions;
  skipped: Partial<Record<SkipKind, number>>;
  skip(kind: SkipKind, err: unknown, fields: LogFields): void;
  progress(phase: ProgressEvent["phase"], done: number, total: number): void;
}

export function createRun(deps: PipelineDeps, job: PipelineJob, options: PipelineOptions): Run {
  const log = deps.logger.child({ book_id: job.bookId, ...(job.jobId ? { job_id: job.jobId } : {}) });
  const skipped: Partial<Record<SkipKind, number>> = {};
  return {
    deps,
    job,
    log,
    signal: options.signal,
    options,
    retry: {
      retries: options.retries ?? DEFAULT_ITEM_RETRIES,
      baseDelayMs: options.retryBaseDelayMs ?? DEFAULT_ITEM_RETRY_BASE_DELAY_MS,
      ...(options.signal ? { signal: options.signal } : {}),
    },
    skipped,
    skip(kind, err, fields) {
      skipped[kind] = (skipped[kind] ?? 0) + 1;
      deps.metrics.processing.itemsSkipped.inc({ kind });
      log.warn("item skipped after retries", { kind, ...fields, error: err });
    },
    progress: (phase, done, total) => options.onProgress?.({ phase, done, total }),
  };
}

export function bookInfo(book: Book): BookInfo {
  return { title: book.title, author: book.author };
}

/** Chat caches characters, their checkpoints and the book's positions for an hour; a re-ingestion must reach the next chat turn. */
export async function forgetCached(run: Run, keys: readonly string[]): Promise<void> {
  const results = await Promise.allSettled(keys.map((key) => run.deps.kv.del(key)));
  if (results.some((r) => r.status === "rejected")) {
    run.log.warn("could not drop cached characters or positions; chat may serve the old ones for up to an hour", { book_id: run.job.bookId });
  }
}
