import { Redis } from "@upstash/redis";
import { toKvError, type KeyValueStore, type SetOptions } from "./index.ts";
import { EXPIRE_IF_EQUALS_SCRIPT, HASH_INCREMENT_SCRIPT, incrementArgs, RELEASE_IF_EQUALS_SCRIPT, SET_IF_ABSENT_THEN_MGET_SCRIPT, setThenReadReply } from "./lua.ts";

/**
 * Upstash over its REST API through `@upstash/redis`.
 *
 * The SDK batches commands issued in the same tick into one `/pipeline` request. Replies come as
 * plain JSON rather than the SDK's default base64 (see below). By default it also JSON-parses every string it
 * reads back, so a stored "42" would come back as a number and "null" as null; that is turned off
 * here because this port stores strings and callers do their own JSON. Every HTTP attempt is bounded
 * by `timeoutMs` and network failures are retried `maxRetries` times; the SDK cannot tell whether a
 * request that failed in flight reached the server, so a retried LPUSH may land twice.
 */

export const DEFAULT_UPSTASH_TIMEOUT_MS = 5_000;
export const DEFAULT_UPSTASH_MAX_RETRIES = 2;
export const DEFAULT_UPSTASH_RETRY_BASE_DELAY_MS = 50;

export interface UpstashKeyValueStoreOptions {
  /** The database's REST URL (UPSTASH_REDIS_REST_URL). */
  url: string;
  token: string;
  /** Bound on each HTTP request. */
  timeoutMs?: number;
  /** Further attempts after a request that failed at the network level. */
  maxRetries?: number;
}

export function createUpstashKeyValueStore(options: UpstashKeyValueStoreOptions): KeyValueStore {
  const timeoutMs = options.timeoutMs ?? DEFAULT_UPSTASH_TIMEOUT_MS;
  const redis = new Redis({
    url: options.url,
    token: options.token,
    automaticDeserialization: false,
    // Replies as plain JSON strings, not base64 the SDK decodes byte by byte in JavaScript (a
    // session's cached history on every chat turn). Safe for what this port stores: strings written
    // by JSON.stringify or callers' own ASCII, always well-formed UTF-8.
    responseEncoding: false,
    enableTelemetry: false,
    // A function, so each request gets a fresh deadline (a shared signal would abort once and stay aborted).
    signal: () => AbortSignal.timeout(timeoutMs),
    retry: {
      retries: options.maxRetries ?? DEFAULT_UPSTASH_MAX_RETRIES,
      backoff: (attempt) => DEFAULT_UPSTASH_RETRY_BASE_DELAY_MS * 2 ** attempt,
    },
  });
  let closed = false;

  const run = async <T>(command: string, call: () => Promise<T>): Promise<T> => {
    try {
      if (closed) throw new Error("store is closed");
      return await call();
    } catch (err) {
      throw toKvError(`upstash ${command}`, err);
    }
  };

  return {
    driver: "upstash",

    get: (key) => run("GET", () => redis.get<string>(key)),

    mget: async (keys) => (keys.length === 0 ? [] : run("MGET", () => redis.mget<(string | null)[]>(...keys))),

    async set(key: string, value: string, opts: SetOptions = {}) {
      const written = await run("SET", () =>
        opts.ex === undefined
          ? redis.set(key, value, opts.nx ? { nx: true } : undefined)
          : redis.set(key, value, opts.nx ? { ex: opts.ex, nx: true } : { ex: opts.ex }),
      );
      // SET answers OK when it wrote and nil when NX refused.
      return written !== null;
    },

    async setIfAbsentThenMget(key, value, seconds, keys) {
      return setThenReadReply(await run("EVAL", () => redis.eval<string[], unknown>(SET_IF_ABSENT_THEN_MGET_SCRIPT, [key, ...keys], [value, String(seconds)])));
    },

    async del(key) {
      await run("DEL", () => redis.del(key));
    },

    async deleteIfEquals(key, value) {
      return (await run("EVAL", () => redis.eval<[string], number>(RELEASE_IF_EQUALS_SCRIPT, [key], [value]))) === 1;
    },

    async expireIfEquals(key, value, seconds) {
      return (await run("EVAL", () => redis.eval<[string, string], number>(EXPIRE_IF_EQUALS_SCRIPT, [key], [value, String(seconds)]))) === 1;
    },

    expire: async (key, seconds) => (await run("EXPIRE", () => redis.expire(key, seconds))) === 1,

    async lpush(key, ...values) {
      if (values.length === 0) return run("LLEN", () => redis.llen(key));
      return run("LPUSH", () => redis.lpush(key, ...values));
    },

    rpop: (key) => run("RPOP", () => redis.rpop<string>(key)),

    lmove: (source, destination, from, to) =>
      run("LMOVE", () => redis.lmove<string | null>(source, destination, from, to)),

    lrem: (key, count, value) => run("LREM", () => redis.lrem(key, count, value)),

    lrange: (key, start, stop) => run("LRANGE", () => redis.lrange<string>(key, start, stop)),

    llen: (key) => run("LLEN", () => redis.llen(key)),

    async hincrbyfloat(key, increments) {
      const args = incrementArgs(increments);
      if (args.length > 0) await run("EVAL", () => redis.eval<string[], number>(HASH_INCREMENT_SCRIPT, [key], args));
    },

    async hset(key, fields) {
      if (Object.keys(fields).length > 0) await run("HSET", () => redis.hset(key, fields));
    },

    async hgetall(key) {
      // With deserialization off the SDK hands back the server's flat [field, value, ...] reply.
      const reply: unknown = await run("HGETALL", () => redis.hgetall(key));
      if (!Array.isArray(reply)) return (reply as Record<string, string> | null) ?? {};
      const fields: Record<string, string> = {};
      for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1]);
      return fields;
    },

    async hdel(key, fields) {
      return fields.length === 0 ? 0 : run("HDEL", () => redis.hdel(key, ...fields));
    },

    async close() {
      closed = true;
    },
  };
}
