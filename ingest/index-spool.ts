import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { IndexedChunk } from "../common/retrieval/types.ts";

/**
 * The index phase's spool: the batches its first stage has chunked and embedded, kept in files (so a
 * large book's vectors are never all in memory), and a log of them that the second stage reads while
 * the first goes on. Batch n is `<n>.json` (its chunks, the vectors' dimension, 0 when no chunk of it
 * was embedded, which chunks have a vector, the embedding's time) and `<n>.f32` (raw float32, one row
 * per embedded chunk in that order).
 */

export interface SpooledBatch {
  chunks: IndexedChunk[];
  dimension: number;
  /** chunk_index of each row of `<n>.f32`. */
  embedded: number[];
  embedSeconds: number;
}

export interface SpoolTotals {
  batches: number;
  chunks: number;
  /** Chunks that have a vector (their embedding batch did not fail). */
  embedded: number;
  /** Where chunk i ends in the book, as a position (0-1). */
  chunkEnds: number[];
  /** The last failure of an embedding batch, for the error when none succeeded. */
  lastError?: unknown;
}

export class IndexSpool {
  readonly totals: SpoolTotals = { batches: 0, chunks: 0, embedded: 0, chunkEnds: [] };
  /** Characters of the text spooled by the first stage and written by the second: the phase's progress, half each. */
  preparedChars = 0;
  writtenChars = 0;
  private readonly order: number[] = [];
  private outcome: { failed: false } | { failed: true; error: unknown } | undefined;
  private waiting: (() => void)[] = [];

  constructor(
    readonly dir: string,
    /** The text's length, the unit of progress. */
    readonly textLength: number,
  ) {}

  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
  }

  /** Writes batch n's files, then logs it for the second stage. */
  async add(n: number, batch: SpooledBatch, vectors: Float32Array | undefined, chars: number): Promise<void> {
    if (vectors) await writeFile(join(this.dir, `${n}.f32`), vectors);
    await writeFile(join(this.dir, `${n}.json`), JSON.stringify(batch));
    this.totals.batches = Math.max(this.totals.batches, n + 1);
    this.totals.embedded += batch.embedded.length;
    this.preparedChars += chars;
    this.order.push(n);
    this.wake();
  }

  async read(n: number): Promise<{ batch: SpooledBatch; vectors: Float32Array | undefined }> {
    const batch = JSON.parse(await readFile(join(this.dir, `${n}.json`), "utf8")) as SpooledBatch;
    const vectors = batch.dimension === 0 ? undefined : new Float32Array(await Bun.file(join(this.dir, `${n}.f32`)).arrayBuffer());
    return { batch, vectors };
  }

  /** The first stage has spooled its last batch. */
  finish(): void {
    this.outcome ??= { failed: false };
    this.wake();
  }

  /** The first stage failed: the second stops with its error. */
  fail(error: unknown): void {
    this.outcome ??= { failed: true, error };
    this.wake();
  }

  get ended(): boolean {
    return this.outcome !== undefined;
  }

  /** Resolves once `ready()` holds or the first stage has ended; rejects with the first stage's failure. */
  async until(ready: () => boolean): Promise<void> {
    for (;;) {
      if (this.outcome?.failed) throw this.outcome.error;
      if (ready() || this.outcome) return;
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  /** Every batch number in the order spooled, waiting for more until the first stage ends; throws its failure. */
  async *batches(): AsyncGenerator<number> {
    for (let i = 0; ; ) {
      if (this.outcome?.failed) throw this.outcome.error;
      if (i < this.order.length) yield this.order[i++]!;
      else if (this.outcome) return;
      else await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}
