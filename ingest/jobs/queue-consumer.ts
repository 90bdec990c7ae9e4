import { DatabaseError } from "../../common/db/index.ts";
import { clearStaleIngestionError, getIngestion, setProcessingStatus } from "../../common/db/ingestions.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import type { Logger } from "../../common/log.ts";
import { createReliableQueue, type ClaimedJob, type QueueKeys, type ReapResult } from "../../common/queue.ts";
import { BookRejectedError } from "../errors.ts";
import { nextDelay } from "../../common/retry.ts";
import { createLeaseKeeper } from "./lease-keeper.ts";
import { runPipeline, type PipelineDeps, type PipelineOptions } from "../pipeline.ts";

/**
 * The ingest worker: takes jobs from processing_queue (see common/queue.ts for the claim, lease and
 * dead-letter protocol) and runs the pipeline on each, up to `concurrency` at a time, so that a book
 * whose download is slow does not hold the books queued behind it. The book NLP step still runs one
 * book at a time per process (ingest/phases/book-nlp/phase.ts).
 *
 * Polls with exponential back-off while the queue is empty or the store fails (blocking pops are not
 * available on every key-value adapter). Keeps the job's lease alive while the pipeline runs, from a
 * thread of its own with a shared store (ingest/jobs/lease-keeper.ts). On stop()
 * (SIGTERM) it lets the current jobs finish within a grace period, then aborts them and hands them
 * back to the queue untouched.
 *
 * `bun run worker` (ingest/worker.ts) runs it alone and serves its metrics (processing and indexing) on METRICS_PORT; startWorker() also
 * runs inside another process (the API's, with `npm start`).
 */

export const DEFAULT_MIN_POLL_MS = 250;
export const DEFAULT_MAX_POLL_MS = 5_000;
export const DEFAULT_REAP_INTERVAL_MS = 15_000;
/** Kubernetes gives a pod 30 s between SIGTERM and SIGKILL; hand the job back well before. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 20_000;
/** Jobs one worker runs at once: the second keeps the queue moving while the first waits on a download or the model. */
export const DEFAULT_WORKER_CONCURRENCY = 2;

export interface WorkerDeps extends PipelineDeps {
  kv: KeyValueStore;
}

export interface WorkerOptions {
  keys?: QueueKeys;
  visibilityTimeoutSeconds?: number;
  claimGraceMs?: number;
  minPollMs?: number;
  maxPollMs?: number;
  reapIntervalMs?: number;
  shutdownGraceMs?: number;
  concurrency?: number;
  pipeline?: Omit<PipelineOptions, "signal">;
  /** How long a silent main thread keeps its leases (ingest/jobs/lease-keeper.ts, DEFAULT_MAX_SILENCE_MS). */
  maxSilenceMs?: number;
}

export interface WorkerState {
  id: string;
  running: boolean;
  /** The oldest job being processed, if any. */
  jobId: string | null;
  /** Every job being processed. */
  jobIds: string[];
  jobsHandled: number;
}

export interface WorkerHandle {
  readonly id: string;
  state(): WorkerState;
  /** Finishes or hands back the current jobs, then ends the loop. */
  stop(): Promise<void>;
  /** Settles when the loop has ended. */
  readonly stopped: Promise<void>;
}

class StopRequested extends Error {
  constructor() {
    super("worker is stopping");
    this.name = "StopRequested";
  }
}

class LeaseLost extends Error {
  constructor() {
    super("the job's lease expired and it was returned to the queue");
    this.name = "LeaseLost";
  }
}

/** The failure as stored for the book: our words for a database error, never the driver's raw text. */
const message = (err: unknown) =>
  err instanceof DatabaseError ? `the database refused the book's data (${err.code})` : err instanceof Error ? err.message : String(err);

export function startWorker(deps: WorkerDeps, options: WorkerOptions = {}): WorkerHandle {
  const id = crypto.randomUUID().slice(0, 8);
  const log: Logger = deps.logger.child({ worker: id });
  const { metrics } = deps;
  const maxAttempts = deps.config.maxAttempts;
  const queue = createReliableQueue(deps.kv, {
    maxAttempts,
    ...(options.keys ? { keys: options.keys } : {}),
    ...(options.visibilityTimeoutSeconds ? { visibilityTimeoutSeconds: options.visibilityTimeoutSeconds } : {}),
    ...(options.claimGraceMs !== undefined ? { claimGraceMs: options.claimGraceMs } : {}),
  });
  const leases = createLeaseKeeper(queue, deps.kv, { kvConfig: deps.config.kv, ...(options.maxSilenceMs ? { maxSilenceMs: options.maxSilenceMs } : {}) });
  const minPoll = options.minPollMs ?? DEFAULT_MIN_POLL_MS;
  const maxPoll = options.maxPollMs ?? DEFAULT_MAX_POLL_MS;
  const reapInterval = options.reapIntervalMs ?? DEFAULT_REAP_INTERVAL_MS;

  let stopping = false;
  let jobsHandled = 0;
  const concurrency = options.concurrency ?? DEFAULT_WORKER_CONCURRENCY;
  const current = new Map<string, { claim: ClaimedJob; controller: AbortController; done: Promise<Handled> }>();
  let wake: (() => void) | undefined;

  const idle = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  /** Keeps the book's status in line with the job; a failure here must not lose the job's outcome. */
  const setStatus = async (bookId: string, status: "pending" | "failed", reason: string) => {
    try {
      await setProcessingStatus(deps.db, bookId, status, { error: reason }, log);
    } catch (err) {
      log.error("could not update the book's status", { book_id: bookId, status, error: err });
    }
  };

  const afterReap = async ({ requeued, deadLettered }: ReapResult) => {
    for (const job of requeued) {
      metrics.processing.jobsRetried.inc();
      log.warn("job returned to the queue after its lease expired", { job_id: job.job_id, book_id: job.book_id, attempts: job.attempts });
      // A job whose worker completed the book and went away before closing it failed nothing.
      if ((await getIngestion(deps.db, job.book_id).catch(() => null))?.completedJobId === job.job_id) continue;
      await setStatus(job.book_id, "pending", `attempt ${job.attempts} of ${maxAttempts} stopped: the worker went away`);
    }
    for (const dead of deadLettered) {
      metrics.processing.jobsDeadLettered.inc();
      // An entry that is not a job record (dead.job null) was never a job, so no job failed.
      if (dead.job) metrics.processing.jobsProcessed.inc({ status: "failed" });
      log.error("job dead-lettered", { job_id: dead.job?.job_id, book_id: dead.job?.book_id, reason: dead.reason });
      if (dead.job) await setStatus(dead.job.book_id, "failed", `gave up after ${dead.job.attempts} attempts: ${dead.reason}`);
    }
  };

  /** What became of a job: done with (completed, failed, retried, abandoned), or handed back because our database was down. */
  type Handled = "settled" | "database_unavailable";

  async function handle(claim: ClaimedJob, controller: AbortController): Promise<Handled> {
    const { job } = claim;
    const jobLog = log.child({ job_id: job.job_id, book_id: job.book_id, attempt: (job.attempts ?? 0) + 1 });
    const releaseLease = leases.hold(claim, {
      lost: () => {
        if (!controller.signal.aborted) controller.abort(new LeaseLost());
      },
      failed: (err) => jobLog.warn("lease renewal failed; retrying at the next interval", { error: err }),
    });
    metrics.processing.activeWorkers.inc();
    let ran = false;
    try {
      if ((await getIngestion(deps.db, job.book_id))?.completedJobId === job.job_id) {
        // Completed before, but the queue never heard (the store stalled as the job finished).
        jobLog.warn("job already completed; closed without running it again");
        // A reaper that returned it may have recorded the attempt as stopped just as the book completed.
        await clearStaleIngestionError(deps.db, job.book_id, job.job_id);
        await queue.complete(claim);
        return "settled";
      }
      jobLog.info("job started");
      await runPipeline(deps, { bookId: job.book_id, jobId: job.job_id, source: { url: job.file_url } }, { ...options.pipeline, signal: controller.signal });
      ran = true;
      metrics.processing.jobsProcessed.inc({ status: "completed" });
      await queue.complete(claim);
      return "settled";
    } catch (err) {
      if (ran) {
        // The book is completed and recorded with this job; whoever claims the job again closes it.
        jobLog.error("could not close the completed job in the queue; it will be closed when claimed again", { error: err });
        return "settled";
      }
      return await settleFailure(controller.signal, err);
    } finally {
      releaseLease();
      metrics.processing.activeWorkers.dec();
      jobsHandled++;
    }

    async function settleFailure(signal: AbortSignal, err: unknown): Promise<Handled> {
      try {
        if (err instanceof DatabaseError && err.code === "connection" && !(signal.reason instanceof LeaseLost)) {
          // Not the book's fault, and nothing could be recorded anyway: without this, a restart of
          // a few hundred milliseconds used up every attempt and dead-lettered every book in flight.
          await queue.release(claim);
          jobLog.warn("database unavailable; job handed back without counting an attempt", { error: err });
          return "database_unavailable";
        }
        if (signal.reason instanceof LeaseLost) {
          jobLog.warn("job abandoned: its lease was lost, another worker may be running it");
        } else if (signal.reason instanceof StopRequested) {
          await queue.release(claim);
          await setStatus(job.book_id, "pending", "handed back at worker shutdown");
          jobLog.info("job handed back to the queue at shutdown");
        } else if (err instanceof BookRejectedError) {
          await queue.complete(claim);
          metrics.processing.jobsProcessed.inc({ status: "failed" });
        } else {
          const outcome = await queue.fail(claim, message(err));
          if (outcome.status === "retried") {
            metrics.processing.jobsRetried.inc();
            jobLog.warn("job attempt failed; queued again", { attempts: outcome.attempts, error: err });
            await setStatus(job.book_id, "pending", `attempt ${outcome.attempts} of ${maxAttempts} failed: ${message(err)}`);
          } else {
            metrics.processing.jobsDeadLettered.inc();
            metrics.processing.jobsProcessed.inc({ status: "failed" });
            jobLog.error("job dead-lettered", { attempts: outcome.attempts, error: err });
            await setStatus(job.book_id, "failed", `gave up after ${outcome.attempts} attempts: ${message(err)}`);
          }
        }
      } catch (queueErr) {
        // The lease will expire and the reaper will count the attempt.
        jobLog.error("could not record the job's outcome", { error: queueErr, outcome_of: err });
      }
      return "settled";
    }
  }

  /** Set when a job was handed back because our database was down: claims pause, with back-off. */
  let databaseDown = false;

  function start(claim: ClaimedJob) {
    const controller = new AbortController();
    const done = handle(claim, controller);
    current.set(claim.job.job_id, { claim, controller, done });
    void done.then((handled) => {
      current.delete(claim.job.job_id);
      if (handled === "database_unavailable") databaseDown = true;
      wake?.();
    });
  }

  async function loop(): Promise<void> {
    let delay = minPoll;
    let nextReap = 0;
    log.info("worker started", { queue: queue.keys.queue, kv: deps.kv.driver, concurrency });
    while (!stopping) {
      if (current.size >= concurrency) {
        // Every slot is busy: a job that ends wakes the loop.
        await idle(maxPoll);
        continue;
      }
      let claimed = false;
      if (!databaseDown) {
        try {
          if (Date.now() >= nextReap) {
            nextReap = Date.now() + reapInterval;
            // After a busy step, this worker's own leases are renewed before it judges anyone's.
            await leases.renewAll();
            await afterReap(await queue.reap());
          }
          const claim = await queue.claim((entry) => {
            metrics.processing.jobsDeadLettered.inc();
            log.error("queue entry is not a job record; dead-lettered", { entry: entry.raw.slice(0, 200) });
          });
          metrics.processing.queueDepth.set(await queue.depth());
          if (claim) {
            claimed = true;
            start(claim);
          }
        } catch (err) {
          log.error("job queue unavailable; polling again after a pause", { error: err, retry_in_ms: delay });
        }
      }
      if (claimed) {
        delay = minPoll;
        continue;
      }
      databaseDown = false;
      await idle(delay);
      // A poll interval rather than a retry: an empty queue is no failure, and the loop polls on
      // forever. So it takes only the back-off's doubling (common/retry.ts), not its bounds.
      delay = nextDelay(delay, maxPoll);
    }
    await Promise.allSettled([...current.values()].map((job) => job.done));
    await leases.close();
    log.info("worker stopped", { jobs_handled: jobsHandled });
  }

  const stopped = loop();
  return {
    id,
    stopped,
    state: () => ({ id, running: !stopping, jobId: current.keys().next().value ?? null, jobIds: [...current.keys()], jobsHandled }),
    async stop() {
      stopping = true;
      wake?.();
      const jobs = [...current.values()];
      if (jobs.length > 0) {
        const grace = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
        let timer: ReturnType<typeof setTimeout> | undefined;
        const allDone = Promise.allSettled(jobs.map((job) => job.done)).then(() => true);
        const finished = await Promise.race([allDone, new Promise<boolean>((r) => (timer = setTimeout(() => r(false), grace)))]);
        clearTimeout(timer);
        if (!finished) for (const job of current.values()) job.controller.abort(new StopRequested());
      }
      await stopped;
    },
  };
}
