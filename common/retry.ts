import { sleep as timer } from "./sleep.ts";

/**
 * Trying a failed operation again, the one way every caller does it: upstream calls
 * (`withRetries` in upstream.ts), the chat's save of a finished exchange, the store writes the chat
 * leaves to the background. The wait doubles from `firstDelayMs` up to `maxDelayMs`; the tries are
 * bounded by a count, a time window, or both.
 */

export interface RetryOptions {
  /** Tries in all, the first included; unbounded when absent (then windowMs must bound them). */
  attempts?: number;
  /** No try starts later than this after the call (milliseconds). */
  windowMs?: number;
  /** The wait after the first failure; doubled after each further one. */
  firstDelayMs: number;
  /** The longest wait the doubling reaches; no bound when absent. */
  maxDelayMs?: number;
  /** Each wait drawn from half to all of its back-off, so clients that failed together do not return together. */
  jitter?: boolean;
  /** A wait the failure asks for itself (a service's Retry-After), taken instead of the back-off; undefined: the back-off. */
  delayOf?: (error: unknown) => number | undefined;
  /** Whether a failure may pass on another try; every failure may when absent. Asked only when a try remains. */
  shouldRetry?: (error: unknown) => boolean;
  /** Once aborted, the next failure is thrown rather than tried again. */
  signal?: AbortSignal;
  /** Called before each wait, with the number of the try that failed (1 for the first). */
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
  /**
   * The caller's own first try, which failed with this error: the first call of fn is a retry and
   * comes after the first wait, counted as the second try. Thrown if no try of fn is left to make.
   */
  alreadyFailed?: { error: unknown };
  sleep?: (ms: number) => Promise<void>;
  /** Milliseconds on a monotonic clock, for the window; tests pass a fake one. */
  now?: () => number;
}

/** The back-off after `previousMs`: twice as long, up to `maxMs`. */
export function nextDelay(previousMs: number, maxMs: number = Infinity): number {
  return Math.min(previousMs * 2, maxMs);
}

/**
 * Calls fn until it succeeds, then resolves with its result; rejects with the last failure when it
 * may not pass on another try, the signal was aborted, or the tries or the window are spent. fn is
 * given the number of tries made before it (0 for the first).
 */
export async function retry<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const wait = options.sleep ?? timer;
  const now = options.now ?? (() => performance.now());
  const start = now();
  const attempts = options.attempts ?? Infinity;
  let backoff = options.firstDelayMs;
  let failed = options.alreadyFailed;
  for (let attempt = failed ? 1 : 0; ; attempt++) {
    if (failed) {
      const { error } = failed;
      if (attempt >= attempts || options.signal?.aborted || (options.shouldRetry && !options.shouldRetry(error))) throw error;
      const delay = options.delayOf?.(error) ?? (options.jitter ? backoff * (0.5 + Math.random() / 2) : backoff);
      backoff = nextDelay(backoff, options.maxDelayMs);
      if (options.windowMs !== undefined && now() + delay - start >= options.windowMs) throw error;
      options.onRetry?.(error, attempt, delay);
      await wait(delay);
    }
    try {
      return await fn(attempt);
    } catch (error) {
      failed = { error };
    }
  }
}
