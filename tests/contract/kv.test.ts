import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { KvError, type KeyValueStore } from "../../common/kv/index.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { createUpstashKeyValueStore } from "../../common/kv/upstash.ts";
import { closedPort, deleteKeysWithPrefix, probeRedis, uniqueKeyPrefix } from "../support/redis.ts";
import { startUpstashBridge, type UpstashBridge } from "../../dev/edge/upstash-bridge.ts";

/**
 * One contract, three adapters: whatever the chat cache, the chat lock and the job queue rely on
 * must hold for the in-process store, Redis over TCP and Upstash REST alike.
 */

const redis = await probeRedis();
if (!redis.reachable) console.warn(`kv.contract: Redis and Upstash variants skipped: ${redis.reason}`);

interface Opened {
  store: KeyValueStore;
  shutdown(): Promise<void>;
}

interface Variant {
  name: string;
  needsRedis: boolean;
  open(): Promise<Opened>;
}

const variants: Variant[] = [
  {
    name: "in-process",
    needsRedis: false,
    async open() {
      const store = createMemoryKeyValueStore();
      return { store, shutdown: () => store.close() };
    },
  },
  {
    // The edge on a laptop (npm run edge:*): the edge API's Upstash adapter over the in-process store.
    name: "Upstash via the REST bridge over the in-process store",
    needsRedis: false,
    async open() {
      const memory = createMemoryKeyValueStore();
      const bridge = await startUpstashBridge({ store: memory });
      const store = createUpstashKeyValueStore({ url: bridge.url, token: bridge.token });
      return {
        store,
        async shutdown() {
          await store.close();
          await bridge.stop();
          await memory.close();
        },
      };
    },
  },
  {
    name: "Redis via Bun",
    needsRedis: true,
    async open() {
      const store = createRedisKeyValueStore({ url: redis.url });
      return { store, shutdown: () => store.close() };
    },
  },
  {
    name: "Upstash via the REST bridge",
    needsRedis: true,
    async open() {
      const bridge = await startUpstashBridge({ redisUrl: redis.url });
      const store = createUpstashKeyValueStore({ url: bridge.url, token: bridge.token });
      return {
        store,
        async shutdown() {
          await store.close();
          await bridge.stop();
        },
      };
    },
  },
];

const EXPIRY_WAIT_MS = 1_500;

for (const variant of variants) {
  describe.skipIf(variant.needsRedis && !redis.reachable)(`${variant.name} key-value store`, () => {
    const prefix = uniqueKeyPrefix("kv-contract");
    const key = (name: string) => prefix + name;
    let opened: Opened;
    let kv: KeyValueStore;

    beforeAll(async () => {
      opened = await variant.open();
      kv = opened.store;
    });

    afterAll(async () => {
      await opened?.shutdown();
      if (variant.needsRedis) await deleteKeysWithPrefix(prefix, redis.url);
    });

    test("a value that was set reads back, and a key never set reads as null", async () => {
      expect(await kv.set(key("greeting"), "hello")).toBe(true);
      expect(await kv.get(key("greeting"))).toBe("hello");
      expect(await kv.get(key("never-set"))).toBeNull();
      expect(await kv.set(key("greeting"), "hello again")).toBe(true);
      expect(await kv.get(key("greeting"))).toBe("hello again");
    });

    test("mget answers in the order of the keys, with null for missing keys", async () => {
      await kv.set(key("m1"), "one");
      await kv.set(key("m3"), "three");
      expect(await kv.mget([key("m3"), key("m2"), key("m1"), key("m3")])).toEqual(["three", null, "one", "three"]);
      expect(await kv.mget([])).toEqual([]);
    });

    test("values come back exactly as stored, whatever they look like", async () => {
      const values = [
        "Élisabeth Bennet — «Mr. Darcy»",
        "汉字とかな 한국어 العربية",
        "🙂👩‍👩‍👧 e\u0301",
        'line one\nline "two"\ttab \\ backslash',
        '{"name":"Alice","age":7}',
        "42",
        "null",
        "true",
        "OK",
        "T0s=",
        JSON.stringify({ text: "a lone \ud800 surrogate" }),
        "",
        "x".repeat(100_000),
      ];
      const keys = values.map((_, i) => key(`value:${i}`));
      for (const [i, value] of values.entries()) await kv.set(keys[i]!, value);
      for (const [i, value] of values.entries()) expect(await kv.get(keys[i]!)).toBe(value);
      expect(await kv.mget(keys)).toEqual(values);
      await kv.lpush(key("value-list"), ...values);
      expect(await kv.lrange(key("value-list"), 0, -1)).toEqual([...values].reverse());
    });

    test(
      "a key set with an expiry is there before it and gone after it, and a plain set drops the expiry",
      async () => {
        await kv.set(key("ttl:expiring"), "soon gone", { ex: 1 });
        expect(await kv.setIfAbsentThenMget(key("ttl:lock"), "holder", 1, [])).toEqual({ set: true, values: [] });
        await kv.set(key("ttl:reset"), "first", { ex: 1 });
        await kv.set(key("ttl:reset"), "kept");
        await kv.set(key("ttl:expire-later"), "also soon gone");
        expect(await kv.expire(key("ttl:expire-later"), 1)).toBe(true);
        // A lock kept alive by its holder outlives its first expiry; another token cannot keep it.
        await kv.set(key("ttl:kept-alive"), "holder", { ex: 1 });
        await kv.set(key("ttl:not-kept"), "holder", { ex: 1 });
        expect(await kv.expireIfEquals(key("ttl:kept-alive"), "holder", 30)).toBe(true);
        expect(await kv.expireIfEquals(key("ttl:not-kept"), "someone else", 30)).toBe(false);
        expect(await kv.expireIfEquals(key("ttl:no-such-key"), "holder", 30)).toBe(false);
        expect(await kv.mget([key("ttl:expiring"), key("ttl:reset"), key("ttl:expire-later")])).toEqual([
          "soon gone",
          "kept",
          "also soon gone",
        ]);

        await Bun.sleep(EXPIRY_WAIT_MS);

        expect(await kv.get(key("ttl:expiring"))).toBeNull();
        expect(await kv.get(key("ttl:reset"))).toBe("kept");
        expect([await kv.get(key("ttl:kept-alive")), await kv.get(key("ttl:not-kept"))]).toEqual(["holder", null]);
        expect(await kv.mget([key("ttl:expiring"), key("ttl:expire-later"), key("ttl:lock")])).toEqual([null, null, null]);
        // An expired key is absent in every sense: set-if-absent succeeds on it.
        expect(await kv.set(key("ttl:expiring"), "again", { nx: true })).toBe(true);
      },
      10_000,
    );

    test("an expiry that is not a positive whole number of seconds is refused with KvError", async () => {
      for (const ex of [0, -5, 1.5]) {
        await expect(kv.set(key("bad-ttl"), "x", { ex })).rejects.toBeInstanceOf(KvError);
      }
      expect(await kv.get(key("bad-ttl"))).toBeNull();
    });

    test("set with nx refuses to overwrite a key that exists and reports false", async () => {
      expect(await kv.set(key("nx"), "first", { nx: true, ex: 30 })).toBe(true);
      expect(await kv.set(key("nx"), "second", { nx: true, ex: 30 })).toBe(false);
      expect(await kv.get(key("nx"))).toBe("first");
      await kv.del(key("nx"));
      expect(await kv.set(key("nx"), "third", { nx: true })).toBe(true);
      expect(await kv.get(key("nx"))).toBe("third");
    });

    test("setIfAbsentThenMget takes a free key and reads the others as they stand after it; on a taken key it changes nothing and reads them all the same", async () => {
      await kv.set(key("taken-lock"), "other holder");
      await kv.set(key("read:a"), "A");
      await kv.lpush(key("read:list"), "not a string");
      expect(await kv.setIfAbsentThenMget(key("free-lock"), "mine", 30, [key("read:a"), key("read:missing"), key("read:list"), key("free-lock")])).toEqual({
        set: true,
        values: ["A", null, null, "mine"],
      });
      expect(await kv.setIfAbsentThenMget(key("lone-lock"), "mine", 30, [])).toEqual({ set: true, values: [] });
      expect(await kv.setIfAbsentThenMget(key("taken-lock"), "mine", 30, [key("read:a"), key("taken-lock")])).toEqual({ set: false, values: ["A", "other holder"] });
      expect(await kv.mget([key("taken-lock"), key("free-lock"), key("lone-lock")])).toEqual(["other holder", "mine", "mine"]);
      // The key is taken with its expiry: a holder that dies frees it by itself.
      expect(await kv.expireIfEquals(key("free-lock"), "mine", 30)).toBe(true);
      const racers = await Promise.all(Array.from({ length: 20 }, (_, i) => kv.setIfAbsentThenMget(key("raced-lock"), `racer ${i}`, 30, [key("read:a")])));
      expect(racers.filter((r) => r.set)).toEqual([{ set: true, values: ["A"] }]);
      expect(racers.every((r) => r.values[0] === "A")).toBe(true);
    });

    test("deleteIfEquals keeps a lock held under another token and releases it with the right one", async () => {
      await kv.set(key("lock:release"), "a1b2c3", { nx: true, ex: 30 });
      expect(await kv.deleteIfEquals(key("lock:release"), "ffffff")).toBe(false);
      expect(await kv.get(key("lock:release"))).toBe("a1b2c3");
      expect(await kv.deleteIfEquals(key("lock:release"), "a1b2c3")).toBe(true);
      expect(await kv.get(key("lock:release"))).toBeNull();
      expect(await kv.deleteIfEquals(key("lock:release"), "a1b2c3")).toBe(false);
    });

    test("fifty concurrent lock attempts produce exactly one winner, and the lock can be taken again once released", async () => {
      const lock = key("lock:contended");
      const tokens = Array.from({ length: 50 }, (_, i) => `token-${i}`);
      const results = await Promise.all(tokens.map((token) => kv.set(lock, token, { nx: true, ex: 30 })));
      const winners = tokens.filter((_, i) => results[i]);
      expect(winners).toHaveLength(1);
      expect(await kv.get(lock)).toBe(winners[0]!);

      expect(await kv.deleteIfEquals(lock, winners[0]!)).toBe(true);
      expect(await kv.set(lock, "next-holder", { nx: true, ex: 30 })).toBe(true);
    });

    test("del removes a key and is harmless on a missing one", async () => {
      await kv.set(key("doomed"), "x");
      await kv.del(key("doomed"));
      expect(await kv.get(key("doomed"))).toBeNull();
      await kv.del(key("doomed"));
    });

    test("expire on a missing key returns false and creates nothing", async () => {
      expect(await kv.expire(key("no-such-key"), 10)).toBe(false);
      expect(await kv.get(key("no-such-key"))).toBeNull();
      expect(await kv.llen(key("no-such-key"))).toBe(0);
    });

    test("values pushed on the left come off the right in the order they were pushed", async () => {
      const queue = key("queue:fifo");
      expect(await kv.lpush(queue, "job-1")).toBe(1);
      expect(await kv.lpush(queue, "job-2", "job-3")).toBe(3);
      expect(await kv.lpush(queue)).toBe(3);
      expect(await kv.llen(queue)).toBe(3);
      expect(await kv.rpop(queue)).toBe("job-1");
      expect(await kv.rpop(queue)).toBe("job-2");
      expect(await kv.rpop(queue)).toBe("job-3");
      expect(await kv.rpop(queue)).toBeNull();
      // An emptied list no longer exists, so the key is free for any use.
      expect(await kv.llen(queue)).toBe(0);
      expect(await kv.get(queue)).toBeNull();
      expect(await kv.set(queue, "now a string", { nx: true })).toBe(true);
    });

    test("lmove hands each job to exactly one consumer and returns null once the queue is empty", async () => {
      const pending = key("queue:pending");
      const inFlight = key("queue:in-flight");
      const jobs = Array.from({ length: 10 }, (_, i) => `job-${i}`);
      await kv.lpush(pending, ...jobs);

      const taken = await Promise.all(Array.from({ length: 15 }, () => kv.lmove(pending, inFlight, "right", "left")));
      const moved = taken.filter((v): v is string => v !== null);
      expect(moved.toSorted()).toEqual(jobs.toSorted());
      expect(taken.filter((v) => v === null)).toHaveLength(5);
      expect(await kv.llen(pending)).toBe(0);
      expect((await kv.lrange(inFlight, 0, -1)).toSorted()).toEqual(jobs.toSorted());
    });

    test("lmove takes the oldest job and puts it where the caller asked", async () => {
      const pending = key("queue:order");
      const inFlight = key("queue:order:in-flight");
      await kv.lpush(pending, "first", "second", "third");
      expect(await kv.lmove(pending, inFlight, "right", "left")).toBe("first");
      expect(await kv.lmove(pending, inFlight, "right", "left")).toBe("second");
      expect(await kv.lrange(inFlight, 0, -1)).toEqual(["second", "first"]);
      expect(await kv.lrange(pending, 0, -1)).toEqual(["third"]);
      // Handing a job back on the right puts it first in line again.
      expect(await kv.lmove(inFlight, pending, "left", "right")).toBe("second");
      expect(await kv.lrange(pending, 0, -1)).toEqual(["third", "second"]);
      expect(await kv.rpop(pending)).toBe("second");
      expect(await kv.lmove(key("queue:none"), inFlight, "right", "left")).toBeNull();
      expect(await kv.lrange(inFlight, 0, -1)).toEqual(["first"]);
    });

    test("lrem acknowledges a job by value and reports how many copies it removed", async () => {
      const list = key("queue:ack");
      // Left to right after these pushes: a b a c a b
      await kv.lpush(list, "b", "a", "c", "a", "b", "a");
      expect(await kv.lrem(list, 1, "a")).toBe(1);
      expect(await kv.lrange(list, 0, -1)).toEqual(["b", "a", "c", "a", "b"]);
      expect(await kv.lrem(list, -1, "b")).toBe(1);
      expect(await kv.lrange(list, 0, -1)).toEqual(["b", "a", "c", "a"]);
      expect(await kv.lrem(list, 0, "a")).toBe(2);
      expect(await kv.lrange(list, 0, -1)).toEqual(["b", "c"]);
      expect(await kv.lrem(list, 0, "missing")).toBe(0);
      expect(await kv.lrem(list, 0, "b")).toBe(1);
      expect(await kv.lrem(list, 0, "c")).toBe(1);
      expect(await kv.llen(list)).toBe(0);
      expect(await kv.lrem(key("queue:never"), 0, "x")).toBe(0);
    });

    test("lrange counts negative indexes from the end and clamps ranges past either end", async () => {
      const list = key("list:range");
      await kv.lpush(list, "e", "d", "c", "b", "a");
      expect(await kv.lrange(list, 0, -1)).toEqual(["a", "b", "c", "d", "e"]);
      expect(await kv.lrange(list, 1, 2)).toEqual(["b", "c"]);
      expect(await kv.lrange(list, -2, -1)).toEqual(["d", "e"]);
      expect(await kv.lrange(list, -100, 1)).toEqual(["a", "b"]);
      expect(await kv.lrange(list, 3, 100)).toEqual(["d", "e"]);
      expect(await kv.lrange(list, 4, 2)).toEqual([]);
      expect(await kv.lrange(list, 5, 10)).toEqual([]);
      expect(await kv.lrange(key("list:none"), 0, -1)).toEqual([]);
    });

    test("using a key as the wrong type fails with KvError and leaves the key as it was", async () => {
      await kv.set(key("typed:string"), "plain");
      await kv.lpush(key("typed:list"), "item");
      await expect(kv.lpush(key("typed:string"), "x")).rejects.toBeInstanceOf(KvError);
      await expect(kv.get(key("typed:list"))).rejects.toBeInstanceOf(KvError);
      // MGET, like Redis, reads a key of another type as null rather than failing the batch.
      expect(await kv.mget([key("typed:list"), key("typed:string")])).toEqual([null, "plain"]);
      await expect(kv.lmove(key("typed:list"), key("typed:string"), "right", "left")).rejects.toBeInstanceOf(KvError);
      expect(await kv.get(key("typed:string"))).toBe("plain");
      expect(await kv.lrange(key("typed:list"), 0, -1)).toEqual(["item"]);
    });

    test("hincrbyfloat adds every increment to its field in one step, a missing field counting as zero", async () => {
      const hash = key("hash:sums");
      await kv.hincrbyfloat(hash, { 'http_requests_total{method="GET"}': 3, "sum": 0.25 });
      await kv.hincrbyfloat(hash, { 'http_requests_total{method="GET"}': 2, "sum": 0.5, "fresh": -1.5 });
      await kv.hincrbyfloat(hash, {});
      const read = await kv.hgetall(hash);
      expect(Object.keys(read).sort()).toEqual(["fresh", 'http_requests_total{method="GET"}', "sum"]);
      expect(Number(read['http_requests_total{method="GET"}'])).toBe(5);
      expect(Number(read.sum)).toBe(0.75);
      expect(Number(read.fresh)).toBe(-1.5);
    });

    test("concurrent hincrbyfloat calls on one hash lose no increment", async () => {
      const hash = key("hash:concurrent");
      await Promise.all(Array.from({ length: 40 }, () => kv.hincrbyfloat(hash, { a: 1, b: 0.5 })));
      const read = await kv.hgetall(hash);
      expect(Number(read.a)).toBe(40);
      expect(Number(read.b)).toBe(20);
    });

    test("hset writes fields as strings, hgetall reads them back exactly, and hdel removes them", async () => {
      const hash = key("hash:fields");
      const json = JSON.stringify({ at: 1, values: { x: 2 } });
      await kv.hset(hash, { isolate: json, numeric: "0.10", empty: "" });
      await kv.hset(hash, { numeric: "42" });
      expect(await kv.hgetall(hash)).toEqual({ isolate: json, numeric: "42", empty: "" });
      expect(await kv.hdel(hash, ["numeric", "never"])).toBe(1);
      expect(await kv.hdel(hash, [])).toBe(0);
      expect(await kv.hgetall(hash)).toEqual({ isolate: json, empty: "" });
      expect(await kv.hdel(hash, ["isolate", "empty"])).toBe(2);
      // Like Redis: the hash is gone with its last field.
      expect(await kv.hgetall(hash)).toEqual({});
      expect(await kv.hgetall(key("hash:never"))).toEqual({});
      expect(await kv.hdel(key("hash:never"), ["x"])).toBe(0);
    });

    test("hash commands on a key of another type fail with KvError and change nothing", async () => {
      await kv.set(key("hash:string"), "plain");
      await expect(kv.hincrbyfloat(key("hash:string"), { a: 1 })).rejects.toBeInstanceOf(KvError);
      await expect(kv.hset(key("hash:string"), { a: "1" })).rejects.toBeInstanceOf(KvError);
      await expect(kv.hgetall(key("hash:string"))).rejects.toBeInstanceOf(KvError);
      expect(await kv.get(key("hash:string"))).toBe("plain");
      await kv.hset(key("hash:text"), { word: "not a number" });
      await expect(kv.hincrbyfloat(key("hash:text"), { word: 1 })).rejects.toBeInstanceOf(KvError);
      expect(await kv.hgetall(key("hash:text"))).toEqual({ word: "not a number" });
    });

    test("a closed store refuses further commands with KvError", async () => {
      const other = await variant.open();
      await other.store.set(key("closed"), "x");
      await other.shutdown();
      await expect(other.store.get(key("closed"))).rejects.toBeInstanceOf(KvError);
    });
  });
}

/** Accepts connections and answers Redis's HELLO handshake, then never replies to anything again. */
function stalledRedisServer() {
  return Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(socket, bytes) {
        if (bytes.toString().includes("HELLO")) socket.write("%1\r\n+server\r\n+redis\r\n");
      },
    },
  });
}

/** Accepts HTTP requests and never answers them. */
function stalledHttpServer() {
  return Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Promise<Response>(() => {}) });
}

const SHORT = { connectTimeoutMs: 300, commandTimeoutMs: 300 };

describe("an unreachable key-value store", () => {
  test("Redis on a closed port fails with KvError", async () => {
    const kv = createRedisKeyValueStore({ url: `redis://127.0.0.1:${closedPort()}`, ...SHORT });
    await expect(kv.get("anything")).rejects.toBeInstanceOf(KvError);
    await expect(kv.set("anything", "x", { nx: true, ex: 30 })).rejects.toBeInstanceOf(KvError);
    await kv.close();
  });

  test("Redis that accepts the connection but never answers the handshake fails with KvError", async () => {
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const kv = createRedisKeyValueStore({ url: `redis://127.0.0.1:${silent.port}`, ...SHORT });
    try {
      await expect(kv.get("anything")).rejects.toBeInstanceOf(KvError);
    } finally {
      await kv.close();
      silent.stop(true);
    }
  });

  test("Redis that stops answering after connecting fails each command with KvError", async () => {
    const server = stalledRedisServer();
    const kv = createRedisKeyValueStore({ url: `redis://127.0.0.1:${server.port}`, ...SHORT });
    try {
      const error = await kv.rpop("queue").catch((err: unknown) => err);
      expect(error).toBeInstanceOf(KvError);
      expect((error as KvError).message).toContain("no reply within 300 ms");
    } finally {
      await kv.close();
      server.stop(true);
    }
  });

  test("Upstash on a closed port fails with KvError after its retries", async () => {
    const kv = createUpstashKeyValueStore({ url: `http://127.0.0.1:${closedPort()}`, token: "t", maxRetries: 1, timeoutMs: 300 });
    await expect(kv.get("anything")).rejects.toBeInstanceOf(KvError);
  });

  test("Upstash that never answers fails with KvError once the request times out", async () => {
    const server = stalledHttpServer();
    const kv = createUpstashKeyValueStore({ url: `http://127.0.0.1:${server.port}`, token: "t", maxRetries: 0, timeoutMs: 300 });
    try {
      await expect(kv.set("anything", "x")).rejects.toBeInstanceOf(KvError);
    } finally {
      await server.stop(true);
    }
  });

  test("Upstash with a wrong token fails with KvError", async () => {
    const bridge = await startUpstashBridge({ redisUrl: `redis://127.0.0.1:${closedPort()}` });
    const kv = createUpstashKeyValueStore({ url: bridge.url, token: "not-the-token", maxRetries: 0 });
    try {
      const error = await kv.get("anything").catch((err: unknown) => err);
      expect(error).toBeInstanceOf(KvError);
      expect((error as KvError).message).toContain("Unauthorized");
    } finally {
      await bridge.stop();
    }
  });

  test("Upstash whose own Redis is down fails with KvError", async () => {
    const bridge = await startUpstashBridge({ redisUrl: `redis://127.0.0.1:${closedPort()}` });
    const kv = createUpstashKeyValueStore({ url: bridge.url, token: bridge.token, maxRetries: 0 });
    try {
      await expect(kv.lpush("queue", "job")).rejects.toBeInstanceOf(KvError);
    } finally {
      await bridge.stop();
    }
  });

  describe.skipIf(!redis.reachable)("after working", () => {
    let bridge: UpstashBridge | undefined;
    const prefix = uniqueKeyPrefix("kv-unreachable");
    afterAll(async () => {
      await bridge?.stop();
      await deleteKeysWithPrefix(prefix, redis.url);
    });

    test("an Upstash store whose bridge was stopped fails with KvError instead of hanging", async () => {
      bridge = await startUpstashBridge({ redisUrl: redis.url });
      const kv = createUpstashKeyValueStore({ url: bridge.url, token: bridge.token, maxRetries: 1, timeoutMs: 300 });
      expect(await kv.set(`${prefix}k`, "v")).toBe(true);
      await bridge.stop();
      await expect(kv.get(`${prefix}k`)).rejects.toBeInstanceOf(KvError);
    });
  });
});
