import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chunkText, DEFAULT_CHUNK_TOKENS, type Chunk } from "../../common/chunking.ts";
import { chunkEndLocator } from "../../common/chunk-ends.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import type { Metrics } from "../../common/metrics/index.ts";
import type { IndexingPipeline, IndexStoreLabel } from "../../common/metrics/indexing.ts";
import type { IndexedChunk } from "../../common/contract/search.ts";
import type { TextIndex } from "../../common/text-index/index.ts";
import type { VectorIndex } from "../../common/vector/index.ts";
import { batches, forEachBounded, isolateFailures, type IsolationOptions } from "./isolate-failures.ts";

/**
 * The index phase, in two stages. prepareIndex chunks the book lazily and embeds each batch, spooling
 * both to files; it needs only the text, so the pipeline runs it beside the NLP and the character
 * passes. writeIndex then drops the book's collections and writes every spooled batch to the
 * full-text index and, once embedded, to the vector index, both at once. Only the second stage
 * touches the indexes, and it runs only once the characters are saved: a re-ingestion whose
 * character passes fail leaves the book's indexes as they were.
 *
 * A batch that still fails after its retries is tried again in halves, and halves of those, so only
 * the chunks that fail alone are skipped and counted (ingest/phases/isolate-failures.ts, isolateFailures); a chunk
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

/** What the first stage leaves for the second: the spooled batches and their counts. */
export interface PreparedIndex {
  /** The folder holding the batches, `<n>.json` and `<n>.f32` for n from 0 to batches - 1. */
  spoolDir: string;
  batches: number;
  chunks: number;
  /** Chunks that have a vector (their embedding batch did not fail). */
  embedded: number;
  chunkEnds: number[];
  /** The text's length, the unit of progress. */
  textLength: number;
  /** The last failure of an embedding batch, for the error when none succeeded. */
  lastError?: unknown;
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
 * One spooled batch, `<n>.json`: its chunks, the vectors' dimension (0 when no chunk of the batch was
 * embedded), which chunks have a vector, and the embedding's time; the vectors themselves are
 * `<n>.f32`, raw float32, one row per embedded chunk in that order.
 */
interface SpooledBatch {
  chunks: IndexedChunk[];
  dimension: number;
  /** chunk_index of each row of `<n>.f32`. */
  embedded: number[];
  embedSeconds: number;
}

/**
 * The first stage: the book is chunked lazily and each batch embedded (a few at a time), and both
 * are spooled to files in `spoolDir`; nothing is written to the indexes. It needs only the text, so
 * the pipeline runs it beside the NLP and the character passes, and a book whose character passes
 * fail keeps the indexes it had.
 */
export async function prepareIndex(deps: Pick<IndexDeps, "llm" | "metrics">, text: string, spoolDir: string, options: IndexOptions): Promise<PreparedIndex> {
  const { metrics } = deps;
  await mkdir(spoolDir, { recursive: true });
  const prepared: PreparedIndex = { spoolDir, batches: 0, chunks: 0, embedded: 0, chunkEnds: [], textLength: text.length };
  let indexedChars = 0;
  const collect = collector(options);
  const chunks = withEnds(chunkText(text, { chunkTokens: options.chunkTokens ?? DEFAULT_CHUNK_TOKENS }), chunkEndLocator(text), prepared.chunkEnds);
  await forEachBounded(batches(chunks, options.batchSize ?? DEFAULT_INDEX_BATCH_SIZE), options.concurrency ?? DEFAULT_INDEX_CONCURRENCY, async (batch, n) => {
    options.signal?.throwIfAborted();
    const items: IndexedChunk[] = batch.map((c) => ({ chunkIndex: c.chunkIndex, text: c.text }));
    prepared.batches = Math.max(prepared.batches, n + 1);
    prepared.chunks += items.length;
    metrics.indexing.chunksGenerated.inc(items.length);
    const started = performance.now();
    const embedding = await isolateFailures(items, (piece) => deps.llm.embed(piece.map((c) => c.text), options.signal ? { signal: options.signal } : {}), options.retry);
    const vectors = embedding.done.flatMap((piece) => piece.value);
    const embedded = embedding.done.flatMap((piece) => piece.items.map((c) => c.chunkIndex));
    metrics.indexing.embeddingsGenerated.inc(vectors.length);
    const dimension = vectors[0]?.length ?? 0;
    if (vectors.length > 0) {
      const packed = new Float32Array(vectors.length * dimension);
      vectors.forEach((v, i) => packed.set(v, i * dimension));
      await writeFile(join(spoolDir, `${n}.f32`), packed);
    }
    const spooled: SpooledBatch = { chunks: items, dimension, embedded, embedSeconds: (performance.now() - started) / 1000 };
    prepared.embedded += embedded.length;
    if (embedding.failed.length > 0) {
      prepared.lastError = embedding.error;
      options.onSkip?.("embedding_batch", "embedding", embedding.failed.map((c) => c.chunkIndex), embedding.error);
    }
    await writeFile(join(spoolDir, `${n}.json`), JSON.stringify(spooled));
    indexedChars += batch.reduce((total, c) => total + c.text.length, 0);
    // Progress is counted in characters of the text, the first half of it for this stage.
    options.onProgress?.(Math.floor(Math.min(indexedChars, text.length) / 2), text.length);
    collect(items.length);
  });
  return prepared;
}

/**
 * The second stage: the book's collections are dropped (so a second run leaves exactly one copy of
 * each chunk), then every spooled batch is written to the full-text index and, where it has vectors,
 * to the vector index, both at once, a few batches at a time. A batch that still fails after its
 * retries is skipped and counted. If an index would end up with nothing at all, the store or the
 * embedding model is down rather than one batch being bad: that fails the attempt, so the job is
 * retried later instead of leaving a book nobody can search — checked before anything is dropped
 * where it can be (no vector at all), after the writes otherwise.
 */
export async function writeIndex(deps: IndexDeps, bookId: string, prepared: PreparedIndex, options: IndexOptions): Promise<IndexReport> {
  const { metrics } = deps;
  const report: IndexReport = { chunks: prepared.chunks, vectors: 0, documents: 0, chunkEnds: prepared.chunkEnds };
  if (prepared.chunks > 0 && prepared.embedded === 0) {
    throw new IndexUnavailableError("no chunk reached the vector index", { cause: prepared.lastError });
  }
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

  let written = 0;
  const collect = collector(options);
  await forEachBounded(Array.from({ length: prepared.batches }, (_, n) => n), options.concurrency ?? DEFAULT_INDEX_CONCURRENCY, async (n) => {
    options.signal?.throwIfAborted();
    const batch = JSON.parse(await readFile(join(prepared.spoolDir, `${n}.json`), "utf8")) as SpooledBatch;
    const { chunks, dimension, embedded } = batch;
    const [documents, vectors] = await Promise.all([
      timed("full_text", () => write("typesense", chunks, (piece) => deps.textIndex.upsert(bookId, piece))),
      dimension === 0
        ? Promise.resolve(0)
        : timed(
            "vector",
            async () => {
              const packed = new Float32Array(await Bun.file(join(prepared.spoolDir, `${n}.f32`)).arrayBuffer());
              const byIndex = new Map(chunks.map((c) => [c.chunkIndex, c]));
              const points = embedded.map((chunkIndex, i) => ({ ...byIndex.get(chunkIndex)!, vector: row(packed, i, dimension) }));
              return write("qdrant", points, (piece) => deps.vectorIndex.upsert(bookId, piece));
            },
            batch.embedSeconds,
          ),
    ]);
    report.documents += documents;
    report.vectors += vectors;
    written += chunks.length;
    options.onProgress?.(Math.floor((prepared.textLength * (prepared.chunks + written)) / (2 * prepared.chunks)), prepared.textLength);
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

/** Both stages, one after the other, with the spool in a temporary folder. */
export async function indexBook(deps: IndexDeps, bookId: string, text: string, options: IndexOptions): Promise<IndexReport> {
  const spoolDir = await mkdtemp(join(tmpdir(), "index-spool-"));
  try {
    return await writeIndex(deps, bookId, await prepareIndex(deps, text, spoolDir, options), options);
  } finally {
    await rm(spoolDir, { recursive: true, force: true });
  }
}
