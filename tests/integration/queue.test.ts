import { afterAll, describe, expect, test } from "bun:test";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { createUpstashKeyValueStore } from "../../common/kv/upstash.ts";
import { createReliableQueue, enqueueJob, queueKeys, type ReliableQueueOptions } from "../../common/queue.ts";
import { deleteKeysWithPrefix, probeRedis, uniqueKeyPrefix } from "../support/redis.ts";
import { startUpstashBridge, type UpstashBridge } from "../../dev/edge/upstash-bridge.ts";

const redis = await probeRedis();
if (!redis.reachable) console.warn(`queue: Redis and Upstash variants skipped: ${redis.reason}`);
const bridge: UpstashBridge | undefined = redis.reachable ? await startUpstashBridge({ redisUrl: redis.url }) : undefined;

const BOOK = "6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b";
const USER = "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f7a";
const VISIBILITY_SECONDS = 1;

interface Harness {
  kv: KeyValueStore;
  /** Lets time pass: a fake clock in memory, real waiting against Redis (whose TTLs run on its own clock, Upstash's too). */
  advance(ms: number): Promise<void>;
  queue(options?: Partial<ReliableQueueOptions>): ReturnType<typeof createReliableQueue>;
  enqueue(fileName: string): Promise<string>;
}

const prefixes: string[] = [];
afterAll(async () => {
  if (redis.reachable) for (const prefix of prefixes) await deleteKeysWithPrefix(prefix);
  await bridge?.stop();
});

type Kind = "memory" | "redis" | "upstash";

function store(kind: Kind, now: () => number): KeyValueStore {
  if (kind === "memory") return createMemoryKeyValueStore({ now });
  if (kind === "redis") return createRedisKeyValueStore({ url: redis.url });
  return createUpstashKeyValueStore({ url: bridge!.url, token: bridge!.token });
}

function harness(kind: Kind): Harness {
  let clock = 1_700_000_000_000;
  const now = () => (kind === "memory" ? clock : Date.now());
  const prefix = uniqueKeyPrefix("queue");
  prefixes.push(prefix);
  const kv = store(kind, now);
  const keys = queueKeys(`${prefix}processing_queue`);
  return {
    kv,
    async advance(ms) {
      if (kind === "memory") clock += ms;
      else await Bun.sleep(ms);
    },
    queue: (options = {}) =>
      createReliableQueue(kv, { keys, maxAttempts: 3, visibilityTimeoutSeconds: VISIBILITY_SECONDS, claimGraceMs: 0, now, ...options }),
    async enqueue(fileName) {
      const { job } = await enqueueJob(kv, { book_id: BOOK, file_url: `https://books.example.com/${fileName}`, user_id: USER }, { queue: keys.queue });
      return job.job_id;
    },
  };
}

const variants = [
  { kind: "memory" as const, skip: false },
  { kind: "redis" as const, skip: !redis.reachable },
  { kind: "upstash" as const, skip: !redis.reachable },
];

for (const variant of variants) {
  describe.skipIf(variant.skip)(`reliable queue on the ${variant.kind} store`, () => {
    test("jobs are claimed in the order they were submitted and held in flight until completed", async () => {
      const h = harness(variant.kind);
      const queue = h.queue();
      const first = await h.enqueue("a.txt");
      const second = await h.enqueue("b.txt");

      const claimed = await queue.claim();
      expect(claimed?.job.job_id).toBe(first);
      expect(await queue.depth()).toBe(1);
      expect(await h.kv.lrange(queue.keys.inFlight, 0, -1)).toEqual([claimed!.raw]);

      await queue.complete(claimed!);
      expect(await h.kv.llen(queue.keys.inFlight)).toBe(0);
      expect((await queue.claim())?.job.job_id).toBe(second);
      expect(await queue.claim()).toBeNull();
      await h.kv.close();
    });

    test("a job whose worker stops renewing its lease goes back on the queue with one attempt counted", async () => {
      const h = harness(variant.kind);
      const queue = h.queue();
      const id = await h.enqueue("a.txt");
      const crashed = await queue.claim();
      expect(crashed).not.toBeNull();

      // The lease is still valid: the reaper leaves the job alone.
      expect(await queue.reap()).toEqual({ requeued: [], deadLettered: [] });
      expect(await queue.depth()).toBe(0);

      await h.advance(VISIBILITY_SECONDS * 1000 + 200);
      // First sighting without a lease only starts the grace period; the second returns the job.
      await queue.reap();
      const reaped = await queue.reap();
      expect(reaped.requeued.map((j) => [j.job_id, j.attempts])).toEqual([[id, 1]]);
      expect(await h.kv.llen(queue.keys.inFlight)).toBe(0);

      const again = await queue.claim();
      expect(again?.job).toMatchObject({ job_id: id, attempts: 1 });
      // The crashed worker's lease is gone for good: renewing reports it lost.
      expect(await queue.renew(crashed!)).toBe(false);
      expect(await queue.renew(again!)).toBe(true);
      await h.kv.close();
    });

    test("a lease that lapsed while its worker was busy is taken again, unless a reaper handed the job back", async () => {
      const h = harness(variant.kind);
      const queue = h.queue();
      await h.enqueue("a.txt");
      await h.enqueue("b.txt");
      const busy = await queue.claim();
      const gone = await queue.claim();
      await h.advance(VISIBILITY_SECONDS * 1000 + 200);
      expect(await queue.renew(busy!)).toBe(false);
      // Not yet handed back: the busy worker's job is its own again, with a lease the reaper respects.
      expect(await queue.reclaim(busy!)).toBe(true);
      await queue.reap();
      const reaped = await queue.reap();
      expect(reaped.requeued.map((j) => j.job_id)).toEqual([gone!.job.job_id]);
      // Handed back: the lease is not taken, and nothing of it is left behind.
      expect(await queue.reclaim(gone!)).toBe(false);
      expect(await h.kv.get(`${queue.keys.leasePrefix}${gone!.job.job_id}`)).toBeNull();
      expect(await h.kv.lrange(queue.keys.inFlight, 0, -1)).toEqual([busy!.raw]);
      await h.kv.close();
    });

    test("a renewed lease keeps the job with its worker past the visibility timeout", async () => {
      const h = harness(variant.kind);
      const queue = h.queue({ visibilityTimeoutSeconds: 3 });
      await h.enqueue("a.txt");
      const claimed = await queue.claim();
      for (let i = 0; i < 3; i++) {
        await h.advance(1_200);
        expect(await queue.renew(claimed!)).toBe(true);
        await queue.reap();
      }
      expect(await queue.depth()).toBe(0);
      expect(await h.kv.lrange(queue.keys.inFlight, 0, -1)).toEqual([claimed!.raw]);
      await h.kv.close();
    });

    test("a job that fails MAX_ATTEMPTS times is dead-lettered with the last reason", async () => {
      const h = harness(variant.kind);
      const queue = h.queue({ maxAttempts: 3 });
      const id = await h.enqueue("a.txt");
      const outcomes = [];
      for (let attempt = 1; attempt <= 3; attempt++) {
        const claimed = await queue.claim();
        expect(claimed?.job.job_id).toBe(id);
        outcomes.push(await queue.fail(claimed!, `database unavailable (${attempt})`));
      }
      expect(outcomes).toEqual([
        { status: "retried", attempts: 1 },
        { status: "retried", attempts: 2 },
        { status: "dead_lettered", attempts: 3 },
      ]);
      expect(await queue.claim()).toBeNull();
      expect(await h.kv.llen(queue.keys.inFlight)).toBe(0);
      const [dead] = await queue.deadLetters();
      expect(dead).toMatchObject({ job: { job_id: id, attempts: 3 }, reason: "database unavailable (3)" });
      await h.kv.close();
    });

    test("a job abandoned by crashed workers MAX_ATTEMPTS times is dead-lettered by the reaper", async () => {
      const h = harness(variant.kind);
      const queue = h.queue({ maxAttempts: 2 });
      const id = await h.enqueue("a.txt");
      for (let crash = 1; crash <= 2; crash++) {
        expect((await queue.claim())?.job.job_id).toBe(id);
        await h.advance(VISIBILITY_SECONDS * 1000 + 200);
        await queue.reap();
        const reaped = await queue.reap();
        if (crash === 1) expect(reaped.requeued).toHaveLength(1);
        else expect(reaped.deadLettered.map((d) => d.job?.job_id)).toEqual([id]);
      }
      expect(await queue.depth()).toBe(0);
      expect((await queue.deadLetters())[0]?.reason).toMatch(/lease expired/);
      await h.kv.close();
    });

    test("an entry that is not a job record is dead-lettered and the next job is claimed", async () => {
      const h = harness(variant.kind);
      const queue = h.queue();
      await h.kv.lpush(queue.keys.queue, "{not json");
      const id = await h.enqueue("a.txt");
      const invalid: string[] = [];
      const claimed = await queue.claim((entry) => invalid.push(entry.raw));
      expect(claimed?.job.job_id).toBe(id);
      expect(invalid).toEqual(["{not json"]);
      expect((await queue.deadLetters()).map((d) => d.raw)).toEqual(["{not json"]);
      await h.kv.close();
    });

    test("a job released at shutdown goes back untouched, without an attempt counted", async () => {
      const h = harness(variant.kind);
      const queue = h.queue();
      const id = await h.enqueue("a.txt");
      const claimed = await queue.claim();
      await queue.release(claimed!);
      expect(await h.kv.llen(queue.keys.inFlight)).toBe(0);
      const again = await queue.claim();
      expect(again?.job.job_id).toBe(id);
      expect(again?.job.attempts).toBeUndefined();
      await h.kv.close();
    });

    test("consumers claiming at the same time never receive the same job", async () => {
      const h = harness(variant.kind);
      const ids = new Set<string>();
      for (let i = 0; i < 12; i++) ids.add(await h.enqueue(`${i}.txt`));
      const consumers = Array.from({ length: 4 }, () => h.queue());
      const claimed: string[] = [];
      await Promise.all(
        consumers.map(async (queue) => {
          for (let c = await queue.claim(); c; c = await queue.claim()) claimed.push(c.job.job_id);
        }),
      );
      expect(claimed.length).toBe(12);
      expect(new Set(claimed)).toEqual(ids);
      await h.kv.close();
    });
  });
}

test("queue options are checked when the queue is built", () => {
  const kv = createMemoryKeyValueStore();
  expect(() => createReliableQueue(kv, { maxAttempts: 0 })).toThrow(RangeError);
  expect(() => createReliableQueue(kv, { maxAttempts: 3, visibilityTimeoutSeconds: 0.5 })).toThrow(RangeError);
});
