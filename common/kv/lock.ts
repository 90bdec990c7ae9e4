import { KvError, type KeyValueStore, type SetThenRead } from "./index.ts";
import { DEFAULT_LOCK_TTL_SECONDS } from "../config-defaults.ts";
import { keepRenewing } from "../lease-renewal.ts";

/**
 * A lease on a key-value key: set only if absent, with a random token and an expiry, so that a
 * holder that dies frees the key by itself, and released only by the holder that set it (a holder
 * whose lease expired must not delete the next holder's lock).
 */

const TOKEN_BYTES = 16;
/** Renewals per expiry while a lock is kept alive, so one late or failed renewal still leaves time for the next. */
const RENEWALS_PER_TTL = 3;

export interface Lock {
  readonly key: string;
  readonly token: string;
  /**
   * Deletes the key if it still holds our token, atomically. Resolves true when it did; later calls
   * resolve false without a round trip. Rejects with KvError when the store fails; the lock then
   * lapses at its expiry unless a later call, once the store is back, releases it.
   */
  release(): Promise<boolean>;
  /**
   * Sets the expiry to ttlSeconds again if the key still holds our token, atomically. Resolves false
   * when the lease was lost (expired, or taken by someone else). Rejects with KvError when the store fails.
   */
  extend(ttlSeconds: number): Promise<boolean>;
}

export interface KeepAliveOptions {
  ttlSeconds: number;
  /** The lease was lost: another holder may have the key now. */
  onLost?: () => void;
  /** One renewal failed in the store; the next interval tries again. */
  onError?: (error: unknown) => void;
}

/**
 * Renews the lock every ttlSeconds / 3 while its holder works past the expiry it was taken with (a
 * reply that streams for longer than 30 s). Returns the function that stops renewing.
 */
export function keepLockAlive(lock: Lock, options: KeepAliveOptions): () => void {
  return keepRenewing({
    everyMs: (options.ttlSeconds * 1000) / RENEWALS_PER_TTL,
    renew: () => lock.extend(options.ttlSeconds),
    onLost: options.onLost,
    onError: options.onError,
  }).stop;
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
  return (await tryAcquireLockThenRead(kv, key, [], ttlSeconds)).lock;
}

/**
 * tryAcquireLock that also reads `keys` as they stand once the lock is asked for, in the same round
 * trip: what the holder reads under the lock comes with it. `lock` is null when someone else holds it
 * (the values are read all the same).
 */
export async function tryAcquireLockThenRead(
  kv: KeyValueStore,
  key: string,
  keys: readonly string[],
  ttlSeconds: number = DEFAULT_LOCK_TTL_SECONDS,
): Promise<{ lock: Lock | null; values: (string | null)[] }> {
  const lock = lockOn(kv, key, randomToken());
  let taken: SetThenRead;
  try {
    taken = await kv.setIfAbsentThenMget(key, lock.token, ttlSeconds, keys);
  } catch (error) {
    throw new LockUnavailableError(lock, { cause: error });
  }
  return { lock: taken.set ? lock : null, values: taken.values };
}

function lockOn(kv: KeyValueStore, key: string, token: string): Lock {
  let released: Promise<boolean> | undefined;
  return {
    key,
    token,
    extend: (ttlSeconds) => kv.expireIfEquals(key, token, ttlSeconds),
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
