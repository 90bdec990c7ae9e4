import { InvalidLlmOutputError } from "../common/character-prompts.ts";
import { UpstreamError, withRetries } from "../common/upstream.ts";

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
 * rethrows it once the calls in flight have settled.
 */
export async function forEachBounded<T>(items: Iterable<T>, limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  const iterator = items[Symbol.iterator]();
  let index = 0;
  let failed = false;
  const lane = async () => {
    while (!failed) {
      const next = iterator.next();
      if (next.done) return;
      try {
        await fn(next.value, index++);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  const results = await Promise.allSettled(Array.from({ length: Math.max(1, limit) }, lane));
  const rejected = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (rejected) throw rejected.reason;
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
