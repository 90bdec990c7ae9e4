import type { KeyValueStore } from "./kv/index.ts";

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

/** The lock, or null when someone else holds it. A store failure rejects with KvError. */
export async function tryAcquireLock(kv: KeyValueStore, key: string, ttlSeconds: number = DEFAULT_LOCK_TTL_SECONDS): Promise<Lock | null> {
  const token = randomToken();
  if (!(await kv.set(key, token, { nx: true, ex: ttlSeconds }))) return null;
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
