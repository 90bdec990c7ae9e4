import { RedisClient } from "bun";
import { toKvError, type KeyValueStore, type ListEnd, type SetOptions } from "./index.ts";
import { EXPIRE_IF_EQUALS_SCRIPT, HASH_INCREMENT_SCRIPT, incrementArgs, RELEASE_IF_EQUALS_SCRIPT, SET_IF_ABSENT_THEN_MGET_SCRIPT, setThenReadReply } from "./lua.ts";

/**
 * Redis over TCP through Bun's built-in client.
 *
 * Bun's client, left to its defaults, queues commands while disconnected and retries the
 * connection with back-off for about half a minute; after that it stays failed until someone calls
 * connect(), even once the server is back. Queued commands would also run late, after the caller
 * was already told they failed (a lock nobody holds the token for, a job enqueued twice). So this
 * adapter turns both off and owns the connection: every command first makes sure the connection
 * is up (one shared connect attempt, bounded by the connect timeout), and every command is bounded
 * by its own timeout. A server that goes away surfaces as KvError at once; the first command after
 * it comes back reconnects.
 */

export const DEFAULT_REDIS_CONNECT_TIMEOUT_MS = 2_000;
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 5_000;

export interface RedisKeyValueStoreOptions {
  /** redis:// or rediss:// URL, optionally with credentials and a database number. */
  url: string;
  /** Bound on opening a connection, handshake included. */
  connectTimeoutMs?: number;
  /** Bound on each command, so a stalled server fails the call instead of hanging it. */
  commandTimeoutMs?: number;
}

const side = (end: ListEnd) => (end === "left" ? "LEFT" : "RIGHT");

export function createRedisKeyValueStore(options: RedisKeyValueStoreOptions): KeyValueStore {
  const commandTimeoutMs = options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS;
  const client = new RedisClient(options.url, {
    connectionTimeout: options.connectTimeoutMs ?? DEFAULT_REDIS_CONNECT_TIMEOUT_MS,
    autoReconnect: false,
    enableOfflineQueue: false,
  });
  let connecting: Promise<void> | undefined;
  let closed = false;

  const connected = async () => {
    if (closed) throw new Error("store is closed");
    if (client.connected) return;
    connecting ??= client.connect().then(
      () => {
        connecting = undefined;
      },
      (err: unknown) => {
        connecting = undefined;
        throw err;
      },
    );
    await connecting;
  };

  // A server that stopped answering (paused, swapping, a network black hole) is not asked again
  // until a command timeout has passed: a chat turn then fails over to the database once, instead
  // of waiting commandTimeoutMs for each of its commands.
  let stalledUntil = 0;

  const run = async <T>(command: string, call: () => Promise<T>): Promise<T> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      if (Date.now() < stalledUntil) throw new Error(`the server stalled: a command got no reply within ${commandTimeoutMs} ms`);
      await connected();
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          stalledUntil = Date.now() + commandTimeoutMs;
          reject(new Error(`no reply within ${commandTimeoutMs} ms`));
        }, commandTimeoutMs);
      });
      return await Promise.race([call(), timeout]);
    } catch (err) {
      throw toKvError(`redis ${command}`, err);
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    driver: "redis",

    get: (key) => run("GET", () => client.get(key)),

    mget: async (keys) => (keys.length === 0 ? [] : run("MGET", () => client.mget(...keys))),

    async set(key: string, value: string, opts: SetOptions = {}) {
      const args = [...(opts.ex !== undefined ? ["EX", String(opts.ex)] : []), ...(opts.nx ? ["NX"] : [])];
      // SET answers OK when it wrote and nil when NX refused.
      return (await run("SET", () => client.set(key, value, ...args))) !== null;
    },

    async setIfAbsentThenMget(key, value, seconds, keys) {
      return setThenReadReply(await run("EVAL", () => client.eval(SET_IF_ABSENT_THEN_MGET_SCRIPT, 1 + keys.length, key, ...keys, value, String(seconds))));
    },

    async del(key) {
      await run("DEL", () => client.del(key));
    },

    async deleteIfEquals(key, value) {
      return (await run("EVAL", () => client.eval(RELEASE_IF_EQUALS_SCRIPT, 1, key, value))) === 1;
    },

    async expireIfEquals(key, value, seconds) {
      return (await run("EVAL", () => client.eval(EXPIRE_IF_EQUALS_SCRIPT, 1, key, value, String(seconds)))) === 1;
    },

    expire: async (key, seconds) => (await run("EXPIRE", () => client.expire(key, seconds))) === 1,

    async lpush(key, ...values) {
      const [first, ...rest] = values;
      if (first === undefined) return run("LLEN", () => client.llen(key));
      return run("LPUSH", () => client.lpush(key, first, ...rest));
    },

    rpop: (key) => run("RPOP", () => client.rpop(key)),

    lmove: (source, destination, from, to) =>
      run("LMOVE", () => client.lmove(source, destination, side(from), side(to))),

    lrem: (key, count, value) => run("LREM", () => client.lrem(key, count, value)),

    lrange: (key, start, stop) => run("LRANGE", () => client.lrange(key, start, stop)),

    llen: (key) => run("LLEN", () => client.llen(key)),

    async hincrbyfloat(key, increments) {
      const args = incrementArgs(increments);
      if (args.length > 0) await run("EVAL", () => client.eval(HASH_INCREMENT_SCRIPT, 1, key, ...args));
    },

    async hset(key, fields) {
      if (Object.keys(fields).length > 0) await run("HSET", () => client.hset(key, fields));
    },

    hgetall: async (key) => (await run("HGETALL", () => client.hgetall(key))) ?? {},

    async hdel(key, fields) {
      const [first, ...rest] = fields;
      return first === undefined ? 0 : run("HDEL", () => client.hdel(key, first, ...rest));
    },

    async close() {
      closed = true;
      client.close();
    },
  };
}
