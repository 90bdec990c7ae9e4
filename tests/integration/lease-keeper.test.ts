import { afterAll, describe, expect, test } from "bun:test";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { createReliableQueue, enqueueJob, leaseKey, queueKeys } from "../../common/queue.ts";
import { createLeaseKeeper } from "../../ingest/jobs/lease-keeper.ts";
import { deleteKeysWithPrefix, probeRedis, uniqueKeyPrefix } from "../support/redis.ts";

/**
 * The lease thread against a real Redis: it keeps a lease through a busy main thread, and lets it
 * lapse once the main thread has been silent for longer than a busy step may last (stuck, not busy).
 */

const redis = await probeRedis();
if (!redis.reachable) console.warn(`lease-keeper: skipped: the lease thread needs a shared store: ${redis.reason}`);

const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) await deleteKeysWithPrefix(prefix, redis.url).catch(() => undefined);
});

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

async function holdThroughBusyStep(maxSilenceMs: number) {
  const prefix = uniqueKeyPrefix("lease-keeper");
  prefixes.push(prefix);
  const kv = createRedisKeyValueStore({ url: redis.url });
  const queue = createReliableQueue(kv, { keys: queueKeys(`${prefix}processing_queue`), maxAttempts: 3, visibilityTimeoutSeconds: 1 });
  const keeper = createLeaseKeeper(queue, kv, { kvConfig: { driver: "redis", url: redis.url }, maxSilenceMs });
  await enqueueJob(kv, { book_id: crypto.randomUUID(), file_url: "https://books.example.com/a.txt", user_id: crypto.randomUUID() }, { queue: queue.keys.queue });
  const claim = (await queue.claim())!;
  let lost = false;
  const release = keeper.hold(claim, { lost: () => (lost = true), failed: () => {} });
  // Three lease lengths of the main thread's CPU; then a moment for the thread's next renewal to report.
  busy(3_000);
  const leaseAfterBusy = await kv.get(leaseKey(queue.keys, claim.job));
  await Bun.sleep(800);
  release();
  await keeper.close();
  await kv.close();
  return { where: keeper.where, leaseAfterBusy, token: claim.token, lost };
}

describe.skipIf(!redis.reachable)("the lease thread", () => {
  test("keeps a lease alive through three lease lengths of a busy main thread", async () => {
    const held = await holdThroughBusyStep(60_000);
    expect(held.where).toBe("thread");
    expect(held.leaseAfterBusy).toBe(held.token);
    expect(held.lost).toBe(false);
  });

  test("lets the lease lapse once the main thread has been silent past maxSilenceMs, and reports it lost", async () => {
    const stuck = await holdThroughBusyStep(500);
    expect(stuck.leaseAfterBusy).toBeNull();
    expect(stuck.lost).toBe(true);
  });
});
