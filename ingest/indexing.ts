import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CHUNK_TOKENS } from "../common/chunking.ts";
import type { LanguageModel } from "../common/llm/index.ts";
import type { Metrics } from "../common/metrics/index.ts";
import type { IndexingPipeline, IndexStoreLabel } from "../common/metrics/indexing.ts";
import type { IndexedChunk } from "../common/retrieval/types.ts";
import type { TextIndex } from "../common/text/index.ts";
import type { VectorIndex } from "../common/vector/index.ts";
import { chunksInThread } from "./chunk-stream.ts";
import { IndexSpool, type SpooledBatch, type SpoolTotals } from "./index-spool.ts";
import { forEachBounded, isolateFailures, type IsolationOptions } from "./work-items.ts";

/**
 * The index phase, in two stages joined by a spool (index-spool.ts). prepareIndex chunks the book in a
 * thread of its own and embeds each batch, spooling both to files; it needs only the text, so the
 * pipeline starts it with the NLP. writeIndex drops the book's collections and writes each spooled
 * batch to the full-text index and, once embedded, to the vector index, both at once, while the first
 * stage goes on. Only the second stage touches the indexes, and it starts only once the characters
 * are saved: a re-ingestion whose character passes fail leaves the book's indexes as they were.
 *
 * A batch that still fails after its retries is tried again in halves, and halves of those, so only
 * the chunks that fail alone are skipped and counted (ingest/work-items.ts, isolateFailures); a chunk
 * whose embedding fails is in the full-text index only. If an index would end up with nothing at all, the
 * store or the embedding model is down rather than one batch being bad: that fails the attempt, so
 * the job is retried later instead of leaving a book nobody can search.
 */

export const DEFAULT_INDEX_BATCH_SIZE = 64;
export const DEFAULT_INDEX_CONCURRENCY = 2;
/**
 * A full garbage collection after this many chunks. Every batch leaves its texts, request bodies and
 * vectors behind, and the engine lets that garbage pile up for hundreds of MiB before it collects:
 * on a 52.7 MB book the worker peaked at 863 MiB on PostgreSQL and 906 MiB on the embedded database
 * without it, 543 and 661 MiB with it, in the same wall time (bench/large-book.ts).
 */
export const COLLECT_EVERY_CHUNKS = 4096;

export type IndexSkipKind = "embedding_batch" | "chunk_batch";

export interface IndexDeps {
  llm: LanguageModel;
  vectorIndex: VectorIndex;
  textIndex: TextIndex;
  metrics: Metrics;
}

export interface IndexOptions {
  batchSize?: number;
  concurrency?: number;
  chunkTokens?: number;
  /** Tries per batch, and how many chunks of one batch may fail alone before the rest of it is given up. */
  retry: IsolationOptions;
  signal?: AbortSignal;
  /** Chunks of one batch given up on, by chunk index. */
  onSkip?: (kind: IndexSkipKind, store: IndexStoreLabel | "embedding", chunkIndexes: number[], err: unknown) => void;
  /** Characters of the text indexed so far, of `total`. */
  onProgress?: (done: number, total: number) => void;
  /** A full collection every this many chunks (default COLLECT_EVERY_CHUNKS) ... */
  collectEvery?: number;
  /** ... made by this (default: Bun's synchronous full collection). */
  collect?: () => void;
}

export interface IndexReport {
  chunks: number;
  /** Chunks written to the vector index. */
  vectors: number;
  /** Chunks written to the full-text index. */
  documents: number;
  /** Where chunk i ends in the book, as a position (0-1), for every chunk, written or skipped: spoiler-safe chat searches by it. */
  chunkEnds: number[];
}

export class IndexUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "IndexUnavailableError";
  }
}

/** Counts the chunks a stage has passed and makes a full collection every `collectEvery` of them. */
function collector(options: Pick<IndexOptions, "collectEvery" | "collect">): (chunks: number) => void {
  const every = options.collectEvery ?? COLLECT_EVERY_CHUNKS;
  const collect = options.collect ?? (() => Bun.gc(true));
  let since = 0;
  return (chunks) => {
    since += chunks;
    if (since < every) return;
    since = 0;
    collect();
  };
}

/**
 * The first stage: the book is chunked in a thread of its own at a lower priority (chunk-thread.ts)
 * and each batch embedded (a few at a time) as it comes, and both are spooled (index-spool.ts);
 * nothing is written to the indexes. It needs only the text, so the pipeline runs it beside the NLP
 * and the character passes. The spool ends (or fails) with it.
 */
export async function prepareIndex(deps: Pick<IndexDeps, "llm" | "metrics">, text: string, spool: IndexSpool, options: IndexOptions): Promise<SpoolTotals> {
  const { metrics } = deps;
  const { totals } = spool;
  try {
    await spool.open();
    const collect = collector(options);
    const chunks = chunksInThread(text, {
      chunkTokens: options.chunkTokens ?? DEFAULT_CHUNK_TOKENS,
      batchSize: options.batchSize ?? DEFAULT_INDEX_BATCH_SIZE,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    await forEachBounded(chunks, options.concurrency ?? DEFAULT_INDEX_CONCURRENCY, async (batch, n) => {
      options.signal?.throwIfAborted();
      for (const c of batch) totals.chunkEnds[c.chunkIndex] = c.end;
      const items: IndexedChunk[] = batch.map((c) => ({ chunkIndex: c.chunkIndex, text: c.text }));
      totals.chunks += items.length;
      metrics.indexing.chunksGenerated.inc(items.length);
      const started = performance.now();
      const embedding = await isolateFailures(items, (piece) => deps.llm.embed(piece.map((c) => c.text), options.signal ? { signal: options.signal } : {}), options.retry);
      const vectors = embedding.done.flatMap((piece) => piece.value);
      const embedded = embedding.done.flatMap((piece) => piece.items.map((c) => c.chunkIndex));
      metrics.indexing.embeddingsGenerated.inc(vectors.length);
      const dimension = vectors[0]?.length ?? 0;
      let packed: Float32Array | undefined;
      if (vectors.length > 0) {
        packed = new Float32Array(vectors.length * dimension);
        vectors.forEach((v, i) => packed!.set(v, i * dimension));
      }
      if (embedding.failed.length > 0) {
        totals.lastError = embedding.error;
        options.onSkip?.("embedding_batch", "embedding", embedding.failed.map((c) => c.chunkIndex), embedding.error);
      }
      const spooled: SpooledBatch = { chunks: items, dimension, embedded, embedSeconds: (performance.now() - started) / 1000 };
      await spool.add(n, spooled, packed, batch.reduce((total, c) => total + c.text.length, 0));
      reportProgress(spool, options);
      collect(items.length);
    });
    spool.finish();
    return totals;
  } catch (err) {
    spool.fail(err);
    throw err;
  }
}

/** The index phase's progress in characters of the text: half for the batches spooled, half for those written. */
function reportProgress(spool: IndexSpool, options: IndexOptions): void {
  const done = (Math.min(spool.preparedChars, spool.textLength) + Math.min(spool.writtenChars, spool.textLength)) / 2;
  options.onProgress?.(Math.floor(done), spool.textLength);
}

/**
 * The second stage, which the pipeline starts once the characters are saved: it writes each batch
 * as the first stage spools it, so the two overlap. The book's collections are dropped first (so a
 * second run leaves exactly one copy of each chunk), but not before one batch is known to have
 * vectors: if none has when the first stage ends, the embedding model is down rather than one batch
 * being bad, and the attempt fails with the indexes as they were. Every batch then goes to the
 * full-text index and, where it has vectors, to the vector index, both at once, a few batches at a
 * time; a batch that still fails after its retries is skipped and counted. If an index still ends up
 * with nothing at all, the store is down: that fails the attempt too, so the job is retried later
 * instead of leaving a book nobody can search. A failure of the first stage stops this one with it.
 */
export async function writeIndex(deps: IndexDeps, bookId: string, spool: IndexSpool, options: IndexOptions): Promise<IndexReport> {
  const { metrics } = deps;
  const { totals } = spool;
  await spool.until(() => totals.embedded > 0);
  if (totals.chunks > 0 && totals.embedded === 0) {
    throw new IndexUnavailableError("no chunk reached the vector index", { cause: totals.lastError });
  }
  const report: IndexReport = { chunks: 0, vectors: 0, documents: 0, chunkEnds: totals.chunkEnds };
  let lastError: unknown;
  await Promise.all([deps.vectorIndex.deleteBook(bookId), deps.textIndex.deleteBook(bookId)]);

  /**
   * One batch into one store: timed per try, failures counted per try, tried again in pieces after
   * its retries (isolateFailures). Returns how many of its chunks were written.
   */
  const write = async <T extends IndexedChunk>(store: IndexStoreLabel, chunks: T[], upsert: (piece: T[]) => Promise<void>): Promise<number> => {
    const outcome = await isolateFailures(
      chunks,
      async (piece) => {
        const stop = metrics.indexing.writeDuration.startTimer({ store });
        try {
          await upsert(piece);
        } catch (err) {
          metrics.indexing.errors.inc({ store });
          throw err;
        } finally {
          stop();
        }
      },
      options.retry,
    );
    const written = chunks.length - outcome.failed.length;
    if (written > 0) metrics.indexing.chunksIndexed.inc({ store }, written);
    if (outcome.failed.length > 0) {
      lastError = outcome.error;
      options.onSkip?.("chunk_batch", store, outcome.failed.map((c) => c.chunkIndex), outcome.error);
    }
    return written;
  };

  /** One batch through one pipeline, timed in indexing_duration_seconds{pipeline}, retries included (and, for vectors, the embedding's time). */
  const timed = async <T>(pipeline: IndexingPipeline, fn: () => Promise<T>, earlierSeconds = 0): Promise<T> => {
    const started = performance.now();
    try {
      return await fn();
    } finally {
      metrics.indexing.duration.observe({ pipeline }, earlierSeconds + (performance.now() - started) / 1000);
    }
  };

  const collect = collector(options);
  await forEachBounded(spool.batches(), options.concurrency ?? DEFAULT_INDEX_CONCURRENCY, async (n) => {
    options.signal?.throwIfAborted();
    const { batch, vectors: packed } = await spool.read(n);
    const { chunks, dimension, embedded } = batch;
    const [documents, vectors] = await Promise.all([
      timed("full_text", () => write("typesense", chunks, (piece) => deps.textIndex.upsert(bookId, piece))),
      packed === undefined
        ? Promise.resolve(0)
        : timed(
            "vector",
            async () => {
              const byIndex = new Map(chunks.map((c) => [c.chunkIndex, c]));
              const points = embedded.map((chunkIndex, i) => ({ ...byIndex.get(chunkIndex)!, vector: row(packed, i, dimension) }));
              return write("qdrant", points, (piece) => deps.vectorIndex.upsert(bookId, piece));
            },
            batch.embedSeconds,
          ),
    ]);
    report.chunks += chunks.length;
    report.documents += documents;
    report.vectors += vectors;
    spool.writtenChars += chunks.reduce((total, c) => total + c.text.length, 0);
    reportProgress(spool, options);
    collect(chunks.length);
  });

  if (report.chunks > 0 && (report.vectors === 0 || report.documents === 0)) {
    const empty = report.vectors === 0 ? "vector" : "full-text";
    throw new IndexUnavailableError(`no chunk reached the ${empty} index`, { cause: lastError });
  }
  return report;
}

/** Row i of packed vectors as an array: an indexed copy, several times faster than Array.from on a typed array. */
function row(packed: Float32Array, i: number, dimension: number): number[] {
  const vector = new Array<number>(dimension);
  const offset = i * dimension;
  for (let j = 0; j < dimension; j++) vector[j] = packed[offset + j]!;
  return vector;
}

/** Both stages side by side, with the spool in a temporary folder. */
export async function indexBook(deps: IndexDeps, bookId: string, text: string, options: IndexOptions): Promise<IndexReport> {
  const spool = new IndexSpool(await mkdtemp(join(tmpdir(), "index-spool-")), text.length);
  try {
    const [, written] = await Promise.all([prepareIndex(deps, text, spool, options), writeIndex(deps, bookId, spool, options)]);
    return written;
  } finally {
    await rm(spool.dir, { recursive: true, force: true });
  }
}
