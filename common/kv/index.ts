/**
 * Key-value port: exactly what the cache, the chat lock and the job queue need.
 * Values are strings; callers JSON-encode. Lists are Redis lists: push on the left, pop on the right
 * gives FIFO order.
 */

export interface SetOptions {
  /** Expiry in seconds. */
  ex?: number;
  /** Only set when the key does not exist. */
  nx?: boolean;
}

export type ListEnd = "left" | "right";

/** What setIfAbsentThenMget did: whether it set, and the keys' values in order. */
export interface SetThenRead {
  set: boolean;
  values: (string | null)[];
}

export interface KeyValueStore {
  readonly driver: "memory" | "redis" | "upstash";
  get(key: string): Promise<string | null>;
  /** One round trip; results in the order of keys. */
  mget(keys: readonly string[]): Promise<(string | null)[]>;
  /** Returns false when `nx` refused the write. */
  set(key: string, value: string, options?: SetOptions): Promise<boolean>;
  /**
   * Sets key to value, expiring in `seconds`, only if key does not exist (takes a lock), and then reads
   * `keys` as they stand right after, whether or not it set, in one atomic step and one round trip
   * (what a turn reads under its lock comes back with the lock, and a turn refused the lock still
   * learns whose session it is).
   */
  setIfAbsentThenMget(key: string, value: string, seconds: number, keys: readonly string[]): Promise<SetThenRead>;
  del(key: string): Promise<void>;
  /** Atomically deletes key only if it holds value (lock release). Returns whether it deleted. */
  deleteIfEquals(key: string, value: string): Promise<boolean>;
  /** Atomically sets key's expiry to seconds only if it holds value (a lock kept alive by its holder). Returns whether it did. */
  expireIfEquals(key: string, value: string, seconds: number): Promise<boolean>;
  /** Sets a TTL in seconds on an existing key. Returns false when the key does not exist. */
  expire(key: string, seconds: number): Promise<boolean>;
  /** Pushes values on the left; returns the new length. */
  lpush(key: string, ...values: string[]): Promise<number>;
  /** Pops one value from the right, or null when empty. */
  rpop(key: string): Promise<string | null>;
  /** Atomically moves one element between lists (Redis LMOVE); null when the source is empty. */
  lmove(source: string, destination: string, from: ListEnd, to: ListEnd): Promise<string | null>;
  /** Removes up to count occurrences of value (0 = all); returns how many were removed. */
  lrem(key: string, count: number, value: string): Promise<number>;
  /** Elements from start to stop inclusive (negative indexes count from the end). */
  lrange(key: string, start: number, stop: number): Promise<string[]>;
  llen(key: string): Promise<number>;
  /**
   * Adds each increment to its field of the hash at key (Redis HINCRBYFLOAT, a missing field counting
   * as 0), all of them in one atomic step and one round trip.
   */
  hincrbyfloat(key: string, increments: Readonly<Record<string, number>>): Promise<void>;
  /** Sets these fields of the hash at key (Redis HSET), creating the hash if needed. */
  hset(key: string, fields: Readonly<Record<string, string>>): Promise<void>;
  /** Every field of the hash at key and its value; empty when the key does not exist. */
  hgetall(key: string): Promise<Record<string, string>>;
  /** Removes these fields of the hash at key; returns how many existed. */
  hdel(key: string, fields: readonly string[]): Promise<number>;
  close(): Promise<void>;
}

/** Thrown when the store itself is unreachable or answers with an error. */
export class KvError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "KvError";
  }
}

/** Wraps whatever an adapter's client threw, so callers only ever branch on KvError. */
export function toKvError(source: string, err: unknown): KvError {
  if (err instanceof KvError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new KvError(`${source}: ${message}`, { cause: err });
}
