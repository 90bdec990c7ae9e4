import { KvError, type KeyValueStore, type ListEnd, type SetOptions } from "./index.ts";

/**
 * In-process key-value store: the embedded default when no Redis is configured. It lives in one
 * process's memory, so locks and the job queue only coordinate callers inside that process.
 *
 * Semantics follow Redis where callers could tell the difference: a key past its expiry is gone on
 * the next read, a plain SET drops an earlier TTL, EXPIRE on a missing key reports false, a list
 * emptied by a pop no longer exists, and using a key as the wrong type fails with WRONGTYPE.
 */

export const DEFAULT_SWEEP_INTERVAL_MS = 60_000;

export interface MemoryKeyValueStoreOptions {
  /** How often expired keys nobody reads again are dropped, so memory does not grow without bound. */
  sweepIntervalMs?: number;
  /** Clock in epoch milliseconds; tests pass a fake one. */
  now?: () => number;
}

export interface MemoryKeyValueStore extends KeyValueStore {
  readonly driver: "memory";
  /** Keys currently held, including expired ones not yet swept. */
  readonly size: number;
  /** Drops every expired key now; returns how many it dropped. */
  sweep(): number;
}

type Entry =
  | { type: "string"; value: string; expiresAt?: number }
  | { type: "list"; items: string[]; expiresAt?: number }
  | { type: "hash"; fields: Map<string, string>; expiresAt?: number };

const WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value";

export function createMemoryKeyValueStore(options: MemoryKeyValueStoreOptions = {}): MemoryKeyValueStore {
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  let closed = false;

  const sweep = () => {
    const at = now();
    let dropped = 0;
    for (const [key, entry] of entries) {
      if (entry.expiresAt !== undefined && entry.expiresAt <= at) {
        entries.delete(key);
        dropped++;
      }
    }
    return dropped;
  };
  const timer = setInterval(sweep, options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS);
  // A cache sweep is no reason to keep a finished CLI or test process alive.
  timer.unref();

  const live = (key: string): Entry | undefined => {
    if (closed) throw new KvError("memory: store is closed");
    const entry = entries.get(key);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= now()) {
      entries.delete(key);
      return undefined;
    }
    return entry;
  };
  const stringAt = (key: string): string | null => {
    const entry = live(key);
    if (!entry) return null;
    if (entry.type !== "string") throw new KvError(`memory: ${WRONGTYPE}`);
    return entry.value;
  };
  const listAt = (key: string): string[] | undefined => {
    const entry = live(key);
    if (!entry) return undefined;
    if (entry.type !== "list") throw new KvError(`memory: ${WRONGTYPE}`);
    return entry.items;
  };
  const listOrCreate = (key: string): string[] => {
    const existing = listAt(key);
    if (existing) return existing;
    const items: string[] = [];
    entries.set(key, { type: "list", items });
    return items;
  };
  const hashAt = (key: string): Map<string, string> | undefined => {
    const entry = live(key);
    if (!entry) return undefined;
    if (entry.type !== "hash") throw new KvError(`memory: ${WRONGTYPE}`);
    return entry.fields;
  };
  const hashOrCreate = (key: string): Map<string, string> => {
    const existing = hashAt(key);
    if (existing) return existing;
    const fields = new Map<string, string>();
    entries.set(key, { type: "hash", fields });
    return fields;
  };
  /** As MGET reads a key: one of another type reads as null rather than failing the batch. */
  const stringOrNull = (key: string): string | null => {
    const entry = live(key);
    return entry?.type === "string" ? entry.value : null;
  };
  const set = (key: string, value: string, opts: SetOptions): boolean => {
    if (opts.ex !== undefined) {
      requireInteger(opts.ex, "set");
      if (opts.ex <= 0) throw new KvError("memory: ERR invalid expire time in 'set' command");
    }
    if (opts.nx && live(key)) return false;
    entries.set(key, {
      type: "string",
      value,
      ...(opts.ex !== undefined ? { expiresAt: now() + opts.ex * 1000 } : {}),
    });
    return true;
  };
  /** Redis deletes a list the moment it becomes empty; so do we. */
  const dropIfEmpty = (key: string, items: string[]) => {
    if (items.length === 0) entries.delete(key);
  };
  const requireInteger = (n: number, command: string) => {
    if (!Number.isSafeInteger(n)) throw new KvError(`memory: ERR value is not an integer or out of range in '${command}'`);
  };
  const expire = (key: string, seconds: number) => {
    requireInteger(seconds, "expire");
    const entry = live(key);
    if (!entry) return false;
    // Redis treats a non-positive TTL as "expire now".
    if (seconds <= 0) entries.delete(key);
    else entry.expiresAt = now() + seconds * 1000;
    return true;
  };

  return {
    driver: "memory",
    get size() {
      return entries.size;
    },
    sweep,

    async get(key) {
      return stringAt(key);
    },

    async mget(keys) {
      return keys.map(stringOrNull);
    },

    set: async (key: string, value: string, opts: SetOptions = {}) => set(key, value, opts),

    async setIfAbsentThenMget(key, value, seconds, keys) {
      return { set: set(key, value, { nx: true, ex: seconds }), values: keys.map(stringOrNull) };
    },

    async del(key) {
      if (closed) throw new KvError("memory: store is closed");
      entries.delete(key);
    },

    async deleteIfEquals(key, value) {
      if (stringAt(key) !== value) return false;
      entries.delete(key);
      return true;
    },

    async expireIfEquals(key, value, seconds) {
      return stringAt(key) === value && expire(key, seconds);
    },

    expire: async (key, seconds) => expire(key, seconds),

    async lpush(key, ...values) {
      if (values.length === 0) return listAt(key)?.length ?? 0;
      const items = listOrCreate(key);
      // LPUSH a b c leaves c at the head.
      for (const value of values) items.unshift(value);
      return items.length;
    },

    async rpop(key) {
      const items = listAt(key);
      if (!items) return null;
      const value = items.pop() ?? null;
      dropIfEmpty(key, items);
      return value;
    },

    async lmove(source: string, destination: string, from: ListEnd, to: ListEnd) {
      const items = listAt(source);
      // Redis checks the destination's type before touching the source.
      listAt(destination);
      if (!items) return null;
      const value = (from === "left" ? items.shift() : items.pop())!;
      dropIfEmpty(source, items);
      const target = listOrCreate(destination);
      if (to === "left") target.unshift(value);
      else target.push(value);
      return value;
    },

    async lrem(key, count, value) {
      requireInteger(count, "lrem");
      const items = listAt(key);
      if (!items) return 0;
      const limit = count === 0 ? Infinity : Math.abs(count);
      let removed = 0;
      if (count >= 0) {
        for (let i = 0; i < items.length && removed < limit; ) {
          if (items[i] === value) {
            items.splice(i, 1);
            removed++;
          } else i++;
        }
      } else {
        for (let i = items.length - 1; i >= 0 && removed < limit; i--) {
          if (items[i] === value) {
            items.splice(i, 1);
            removed++;
          }
        }
      }
      dropIfEmpty(key, items);
      return removed;
    },

    async lrange(key, start, stop) {
      const items = listAt(key);
      if (!items) return [];
      const length = items.length;
      const first = Math.max(start < 0 ? length + start : start, 0);
      const last = Math.min(stop < 0 ? length + stop : stop, length - 1);
      return first > last ? [] : items.slice(first, last + 1);
    },

    async llen(key) {
      return listAt(key)?.length ?? 0;
    },

    async hincrbyfloat(key, increments) {
      const pairs = Object.entries(increments);
      if (pairs.length === 0) return;
      const fields = hashAt(key);
      // All or nothing, as the script on Redis: every increment is checked before any is applied.
      const sums = pairs.map(([field, by]) => {
        const current = Number(fields?.get(field) ?? 0);
        const sum = current + by;
        if (!Number.isFinite(by) || !Number.isFinite(current) || !Number.isFinite(sum)) throw new KvError("memory: ERR value is not a valid float");
        return [field, sum] as const;
      });
      const target = fields ?? hashOrCreate(key);
      for (const [field, sum] of sums) target.set(field, String(sum));
    },

    async hset(key, fields) {
      const pairs = Object.entries(fields);
      if (pairs.length === 0) return;
      const target = hashOrCreate(key);
      for (const [field, value] of pairs) target.set(field, value);
    },

    async hgetall(key) {
      return Object.fromEntries(hashAt(key) ?? []);
    },

    async hdel(key, fields) {
      const target = hashAt(key);
      if (!target) return 0;
      let removed = 0;
      for (const field of fields) if (target.delete(field)) removed++;
      if (target.size === 0) entries.delete(key);
      return removed;
    },

    async close() {
      closed = true;
      clearInterval(timer);
      entries.clear();
    },
  };
}
