import { loadConfigOrExit } from "../common/config.ts";
import { buildDeps } from "../common/deps.ts";
import { DatabaseError } from "../common/db/index.ts";
import { setProcessingStatus } from "../common/db/repositories.ts";
import type { KeyValueStore } from "../common/kv/index.ts";
import type { Logger } from "../common/log.ts";
import { createReliableQueue, type ClaimedJob, type QueueKeys, type ReapResult } from "../common/queue.ts";
import { BookRejectedError, runPipeline, type PipelineDeps, type PipelineOptions } from "./pipeline.ts";

/**
 * The ingest worker: takes one job at a time from processing_queue (see common/queue.ts for the
 * claim, lease and dead-letter protocol) and runs the pipeline on it.
 *
 * Polls with exponential back-off while the queue is empty or the store fails (blocking pops are not
 * available on every key-value adapter). Renews the job's lease while the pipeline runs. On stop()
 * (SIGTERM) it lets the current job finish within a grace period, then aborts it and hands it back
 * to the queue untouched.
 *
 * `bun run worker` runs it alone and serves the metric catalogue on METRICS_PORT; startWorker() also
 * runs inside another process (the API's, with `npm start`).
 */

export const DEFAULT_MIN_POLL_MS = 250;
export const DEFAULT_MAX_POLL_MS = 5_000;
export const DEFAULT_REAP_INTERVAL_MS = 15_000;
/** Kubernetes gives a pod 30 s between SIGTERM and SIGKILL; hand the job back well before. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 20_000;
/** Renewals per visibility timeout, so a late or failed renewal still leaves time for the next. */
const RENEWALS_PER_LEASE = 3;

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
  pipeline?: Omit<PipelineOptions, "signal">;
}

export interface WorkerState {
  id: string;
  running: boolean;
  /** The job being processed, if any. */
  jobId: string | null;
  jobsHandled: number;
}

export interface WorkerHandle {
  readonly id: string;
  state(): WorkerState;
  /** Finishes or hands back the current job, then ends the loop. */
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

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

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
  const minPoll = options.minPollMs ?? DEFAULT_MIN_POLL_MS;
  const maxPoll = options.maxPollMs ?? DEFAULT_MAX_POLL_MS;
  const reapInterval = options.reapIntervalMs ?? DEFAULT_REAP_INTERVAL_MS;

  let stopping = false;
  let jobsHandled = 0;
  let current: { claim: ClaimedJob; controller: AbortController; done: Promise<void> } | undefined;
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
      await setProcessingStatus(deps.db, bookId, status, reason);
    } catch (err) {
      log.error("could not update the book's status", { book_id: bookId, status, error: err });
    }
  };

  const afterReap = async ({ requeued, deadLettered }: ReapResult) => {
    for (const job of requeued) {
      metrics.processing.jobsProcessed.inc({ status: "retried" });
      log.warn("job returned to the queue after its lease expired", { job_id: job.job_id, book_id: job.book_id, attempts: job.attempts });
      await setStatus(job.book_id, "pending", `attempt ${job.attempts} of ${maxAttempts} stopped: the worker went away`);
    }
    for (const dead of deadLettered) {
      metrics.processing.jobsProcessed.inc({ status: "dead_lettered" });
      log.error("job dead-lettered", { job_id: dead.job?.job_id, book_id: dead.job?.book_id, reason: dead.reason });
      if (dead.job) await setStatus(dead.job.book_id, "failed", `gave up after ${dead.job.attempts} attempts: ${dead.reason}`);
    }
  };

  /** What became of a job: done with (completed, failed, retried, abandoned), or handed back because our database was down. */
  type Handled = "settled" | "database_unavailable";

  async function handle(claim: ClaimedJob, controller: AbortController): Promise<Handled> {
    const { job } = claim;
    const jobLog = log.child({ job_id: job.job_id, book_id: job.book_id, attempt: (job.attempts ?? 0) + 1 });
    const renewal = setInterval(
      () =>
        void queue.renew(claim).then(
          (held) => {
            if (!held && !controller.signal.aborted) controller.abort(new LeaseLost());
          },
          (err: unknown) => jobLog.warn("lease renewal failed; retrying at the next interval", { error: err }),
        ),
      (queue.visibilityTimeoutSeconds * 1000) / RENEWALS_PER_LEASE,
    );
    metrics.processing.activeWorkers.inc();
    jobLog.info("job started");
    try {
      await runPipeline(deps, { bookId: job.book_id, jobId: job.job_id, source: { url: job.file_url } }, { ...options.pipeline, signal: controller.signal });
      await queue.complete(claim);
      metrics.processing.jobsProcessed.inc({ status: "completed" });
      return "settled";
    } catch (err) {
      return await settleFailure(controller.signal, err);
    } finally {
      clearInterval(renewal);
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
          metrics.processing.jobsProcessed.inc({ status: outcome.status });
          if (outcome.status === "retried") {
            jobLog.warn("job attempt failed; queued again", { attempts: outcome.attempts, error: err });
            await setStatus(job.book_id, "pending", `attempt ${outcome.attempts} of ${maxAttempts} failed: ${message(err)}`);
          } else {
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

  async function loop(): Promise<void> {
    let delay = minPoll;
    let nextReap = 0;
    log.info("worker started", { queue: queue.keys.queue, kv: deps.kv.driver });
    while (!stopping) {
      try {
        if (Date.now() >= nextReap) {
          nextReap = Date.now() + reapInterval;
          await afterReap(await queue.reap());
        }
        const claim = await queue.claim((entry) => {
          metrics.processing.jobsProcessed.inc({ status: "dead_lettered" });
          log.error("queue entry is not a job record; dead-lettered", { entry: entry.raw.slice(0, 200) });
        });
        metrics.processing.queueDepth.set(await queue.depth());
        if (claim) {
          const controller = new AbortController();
          const done = handle(claim, controller);
          current = { claim, controller, done: done.then(() => {}) };
          const handled = await done;
          current = undefined;
          if (handled === "settled") {
            delay = minPoll;
            continue;
          }
        }
      } catch (err) {
        log.error("job queue unavailable; polling again after a pause", { error: err, retry_in_ms: delay });
      }
      await idle(delay);
      delay = Math.min(delay * 2, maxPoll);
    }
    log.info("worker stopped", { jobs_handled: jobsHandled });
  }

  const stopped = loop();
  return {
    id,
    stopped,
    state: () => ({ id, running: !stopping, jobId: current?.claim.job.job_id ?? null, jobsHandled }),
    async stop() {
      stopping = true;
      wake?.();
      const job = current;
      if (job) {
        const grace = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
        let timer: ReturnType<typeof setTimeout> | undefined;
        const finished = await Promise.race([job.done.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), grace)))]);
        clearTimeout(timer);
        if (!finished) job.controller.abort(new StopRequested());
      }
      await stopped;
    },
  };
}

/** The worker's own HTTP endpoint when it runs alone: /metrics for Prometheus, /health for probes. */
export function serveWorkerMetrics(deps: Pick<WorkerDeps, "metrics" | "logger">, worker: WorkerHandle, port: number) {
  const server = Bun.serve({
    port,
    hostname: "0.0.0.0",
    async fetch(request) {
      const { pathname } = new URL(request.url);
      if (request.method !== "GET") return new Response("method not allowed", { status: 405 });
      if (pathname === "/metrics") {
        return new Response(await deps.metrics.registry.metrics(), { headers: { "content-type": deps.metrics.registry.contentType } });
      }
      if (pathname === "/health") {
        const state = worker.state();
        return Response.json({ status: state.running ? "ok" : "stopping", worker: state }, { status: state.running ? 200 : 503 });
      }
      return new Response("not found", { status: 404 });
    },
  });
  deps.logger.info("worker metrics listening", { url: `http://localhost:${server.port}/metrics` });
  return server;
}

if (import.meta.main) {
  const config = loadConfigOrExit();
  const deps = await buildDeps(config);
  if (deps.kv.driver === "memory") {
    deps.logger.warn("the worker runs alone on the in-process key-value store: it cannot see jobs queued by the API; set REDIS_URL or UPSTASH_REDIS_REST_URL");
  }
  const worker = startWorker(deps);
  const server = serveWorkerMetrics(deps, worker, config.metricsPort);
  const shutdown = async (signal: string) => {
    deps.logger.info("shutting down", { signal });
    await worker.stop();
    await server.stop();
    await deps.close();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
}
