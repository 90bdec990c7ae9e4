import type { Database, Queryable } from "../../common/db/index.ts";
import type { KeyValueStore, SetOptions } from "../../common/kv/index.ts";

/**
 * Wrappers that pass every call through to a real store and remember what was asked of it, so a
 * test can tell which statements reached the database and which writes reached the cache.
 */

export interface RecordingDatabase extends Database {
  /** Every statement, in order, transactions' included. */
  readonly statements: string[];
}

export function recordingDatabase(db: Database): RecordingDatabase {
  const statements: string[] = [];
  const recorded = (q: Queryable): Queryable => ({
    query(text, params) {
      statements.push(text);
      return q.query(text, params);
    },
    exec(sql) {
      statements.push(sql);
      return q.exec(sql);
    },
  });
  return {
    driver: db.driver,
    statements,
    ...recorded(db),
    transaction: (fn) => db.transaction((tx) => fn(recorded(tx))),
    close: () => db.close(),
  };
}

export interface RecordedSet {
  key: string;
  value: string;
  options: SetOptions | undefined;
}

export interface RecordingKeyValueStore extends KeyValueStore {
  readonly sets: RecordedSet[];
  /** The name of every command called on the store (each one round trip), in the order called. */
  readonly commands: string[];
}

export function recordingKeyValueStore(kv: KeyValueStore): RecordingKeyValueStore {
  const sets: RecordedSet[] = [];
  const commands: string[] = [];
  return new Proxy(kv as RecordingKeyValueStore, {
    get(target, property) {
      if (property === "sets") return sets;
      if (property === "commands") return commands;
      if (property === "set") {
        return (key: string, value: string, options?: SetOptions) => {
          commands.push("set");
          sets.push({ key, value, options });
          return target.set(key, value, options);
        };
      }
      // A lock taken with what it reads is a write like a set with nx: recorded as one.
      if (property === "setIfAbsentThenMget") {
        return (key: string, value: string, seconds: number, keys: readonly string[]) => {
          commands.push("setIfAbsentThenMget");
          sets.push({ key, value, options: { nx: true, ex: seconds } });
          return target.setIfAbsentThenMget(key, value, seconds, keys);
        };
      }
      const member = target[property as keyof KeyValueStore];
      if (typeof member !== "function") return member;
      return (...args: unknown[]) => {
        if (property !== "close") commands.push(String(property));
        return (member as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/**
 * Every key read or written under `prefix`, so that a suite sharing a real Redis with other suites
 * can delete exactly its own keys afterwards. Values and semantics are untouched.
 */
export function prefixedKeyValueStore(kv: KeyValueStore, prefix: string): KeyValueStore {
  const k = (key: string) => prefix + key;
  return {
    driver: kv.driver,
    get: (key) => kv.get(k(key)),
    mget: (keys) => kv.mget(keys.map(k)),
    set: (key, value, options) => kv.set(k(key), value, options),
    setIfAbsentThenMget: (key, value, seconds, keys) => kv.setIfAbsentThenMget(k(key), value, seconds, keys.map(k)),
    del: (key) => kv.del(k(key)),
    deleteIfEquals: (key, value) => kv.deleteIfEquals(k(key), value),
    expireIfEquals: (key, value, seconds) => kv.expireIfEquals(k(key), value, seconds),
    expire: (key, seconds) => kv.expire(k(key), seconds),
    lpush: (key, ...values) => kv.lpush(k(key), ...values),
    rpop: (key) => kv.rpop(k(key)),
    lmove: (source, destination, from, to) => kv.lmove(k(source), k(destination), from, to),
    lrem: (key, count, value) => kv.lrem(k(key), count, value),
    lrange: (key, start, stop) => kv.lrange(k(key), start, stop),
    llen: (key) => kv.llen(k(key)),
    hincrbyfloat: (key, increments) => kv.hincrbyfloat(k(key), increments),
    hset: (key, fields) => kv.hset(k(key), fields),
    hgetall: (key) => kv.hgetall(k(key)),
    hdel: (key, fields) => kv.hdel(k(key), fields),
    close: () => kv.close(),
  };
}
