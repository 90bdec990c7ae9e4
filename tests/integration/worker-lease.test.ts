import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { Worker } from "node:worker_threads";
import { getBook } from "../../common/db/books.ts";
import { getIngestion } from "../../common/db/ingestions.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { enqueueJob, queueKeys, type QueueKeys } from "../../common/queue.ts";
import { startWorker } from "../../ingest/jobs/queue-consumer.ts";
import { metricValue } from "../support/app.ts";
import { openIngestSuite } from "../support/ingest-suite.ts";
import { deleteKeysWithPrefix, probeRedis, uniqueKeyPrefix } from "../support/redis.ts";
import type { ReaperThreadData } from "../support/reaper-thread.ts";
import { ENGLISH_BOOK, TEST_PIPELINE_OPTIONS, USER_ID, eventually } from "../fixtures/ingest/harness.ts";

/**
 * A step that keeps the worker's main thread busy for longer than a lease lasts must cost no book an
 * attempt: not its own, nor the one running beside it. The leases are renewed from a thread of their
 * own (ingest/jobs/lease-keeper.ts); another worker's reaper, in a thread as it would be in another process,
 * watches them the whole time.
 */

setDefaultTimeout(120_000);

const redis = await probeRedis();
if (!redis.reachable) console.warn(`worker-lease: skipped: leases shared between workers need Redis: ${redis.reason}`);

const { books, db, setup } = await openIngestSuite();

const VISIBILITY_SECONDS = 2;
/** The busy step: three lease lengths of the main thread's CPU. */
const BUSY_MS = 3 * VISIBILITY_SECONDS * 1000;

/** Keeps the calling thread's CPU busy, as a step over a hostile text did (151 s beside a 215 KB file). */
function busy(ms: number): void {
  const until = performance.now() + ms;
  let spins = 0;
  while (performance.now() < until) spins++;
  if (spins < 0) throw new Error("unreachable");
}

type Env = Awaited<ReturnType<typeof setup>>["env"];
type WorkerOptions = Parameters<typeof startWorker>[1];

/**
 * Two books on the queue, worked side by side; the second download starts the busy step, once both
 * jobs are running. Settles when both are completed, with how many downloads there were and the
 * worker's metrics.
 */
async function twoBooksWithABusyStep(env: Env, kv: KeyValueStore, queue: QueueKeys | undefined, options: Partial<WorkerOptions>) {
  const ids: string[] = [];
  for (const title of ["The book that keeps the worker busy", "The book beside it"]) {
    const book = await insertBook(db, { title });
    ids.push(book.id);
    await enqueueJob(kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID }, queue ? { queue: queue.queue } : {});
  }
  let downloads = 0;
  const worker = startWorker(env.deps, {
    ...(queue ? { keys: queue } : {}),
    concurrency: 2,
    minPollMs: 10,
    maxPollMs: 50,
    visibilityTimeoutSeconds: VISIBILITY_SECONDS,
    ...options,
    pipeline: {
      ...TEST_PIPELINE_OPTIONS,
      fetch: async (input, init) => {
        if (++downloads === 2) busy(BUSY_MS);
        return fetch(input, init);
      },
    },
  });
  await eventually(
    async () => (await Promise.all(ids.map((id) => getBook(db, id)))).every((b) => b?.processingStatus === "completed"),
    "both books to complete",
  );
  await worker.stop();
  return { ids, downloads, metrics: await env.deps.metrics.registry.metrics() };
}

describe.skipIf(!redis.reachable)("a step that keeps the worker busy past its lease", () => {
  test("costs neither its book nor the book beside it an attempt", async () => {
    const prefix = uniqueKeyPrefix("worker-lease");
    const keys = queueKeys(`${prefix}processing_queue`);
    const kv = createRedisKeyValueStore({ url: redis.url });
    const { env } = await setup({ kv, env: { REDIS_URL: redis.url } });
    const reaper = new Worker(new URL("../support/reaper-thread.ts", import.meta.url), {
      workerData: { url: redis.url, queue: keys.queue, visibilityTimeoutSeconds: VISIBILITY_SECONDS, claimGraceMs: 300, everyMs: 100 } satisfies ReaperThreadData,
    });
    const handedBack: string[] = [];
    reaper.on("message", (jobId: string) => handedBack.push(jobId));
    try {
      const { ids, downloads, metrics } = await twoBooksWithABusyStep(env, kv, keys, {});
      expect(downloads).toBe(2);
      // Before: both leases lapsed during the busy step and the other worker handed both jobs out again.
      expect(handedBack).toEqual([]);
      for (const id of ids) expect((await getIngestion(db, id))?.lastError ?? null).toBeNull();
      expect(metricValue(metrics, "processing_jobs_retried_total")).toBe(0);
      expect(metricValue(metrics, 'processing_jobs_processed_total{status="completed"}')).toBe(2);
    } finally {
      await reaper.terminate();
      await deleteKeysWithPrefix(prefix, redis.url).catch(() => undefined);
      await kv.close();
    }
  });
});

describe("a step that keeps the worker busy past its lease, with the in-process store", () => {
  test("costs no attempt: a lease that lapsed meanwhile is taken again before any reaper hands the job back", async () => {
    // The store lives on the main thread, so the leases lapse during the busy step whatever renews them.
    const kv = createMemoryKeyValueStore();
    const { env } = await setup({ kv });
    const { downloads, metrics } = await twoBooksWithABusyStep(env, kv, undefined, { claimGraceMs: 0, reapIntervalMs: 50 });
    // Before: the renewal found both leases lapsed and gave both jobs up; the reaper handed them out again.
    expect(downloads).toBe(2);
    expect(metricValue(metrics, "processing_jobs_retried_total")).toBe(0);
    expect(metricValue(metrics, 'processing_jobs_processed_total{status="completed"}')).toBe(2);
  });
});
