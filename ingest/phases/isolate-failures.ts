import { InvalidLlmOutputError } from "../../common/prompt/character.ts";
import { UpstreamError, withRetries } from "../../common/upstream.ts";

/**
 * How the pipeline treats its many small units of work (a character's LLM pass, a batch of chunks):
 * a few at a time, each retried with back-off on its own, so one bad unit never sinks the book.
 */

export const DEFAULT_ITEM_RETRIES = 2;
export const DEFAULT_ITEM_RETRY_BASE_DELAY_MS = 500;

export interface ItemRetryOptions {
  /** Further tries after the first. */
  retries: number;
  baseDelayMs: number;
  signal?: AbortSignal;
}

/**
 * Calls fn until it succeeds or its retries are spent. A model's invalid answer earns one retry;
 * an upstream error only when it may pass (timeouts, 429, 5xx); anything else (a store's own
 * failure) is retried too. Nothing is retried once the signal is aborted.
 */
export function retryItem<T>(fn: () => Promise<T>, options: ItemRetryOptions): Promise<T> {
  let invalidAnswers = 0;
  return withRetries(fn, {
    maxRetries: options.retries,
    baseDelayMs: options.baseDelayMs,
    ...(options.signal ? { signal: options.signal } : {}),
    shouldRetry: (err) => {
      if (err instanceof InvalidLlmOutputError) return ++invalidAnswers <= 1;
      if (err instanceof UpstreamError) return err.retryable;
      return true;
    },
  });
}

/**
 * Runs fn over items with at most `limit` calls in flight, pulling items lazily (a generator of
 * chunk batches is never materialised). Stops taking new items after the first failure and
 * rethrows it once the calls in flight have settled; the items' iterator is closed either way, so a
 * generator's own cleanup runs.
 */
export async function forEachBounded<T>(items: Iterable<T>, limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  const iterator = items[Symbol.iterator]();
  let index = 0;
  let failed = false;
  const lane = async () => {
    while (!failed) {
      try {
        const next = iterator.next();
        if (next.done) return;
        await fn(next.value, index++);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  try {
    const results = await Promise.allSettled(Array.from({ length: Math.max(1, limit) }, lane));
    const rejected = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (rejected) throw rejected.reason;
  } finally {
    iterator.return?.();
  }
}

/** fn over items with bounded concurrency; results in the order of items. */
export async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  await forEachBounded(items, limit, async (item, i) => {
    results[i] = await fn(item, i);
  });
  return results;
}

/** Groups an iterable into arrays of `size`, lazily. */
export function* batches<T>(items: Iterable<T>, size: number): Generator<T[]> {
  let batch: T[] = [];
  for (const item of items) {
    batch.push(item);
    if (batch.length >= size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

/**
 * Items of a failed batch that fail alone are given up; after this many, the rest of the batch is
 * given up untried: that many bad items in one batch means the upstream is failing, not the items,
 * and each further piece would only cost another call.
 */
export const DEFAULT_MAX_ISOLATED_FAILURES = 4;

export interface IsolationOptions extends ItemRetryOptions {
  maxIsolatedFailures?: number;
}

export interface Isolated<T, R> {
  /** The pieces that went through, each with fn's result, in the order of the items. */
  done: { items: T[]; value: R }[];
  /** The items given up, in order. */
  failed: T[];
  /** The last failure, when any item was given up. */
  error?: unknown;
}

/**
 * Runs fn on the whole batch with retries; when it still fails, on each half of it, and on halves of
 * the halves that fail, each piece tried once (the batch had its retries), so a bad item costs only
 * itself: one bad chunk among 64 costs 12 further calls (two per halving), not the other 63 chunks. Nothing more is
 * tried once the signal is aborted; the abort is rethrown.
 */
export async function isolateFailures<T, R>(items: readonly T[], fn: (piece: T[]) => Promise<R>, options: IsolationOptions): Promise<Isolated<T, R>> {
  const result: Isolated<T, R> = { done: [], failed: [] };
  let failuresLeft = options.maxIsolatedFailures ?? DEFAULT_MAX_ISOLATED_FAILURES;
  const attempt = async (piece: T[], retried: boolean): Promise<void> => {
    if (failuresLeft <= 0) {
      result.failed.push(...piece);
      return;
    }
    try {
      const value = retried ? await retryItem(() => fn(piece), options) : await fn(piece);
      result.done.push({ items: piece, value });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      result.error = err;
      if (piece.length === 1) {
        failuresLeft--;
        result.failed.push(piece[0]!);
        return;
      }
      const half = Math.ceil(piece.length / 2);
      await attempt(piece.slice(0, half), false);
      await attempt(piece.slice(half), false);
    }
  };
  await attempt([...items], true);
  return result;
}
