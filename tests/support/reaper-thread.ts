/**
 * Another worker's reaper, in a thread of its own, as a worker in another process would run it:
 * while the test's main thread is busy, it keeps looking for leases that lapsed and posts every job
 * it hands back to the queue.
 */
import { parentPort, workerData } from "node:worker_threads";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { createReliableQueue, queueKeys } from "../../common/queue.ts";

export interface ReaperThreadData {
  url: string;
  queue: string;
  visibilityTimeoutSeconds: number;
  claimGraceMs: number;
  everyMs: number;
}

if (parentPort) {
  const port = parentPort;
  const data = workerData as ReaperThreadData;
  const queue = createReliableQueue(createRedisKeyValueStore({ url: data.url }), {
    keys: queueKeys(data.queue),
    maxAttempts: 5,
    visibilityTimeoutSeconds: data.visibilityTimeoutSeconds,
    claimGraceMs: data.claimGraceMs,
  });
  setInterval(async () => {
    const { requeued, deadLettered } = await queue.reap();
    for (const job of [...requeued, ...deadLettered.flatMap((d) => d.job ?? [])]) port.postMessage(job.job_id);
  }, data.everyMs);
}
