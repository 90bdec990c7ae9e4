import { retry } from "../../common/retry.ts";
import type { Logger } from "../../common/log.ts";

/** How long, and how often, a lock release or a cache drop the store failed is tried again. */
export const STORE_RETRY_WINDOW_MS = 10_000;
const STORE_RETRY_FIRST_MS = 200;
const STORE_RETRY_MAX_MS = 2_000;

/** Hands over work that outlives a reply (summary folds, cache writes, retried releases). */
export type Track = (task: Promise<unknown>) => void;

/**
 * The work left running after replies, for a server to wait for (`settle`) before closing the stores.
 * `settleStarted` waits only for the work tracked so far: what one request left behind, on an isolate
 * where other requests keep adding work and `settle` might not resolve while traffic lasts.
 */
export function createBackground(): { track: Track; settle: () => Promise<void>; settleStarted: () => Promise<void> } {
  const tasks = new Set<Promise<unknown>>();
  const track: Track = (task) => {
    tasks.add(task);
    void task.finally(() => tasks.delete(task));
  };
  async function settle() {
    while (tasks.size > 0) await Promise.allSettled([...tasks]);
  }
  async function settleStarted() {
    await Promise.allSettled([...tasks]);
  }
  return { track, settle, settleStarted };
}

/**
 * Tries a write the store failed (with `failure`) again, with back-off, until it succeeds or
 * STORE_RETRY_WINDOW_MS has passed. Never rejects: it runs in the background, where a failure is
 * only logged.
 */
export async function retryUntilStoreAnswers(log: Logger, key: string, write: () => Promise<unknown>, failure: unknown) {
  try {
    await retry(write, {
      windowMs: STORE_RETRY_WINDOW_MS,
      firstDelayMs: STORE_RETRY_FIRST_MS,
      maxDelayMs: STORE_RETRY_MAX_MS,
      alreadyFailed: { error: failure },
    });
    log.info("key-value write done after the store came back", { key });
  } catch {
    log.error("key-value write given up; the key lapses at its expiry", { key });
  }
}
