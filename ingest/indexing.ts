import { chunkEndLocator, chunkText, DEFAULT_CHUNK_TOKENS, type Chunk } from "../common/chunking.ts";
import type { LanguageModel } from "../common/llm/index.ts";
import type { IndexingPipeline, Metrics } from "../common/metrics.ts";
import type { IndexedChunk, IndexStoreLabel } from "../common/search.ts";
import type { TextIndex } from "../common/text/index.ts";
import type { VectorIndex } from "../common/vector/index.ts";
import { batches, forEachBounded, retryItem, type ItemRetryOptions } from "./work-items.ts";

/**
 * The index phase: the book is chunked lazily, and each batch of chunks is written to the full-text
 * index and, once embedded, to the vector index, both at once. The book's collections are dropped
 * first, so a second run leaves exactly one copy of each chunk.
 *
 * A batch that still fails after its retries is skipped and counted (an embedding batch that fails
 * leaves its chunks in the full-text index only). If an index ends up with nothing at all, the
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
  retry: ItemRetryOptions;
  signal?: AbortSignal;
  /** A batch given up on, with the chunk indexes it held. */
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

/** The chunks as they are made, each one's end recorded in `ends` (in order: the chunker is sequential). */
function* withEnds(chunks: Iterable<Chunk>, locate: (chunk: string) => number, ends: number[]): Generator<Chunk> {
  for (const chunk of chunks) {
    ends.push(locate(chunk.text));
    yield chunk;
  }
}

export class IndexUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "IndexUnavailableError";
  }
}

export async function indexBook(deps: IndexDeps, bookId: string, text: string, options: IndexOptions): Promise<IndexReport> {
  const { metrics } = deps;
  const report: IndexReport = { chunks: 0, vectors: 0, documents: 0, chunkEnds: [] };
  let lastError: unknown;
  await Promise.all([deps.vectorIndex.deleteBook(bookId), deps.textIndex.deleteBook(bookId)]);

  /** One batch into one store: timed per try, failures counted per try, given up after the retries. */
  const write = async (store: IndexStoreLabel, chunks: IndexedChunk[], upsert: () => Promise<void>): Promise<boolean> => {
    try {
      await retryItem(async () => {
        const stop = metrics.indexing.writeDuration.startTimer({ store });
        try {
          await upsert();
        } catch (err) {
          metrics.indexing.errors.inc({ store });
          throw err;
        } finally {
          stop();
        }
      }, options.retry);
      metrics.indexing.chunksIndexed.inc({ store }, chunks.length);
      return true;
    } catch (err) {
      if (options.signal?.aborted) throw err;
      lastError = err;
      options.onSkip?.("chunk_batch", store, chunks.map((c) => c.chunkIndex), err);
      return false;
    }
  };

  /** One batch through one pipeline, timed in indexing_duration_seconds{pipeline}, retries included. */
  const timed = async <T>(pipeline: IndexingPipeline, fn: () => Promise<T>): Promise<T> => {
    const stop = metrics.indexing.duration.startTimer({ pipeline });
    try {
      return await fn();
    } finally {
      stop();
    }
  };

  const embedAndWrite = async (chunks: IndexedChunk[]) => {
    let vectors: number[][];
    try {
      vectors = await retryItem(
        () => deps.llm.embed(chunks.map((c) => c.text), options.signal ? { signal: options.signal } : {}),
        options.retry,
      );
    } catch (err) {
      if (options.signal?.aborted) throw err;
      lastError = err;
      options.onSkip?.("embedding_batch", "embedding", chunks.map((c) => c.chunkIndex), err);
      return;
    }
    metrics.indexing.embeddingsGenerated.inc(vectors.length);
    const points = chunks.map((c, i) => ({ ...c, vector: vectors[i]! }));
    if (await write("qdrant", chunks, () => deps.vectorIndex.upsert(bookId, points))) report.vectors += chunks.length;
  };

  let indexedChars = 0;
  let sinceCollect = 0;
  const chunks = withEnds(chunkText(text, { chunkTokens: options.chunkTokens ?? DEFAULT_CHUNK_TOKENS }), chunkEndLocator(text), report.chunkEnds);
  await forEachBounded(batches(chunks, options.batchSize ?? DEFAULT_INDEX_BATCH_SIZE), options.concurrency ?? DEFAULT_INDEX_CONCURRENCY, async (batch) => {
    options.signal?.throwIfAborted();
    const items = batch.map((c) => ({ chunkIndex: c.chunkIndex, text: c.text }));
    report.chunks += items.length;
    metrics.indexing.chunksGenerated.inc(items.length);
    const [written] = await Promise.all([
      timed("full_text", () => write("typesense", items, () => deps.textIndex.upsert(bookId, items))),
      timed("vector", () => embedAndWrite(items)),
    ]);
    if (written) report.documents += items.length;
    sinceCollect += items.length;
    if (sinceCollect >= (options.collectEvery ?? COLLECT_EVERY_CHUNKS)) {
      sinceCollect = 0;
      (options.collect ?? (() => Bun.gc(true)))();
    }
    indexedChars += batch.reduce((n, c) => n + c.text.length, 0);
    options.onProgress?.(Math.min(indexedChars, text.length), text.length);
  });

  if (report.chunks > 0 && (report.vectors === 0 || report.documents === 0)) {
    const empty = report.vectors === 0 ? "vector" : "full-text";
    throw new IndexUnavailableError(`no chunk reached the ${empty} index`, { cause: lastError });
  }
  return report;
}
