import { KvError, type KeyValueStore } from "./kv/index.ts";

/**
 * A lease on a key-value key: set only if absent, with a random token and an expiry, so that a
 * holder that dies frees the key by itself, and released only by the holder that set it (a holder
 * whose lease expired must not delete the next holder's lock).
 */

export const DEFAULT_LOCK_TTL_SECONDS = 30;
const TOKEN_BYTES = 16;

export interface Lock {
  readonly key: string;
  readonly token: string;
  /**
   * Deletes the key if it still holds our token, atomically. Resolves true when it did; later calls
   * resolve false without a round trip. Rejects with KvError when the store fails; the lock then
   * lapses at its expiry unless a later call, once the store is back, releases it.
   */
  release(): Promise<boolean>;
}

function randomToken(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(TOKEN_BYTES))).toString("hex");
}

/**
 * The store failed while the lock was being taken. The set may still have landed (a connection that
 * dropped after the command reached the server), so `attempted` can undo it: its release deletes the
 * key only if it holds this attempt's token.
 */
export class LockUnavailableError extends KvError {
  constructor(
    readonly attempted: Lock,
    options: { cause: unknown },
  ) {
    super(`lock ${attempted.key} unavailable: ${options.cause instanceof Error ? options.cause.message : String(options.cause)}`, options);
    this.name = "LockUnavailableError";
  }
}

/** The lock, or null when someone else holds it. A store failure rejects with LockUnavailableError. */
export async function tryAcquireLock(kv: KeyValueStore, key: string, ttlSeconds: number = DEFAULT_LOCK_TTL_SECONDS): Promise<Lock | null> {
  const lock = lockOn(kv, key, randomToken());
  let acquired: boolean;
  try {
    acquired = await kv.set(key, lock.token, { nx: true, ex: ttlSeconds });
  } catch (error) {
    throw new LockUnavailableError(lock, { cause: error });
  }
  return acquired ? lock : null;
}

function lockOn(kv: KeyValueStore, key: string, token: string): Lock {
  let released: Promise<boolean> | undefined;
  return {
    key,
    token,
    release() {
      if (released) return released.then(() => false);
      const attempt = kv.deleteIfEquals(key, token);
      released = attempt;
      // A failed attempt is forgotten, so that the holder can try again.
      attempt.catch(() => {
        if (released === attempt) released = undefined;
      });
      return attempt;
    },
  };
}
