import { type ChatCache, type ChatSessionState } from "./chat-cache.ts";
import { sessionCacheKey } from "../../common/contract/cache-keys.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { keepLockAlive, LockUnavailableError, tryAcquireLock, tryAcquireLockThenRead, type Lock } from "../../common/kv/lock.ts";
import { DEFAULT_LOCK_TTL_SECONDS } from "../../common/config-defaults.ts";
import type { Logger } from "../../common/log.ts";
import type { Metrics } from "../../common/metrics/index.ts";
import { sleep } from "../../common/sleep.ts";
import { retryUntilStoreAnswers, type Track } from "./background.ts";
import { SUMMARY_TIMEOUT_MS } from "./summary.ts";

/** Longest a turn waits for the previous turn's summary fold; longer than the fold may take, so waiters outlast it. */
export const FOLD_WAIT_MS = SUMMARY_TIMEOUT_MS + 2_000;
const FOLD_POLL_MS = 25;

export const lockKey = (sessionId: string) => `chat:lock:${sessionId}`;
export const foldKey = (sessionId: string) => `chat:fold:${sessionId}`;
const sessionKeys = (sessionId: string) => [sessionCacheKey(sessionId), foldKey(sessionId)];

export interface SessionLocksDeps {
  kv: KeyValueStore;
  cache: ChatCache;
  metrics: Metrics;
  log: Logger;
  track: Track;
  /** The session lock's expiry (SPEC: 30 s); renewed while a reply streams. */
  ttlSeconds?: number;
}

/** The session lock as a turn holds it: null when the store could not be asked (the turn goes on without it). */
export interface HeldLock {
  lock: Lock | null;
  /** The session's cache entry and fold key as the lock was taken (read in the same round trip), for latestSession. */
  read?: SessionKeys;
}

/** What `take` found: the lock, and the keys asked for beside it. */
export interface Taken {
  held: HeldLock | "busy";
  /** The values of take's `alsoRead`, in order; null when the store failed. */
  values: (string | null)[] | null;
}

/** What `chat:sess:{id}` and `chat:fold:{id}` hold. */
type SessionKeys = readonly (string | null)[];

/**
 * The keys that order the writes to a session's history and summary: the turn's session lock
 * `chat:lock:{id}`, and the fold key `chat:fold:{id}`, taken before the turn lets go of its lock and
 * held by the summary fold. A turn waits (briefly) for a fold rather than answering 429.
 */
export function createSessionLocks(deps: SessionLocksDeps) {
  const { log } = deps;
  const ttlSeconds = deps.ttlSeconds ?? DEFAULT_LOCK_TTL_SECONDS;

  /**
   * Takes the session lock ("busy" when another turn holds it) and reads `alsoRead` in the same
   * command, whether or not it took the lock: the turn's one key-value round trip before it knows
   * the session. `values` is null when the store failed (the turn goes on without the lock).
   */
  async function take(sessionId: string, alsoRead: readonly string[] = []): Promise<Taken> {
    const own = sessionKeys(sessionId);
    const keys = [...new Set([...alsoRead, ...own])];
    try {
      const taken = await tryAcquireLockThenRead(deps.kv, lockKey(sessionId), keys, ttlSeconds);
      const valueOf = (key: string) => taken.values[keys.indexOf(key)] ?? null;
      const values = alsoRead.map(valueOf);
      return { held: taken.lock ? { lock: taken.lock, read: own.map(valueOf) } : "busy", values };
    } catch (error) {
      deps.metrics.chat.lockUnavailable.inc();
      log.warn("session lock unavailable, replying without it", { session_id: sessionId, error });
      // The set may have landed all the same: released at the end of the turn like a lock we hold.
      return { held: { lock: error instanceof LockUnavailableError ? error.attempted : null }, values: null };
    }
  }

  /** Renews the lock while the reply streams; returns what stops renewing (it does not release). */
  function keepAlive(lock: Lock | null): () => void {
    if (!lock) return () => {};
    const key = lock.key;
    return keepLockAlive(lock, {
      ttlSeconds,
      onLost: () => log.warn("session lock lost while replying; another message may be answered at the same time", { key }),
      onError: (error) => log.warn("session lock renewal failed; trying again", { key, error }),
    });
  }

  async function release(lock: Lock | null) {
    if (!lock) return;
    try {
      await lock.release();
    } catch (error) {
      // Otherwise a store that was down as the turn ended (a Redis restart) would leave the session
      // refusing every message with 429 until the lock's 30 s expiry.
      log.warn("session lock release failed; trying again in the background", { key: lock.key, error });
      deps.track(retryUntilStoreAnswers(log, lock.key, () => lock.release(), error));
    }
  }

  /**
   * Starts the summary fold under the fold key, taken before the session lock is released so that
   * no turn can slip in between and read the summary the fold is about to replace. Both commands go
   * out in the same tick: the store runs them in order (one pipeline, one round trip).
   */
  async function handOver(sessionId: string, lock: Lock | null, fold: (foldLock: Lock | null) => Promise<void>) {
    const taken = tryAcquireLock(deps.kv, foldKey(sessionId)).catch((error: unknown) => {
      log.warn("fold key unavailable, folding without it", { session_id: sessionId, error });
      // The set may have landed all the same: released after the fold like a key we hold.
      return error instanceof LockUnavailableError ? error.attempted : null;
    });
    const released = release(lock);
    const foldLock = await taken;
    await released;
    deps.track(fold(foldLock));
  }

  /**
   * The session's history as of now, for a turn holding the session lock (or going without it):
   * waits for a summary fold in progress, then reads the cache, or the database behind it. `read`:
   * the keys as the lock was taken (HeldLock), which spare the first look its round trip; `fromDb`:
   * the session as the database had it, read once the lock was taken, used when the first look finds
   * no entry.
   */
  async function latestSession(sessionId: string, signal: AbortSignal, read?: SessionKeys, fromDb?: Promise<ChatSessionState | null>): Promise<ChatSessionState | null> {
    const { cache } = deps;
    const deadline = performance.now() + FOLD_WAIT_MS;
    for (let first = read; ; first = undefined) {
      let cached: string | null;
      let folding: string | null;
      try {
        [cached = null, folding = null] = first ?? (await deps.kv.mget(sessionKeys(sessionId)));
      } catch (error) {
        log.warn("session cache unavailable, reading the database", { session_id: sessionId, error });
        return cache.loadSession(sessionId, null);
      }
      if (!folding) return cache.loadSession(sessionId, cached, first ? fromDb : undefined);
      if (performance.now() > deadline) {
        log.warn("summary fold still running, replying without waiting for it", { session_id: sessionId });
        return cache.loadSession(sessionId, cached);
      }
      await sleep(FOLD_POLL_MS);
      signal.throwIfAborted();
    }
  }

  return { take, keepAlive, release, handOver, latestSession };
}
