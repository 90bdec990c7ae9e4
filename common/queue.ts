import type { KeyValueStore } from "./kv/index.ts";
import { jsonAs } from "./json-as.ts";
import { JobRecord } from "./contract/schemas.ts";

/**
 * The book processing queue: a Redis list. Producers LPUSH on the left; workers take from the right,
 * so jobs run in the order they were submitted.
 *
 * Consumers are reliable without blocking pops or scripts, so every key-value adapter can serve them:
 *
 * - claim: LMOVE moves the oldest job atomically onto an in-flight list, then a lease key
 *   `{queue}:lease:{job_id}` is set with a visibility timeout that the worker renews while it works;
 * - finish: the entry leaves the in-flight list (LREM) and the lease is released;
 * - fail: the job goes back on the queue with `attempts + 1`, or to the dead-letter list once it has
 *   failed MAX_ATTEMPTS times;
 * - reap: an in-flight job whose lease has expired (its worker died) counts as a failed attempt. A
 *   job is judged only after it has been seen without a lease for `claimGraceMs`, which covers the
 *   moment between a claim's LMOVE and its lease. One reaper works at a time (a short lock), and it
 *   pushes a job back before removing it from the in-flight list: a crash in between leaves a
 *   duplicate, which an idempotent pipeline absorbs, never a lost job.
 */

export const PROCESSING_QUEUE = "processing_queue";
export const DEFAULT_VISIBILITY_TIMEOUT_SECONDS = 60;
export const DEFAULT_CLAIM_GRACE_MS = 5_000;

export interface NewJob {
  book_id: string;
  file_url: string;
  user_id: string;
}

export interface EnqueueOptions {
  now?: () => Date;
  newId?: () => string;
  /** The queue's list; PROCESSING_QUEUE unless set (tests isolate themselves with a prefix). */
  queue?: string;
}

/** Pushes a job record and returns it with the queue depth after the push. */
export async function enqueueJob(kv: KeyValueStore, job: NewJob, options: EnqueueOptions = {}): Promise<{ job: JobRecord; depth: number }> {
  const record: JobRecord = {
    job_id: options.newId?.() ?? crypto.randomUUID(),
    book_id: job.book_id,
    file_url: job.file_url,
    user_id: job.user_id,
    enqueued_at: (options.now?.() ?? new Date()).toISOString(),
  };
  const depth = await kv.lpush(options.queue ?? PROCESSING_QUEUE, JSON.stringify(record));
  return { job: record, depth };
}

/** Parses a queued entry; null for anything that is not a job record (it is dead-lettered by the worker). */
function parseJob(raw: string): JobRecord | null {
  return jsonAs(JobRecord, raw);
}

// Reliable consumption ---------------------------------------------------------------------------

export interface QueueKeys {
  queue: string;
  inFlight: string;
  deadLetter: string;
  leasePrefix: string;
  reaperLock: string;
}

/** The keys of a queue; every one derives from the queue's own name. */
export function queueKeys(queue: string = PROCESSING_QUEUE): QueueKeys {
  return {
    queue,
    inFlight: `${queue}:in_flight`,
    deadLetter: `${queue}:dead_letter`,
    leasePrefix: `${queue}:lease:`,
    reaperLock: `${queue}:reaper`,
  };
}

/** The key of a job's lease: present while a worker holds the job. */
export function leaseKey(keys: QueueKeys, job: Pick<JobRecord, "job_id">): string {
  return `${keys.leasePrefix}${job.job_id}`;
}

/** A job this consumer holds. `raw` is the exact in-flight entry, which is how it is removed. */
export interface ClaimedJob {
  job: JobRecord;
  raw: string;
  token: string;
}

/** What a dead-letter entry holds: the job, why it died and when. */
export interface DeadLetter {
  job: JobRecord | null;
  raw: string;
  reason: string;
  dead_lettered_at: string;
}

export interface ReapResult {
  requeued: JobRecord[];
  deadLettered: DeadLetter[];
}

export type FailOutcome = { status: "retried"; attempts: number } | { status: "dead_lettered"; attempts: number };

export interface ReliableQueueOptions {
  keys?: QueueKeys;
  /** Tries per job before it is dead-lettered (MAX_ATTEMPTS). */
  maxAttempts: number;
  visibilityTimeoutSeconds?: number;
  claimGraceMs?: number;
  /** Epoch milliseconds; tests pass a fake clock. */
  now?: () => number;
}

export interface ReliableQueue {
  readonly keys: QueueKeys;
  readonly visibilityTimeoutSeconds: number;
  /**
   * Takes the oldest job, or null when the queue is empty. An entry that is not a job record is
   * dead-lettered on the spot and reported through `onInvalid`; the claim then moves on.
   */
  claim(onInvalid?: (entry: DeadLetter) => void): Promise<ClaimedJob | null>;
  /** Extends the lease; false when it was lost (expired and reaped), so the job is no longer ours. */
  renew(claim: ClaimedJob): Promise<boolean>;
  /**
   * Takes a lapsed lease again when no reaper has handed the job back meanwhile (its worker was busy
   * past the lease, not gone); false when the job is no longer ours.
   */
  reclaim(claim: ClaimedJob): Promise<boolean>;
  /** The job is done, successfully or for good: it leaves the queue. */
  complete(claim: ClaimedJob): Promise<void>;
  /** The attempt failed: back on the queue, or dead-lettered after maxAttempts. */
  fail(claim: ClaimedJob, reason: string): Promise<FailOutcome>;
  /** Returns the job untouched (shutdown): it does not count as an attempt. */
  release(claim: ClaimedJob): Promise<void>;
  /** Returns jobs whose worker stopped renewing their lease; see the module comment. */
  reap(): Promise<ReapResult>;
  depth(): Promise<number>;
  deadLetters(): Promise<DeadLetter[]>;
}

export function createReliableQueue(kv: KeyValueStore, options: ReliableQueueOptions): ReliableQueue {
  const keys = options.keys ?? queueKeys();
  const visibility = options.visibilityTimeoutSeconds ?? DEFAULT_VISIBILITY_TIMEOUT_SECONDS;
  const grace = options.claimGraceMs ?? DEFAULT_CLAIM_GRACE_MS;
  const now = options.now ?? Date.now;
  if (!Number.isInteger(visibility) || visibility < 1) throw new RangeError(`visibilityTimeoutSeconds must be a positive integer, got ${visibility}`);
  if (!Number.isInteger(options.maxAttempts) || options.maxAttempts < 1) throw new RangeError(`maxAttempts must be a positive integer, got ${options.maxAttempts}`);
  /** In-flight entries seen without a lease, and since when (this process's own observation). */
  const leaseless = new Map<string, number>();

  const deadLetter = async (raw: string, job: JobRecord | null, reason: string): Promise<DeadLetter> => {
    const entry: DeadLetter = { job, raw, reason, dead_lettered_at: new Date(now()).toISOString() };
    await kv.lpush(keys.deadLetter, JSON.stringify(entry));
    await kv.lrem(keys.inFlight, 1, raw);
    return entry;
  };

  /** Pushes the job back (or dead-letters it) with one more failed attempt, then drops the in-flight entry. */
  const failAttempt = async (raw: string, job: JobRecord, reason: string): Promise<FailOutcome & { entry?: DeadLetter }> => {
    const attempts = (job.attempts ?? 0) + 1;
    if (attempts >= options.maxAttempts) {
      return { status: "dead_lettered", attempts, entry: await deadLetter(raw, { ...job, attempts }, reason) };
    }
    await kv.lpush(keys.queue, JSON.stringify({ ...job, attempts }));
    await kv.lrem(keys.inFlight, 1, raw);
    return { status: "retried", attempts };
  };

  return {
    keys,
    visibilityTimeoutSeconds: visibility,

    async claim(onInvalid) {
      for (;;) {
        const raw = await kv.lmove(keys.queue, keys.inFlight, "right", "left");
        if (raw === null) return null;
        const job = parseJob(raw);
        if (!job) {
          const entry = await deadLetter(raw, null, "not a job record");
          onInvalid?.(entry);
          continue;
        }
        const token = crypto.randomUUID();
        await kv.set(leaseKey(keys, job), token, { ex: visibility });
        return { job, raw, token };
      }
    },

    async renew(claim) {
      const key = leaseKey(keys, claim.job);
      if ((await kv.get(key)) !== claim.token) return false;
      return kv.expire(key, visibility);
    },

    async reclaim(claim) {
      const key = leaseKey(keys, claim.job);
      if (!(await kv.set(key, claim.token, { nx: true, ex: visibility }))) return (await kv.get(key)) === claim.token;
      // Still in flight: no reaper handed it back. A reaper between its push and its removal would make
      // a duplicate, which the pipeline absorbs, as after a crash in the same place.
      if ((await kv.lrange(keys.inFlight, 0, -1)).includes(claim.raw)) return true;
      await kv.deleteIfEquals(key, claim.token);
      return false;
    },

    async complete(claim) {
      await kv.lrem(keys.inFlight, 1, claim.raw);
      await kv.deleteIfEquals(leaseKey(keys, claim.job), claim.token);
    },

    async fail(claim, reason) {
      const { status, attempts } = await failAttempt(claim.raw, claim.job, reason);
      await kv.deleteIfEquals(leaseKey(keys, claim.job), claim.token);
      return { status, attempts };
    },

    async release(claim) {
      // RPUSH is not in the port; LPUSH puts the job at the back, behind what arrived meanwhile.
      await kv.lpush(keys.queue, claim.raw);
      await kv.lrem(keys.inFlight, 1, claim.raw);
      await kv.deleteIfEquals(leaseKey(keys, claim.job), claim.token);
    },

    async reap() {
      const result: ReapResult = { requeued: [], deadLettered: [] };
      const lockToken = crypto.randomUUID();
      if (!(await kv.set(keys.reaperLock, lockToken, { nx: true, ex: visibility }))) return result;
      try {
        const entries = await kv.lrange(keys.inFlight, 0, -1);
        const present = new Set(entries);
        for (const raw of leaseless.keys()) if (!present.has(raw)) leaseless.delete(raw);
        const jobs = entries.map(parseJob);
        const leaseKeys = jobs.flatMap((job) => (job ? [leaseKey(keys, job)] : []));
        const values = leaseKeys.length > 0 ? await kv.mget(leaseKeys) : [];
        const leased = new Set(leaseKeys.filter((_, i) => values[i] !== null));
        for (const [i, raw] of entries.entries()) {
          const job = jobs[i] ?? null;
          if (job && leased.has(leaseKey(keys, job))) {
            leaseless.delete(raw);
            continue;
          }
          const since = leaseless.get(raw);
          if (since === undefined) {
            leaseless.set(raw, now());
            continue;
          }
          if (now() - since < grace) continue;
          leaseless.delete(raw);
          if (!job) {
            result.deadLettered.push(await deadLetter(raw, null, "not a job record"));
            continue;
          }
          const reason = "lease expired: the worker stopped while processing the job";
          const outcome = await failAttempt(raw, job, reason);
          if (outcome.entry) result.deadLettered.push(outcome.entry);
          else result.requeued.push({ ...job, attempts: outcome.attempts });
        }
      } finally {
        await kv.deleteIfEquals(keys.reaperLock, lockToken);
      }
      return result;
    },

    depth: () => kv.llen(keys.queue),

    async deadLetters() {
      const entries = await kv.lrange(keys.deadLetter, 0, -1);
      return entries.map((e) => JSON.parse(e) as DeadLetter);
    },
  };
}
