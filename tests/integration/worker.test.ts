import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getBook } from "../../common/db/books.ts";
import { getIngestion } from "../../common/db/ingestions.ts";
import { listCharacters } from "../../common/db/characters.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { createReliableQueue, enqueueJob, queueKeys } from "../../common/queue.ts";
import { runPipeline } from "../../ingest/pipeline.ts";
import { startWorker } from "../../ingest/jobs/queue-consumer.ts";
import { metricValue } from "../support/app.ts";
import { openIngestSuite } from "../support/ingest-suite.ts";
import { freePort, REPO_ROOT } from "../support/process.ts";
import { openLiveStores } from "../support/live-stores.ts";
import { probePostgres } from "../support/postgres.ts";
import { probeRedis } from "../support/redis.ts";
import {
  ENGLISH_BOOK,
  FIXTURES,
  TEST_PIPELINE_OPTIONS,
  USER_ID,
  createIngestEnv,
  eventually,
  hangExtraction,
  startScriptedGateway,
} from "../fixtures/ingest/harness.ts";

// Whole books go through the pipeline, and worker processes start an embedded Postgres.
setDefaultTimeout(60_000);

const { books, db, setup } = await openIngestSuite();

const FAST = { minPollMs: 10, maxPollMs: 50, pipeline: TEST_PIPELINE_OPTIONS };

describe("worker in process", () => {
  test("a worker told to stop mid-job hands the job back untouched, and the next worker completes it", async () => {
    const kv = createMemoryKeyValueStore();
    const { gateway, env } = await setup({ kv });
    const extracting = hangExtraction(gateway);
    const book = await insertBook(db, { title: "The Keeper's Ledger" });
    await enqueueJob(kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID });
    const first = startWorker(env.deps, { ...FAST, shutdownGraceMs: 50 });
    await extracting;
    expect(first.state().jobId).not.toBeNull();
    await first.stop();

    const queue = createReliableQueue(kv, { maxAttempts: 3 });
    expect(await kv.llen(queue.keys.inFlight)).toBe(0);
    const [queued] = await kv.lrange(queue.keys.queue, 0, -1);
    expect(JSON.parse(queued!).attempts).toBeUndefined();
    expect((await getBook(db, book.id))?.processingStatus).toBe("pending");

    gateway.override.extract = undefined;
    const second = startWorker(env.deps, FAST);
    await eventually(async () => (await getBook(db, book.id))?.processingStatus === "completed", "the second worker to finish");
    await second.stop();
    expect((await listCharacters(db, book.id)).length).toBeGreaterThan(2);
    const metrics = await env.deps.metrics.registry.metrics();
    expect(metricValue(metrics, 'processing_jobs_processed_total{status="completed"}')).toBe(1);
    expect(metricValue(metrics, "processing_jobs_retried_total")).toBe(0);
  });

  test("a job that keeps failing for a passing reason is retried, then dead-lettered after MAX_ATTEMPTS and its book marked failed", async () => {
    const { gateway, env } = await setup({ env: { MAX_ATTEMPTS: "2" } });
    gateway.override.extract = () => ({ status: 503, message: "model overloaded" });
    const book = await insertBook(db, { title: "A book nobody can profile today" });
    const { job } = await enqueueJob(env.deps.kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID });
    const worker = startWorker(env.deps, FAST);
    await eventually(async () => (await getBook(db, book.id))?.processingStatus === "failed", "the book to fail");
    await worker.stop();

    expect((await getIngestion(db, book.id))?.lastError).toBe("gave up after 2 attempts: the extract pass failed for every character");
    const queue = createReliableQueue(env.deps.kv, { maxAttempts: 2 });
    const [dead] = await queue.deadLetters();
    expect(dead?.job).toMatchObject({ job_id: job.job_id, attempts: 2 });
    expect(await queue.depth()).toBe(0);
    const metrics = await env.deps.metrics.registry.metrics();
    expect(metricValue(metrics, "processing_jobs_retried_total")).toBe(1);
    expect(metricValue(metrics, "processing_jobs_dead_lettered_total")).toBe(1);
    // Given up on: failed exactly once, however many attempts it took.
    expect(metricValue(metrics, 'processing_jobs_processed_total{status="failed"}')).toBe(1);
    expect(metricValue(metrics, 'processing_jobs_processed_total{status="completed"}')).toBe(0);
  });

  test("a worker that dies after completing a book but before closing its job leaves no stale error: the book stays completed with last_error empty", async () => {
    const kv = createMemoryKeyValueStore();
    const { gateway, env } = await setup({ kv });
    const book = await insertBook(db, { title: "The Keeper's Ledger, finished just before the crash" });
    await enqueueJob(kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID });
    // The first worker claims the job and completes the book, then is gone before it closes the job.
    const queue = createReliableQueue(kv, { maxAttempts: env.deps.config.maxAttempts, visibilityTimeoutSeconds: 1, claimGraceMs: 0 });
    const claim = (await queue.claim())!;
    await runPipeline(env.deps, { bookId: book.id, jobId: claim.job.job_id, source: { url: claim.job.file_url } }, TEST_PIPELINE_OPTIONS);
    const profileCalls = gateway.extractions().length;

    // The next worker's reaper finds the lease expired and hands the job back; the worker then closes it.
    const rescuer = startWorker(env.deps, { ...FAST, visibilityTimeoutSeconds: 1, claimGraceMs: 0, reapIntervalMs: 50 });
    await eventually(async () => rescuer.state().jobsHandled === 1, "the returned job to be closed");
    await rescuer.stop();

    expect(gateway.extractions()).toHaveLength(profileCalls);
    expect((await getBook(db, book.id))?.processingStatus).toBe("completed");
    expect((await getIngestion(db, book.id))?.lastError).toBeNull();
    expect([await kv.llen("processing_queue"), await kv.llen(queue.keys.inFlight)]).toEqual([0, 0]);
  });

  test("two workers on one queue process each book exactly once", async () => {
    const kv = createMemoryKeyValueStore();
    const { gateway, env } = await setup({ kv });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const book = await insertBook(db, { title: `Shared queue ${i}` });
      ids.push(book.id);
      await enqueueJob(kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID });
    }
    const workers = [startWorker(env.deps, FAST), startWorker(env.deps, FAST)];
    await eventually(async () => workers.reduce((n, w) => n + w.state().jobsHandled, 0) === 3, "three jobs to be handled");
    await Promise.all(workers.map((w) => w.stop()));
    for (const id of ids) expect((await getBook(db, id))?.processingStatus).toBe("completed");
    expect(gateway.personas().filter((p) => p.name === "Clara")).toHaveLength(3);
    const metrics = await env.deps.metrics.registry.metrics();
    expect(metricValue(metrics, 'processing_jobs_processed_total{status="completed"}')).toBe(3);
  });
});

describe("bun run worker", () => {
  test("serves /metrics and /health on METRICS_PORT and exits cleanly on SIGTERM", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "worker-alone-"));
    const port = await freePort();
    const proc = Bun.spawn([process.execPath, "ingest/worker.ts"], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATA_DIR: dataDir, METRICS_PORT: String(port), LLM_GATEWAY_URL: "http://127.0.0.1:9/v1" },
      stdout: "pipe",
      stderr: "ignore",
    });
    const logs = new Response(proc.stdout).text();
    try {
      const metrics = await eventually(async () => {
        try {
          const res = await fetch(`http://127.0.0.1:${port}/metrics`);
          return res.ok ? res.text() : undefined;
        } catch {
          return undefined;
        }
      }, "the worker's metrics endpoint");
      expect(metrics).toContain("# TYPE processing_active_workers gauge");
      expect(metricValue(metrics, "processing_queue_depth")).toBe(0);
      const health = await fetch(`http://127.0.0.1:${port}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: "ok", worker: { running: true, jobId: null } });
      proc.kill("SIGTERM");
      expect(await proc.exited).toBe(0);
      // Plain text on stdout by default: time, level, message, then the fields.
      expect(await logs).toMatch(/^\S+Z INFO  worker stopped worker=[0-9a-f]{8} jobs_handled=0$/m);
    } finally {
      proc.kill("SIGKILL");
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

const redis = await probeRedis();
const postgres = await probePostgres();
const crashSkip = !redis.reachable
  ? `the in-process store dies with the killed worker, so this needs Redis: ${redis.reason}`
  : !postgres.reachable
    ? `two worker processes need a shared database: ${postgres.reason}`
    : undefined;
if (crashSkip) console.warn(`worker: SIGKILL test skipped: ${crashSkip}`);

describe.skipIf(crashSkip !== undefined)("a worker killed mid-job", () => {
  test("leaves its job in flight until the lease expires, then another worker completes it", async () => {
    const live = await openLiveStores("worker", (postgres as { url: string }).url, redis.url);
    const { db: pg, kv, prefix } = live;
    const keys = queueKeys(`${prefix}processing_queue`);
    const gateway = startScriptedGateway();
    const extracting = hangExtraction(gateway);
    const childData = await mkdtemp(join(tmpdir(), "worker-child-"));
    const child = Bun.spawn([process.execPath, join(FIXTURES, "worker-process.ts")], {
      cwd: REPO_ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        DATA_DIR: childData,
        DATABASE_URL: live.dbUrl,
        REDIS_URL: redis.url,
        LLM_GATEWAY_URL: gateway.baseURL,
        FILE_URL_ALLOWED_HOSTS: books.host,
        LOG_LEVEL: "warn",
        TEST_QUEUE_PREFIX: prefix,
        TEST_VISIBILITY_SECONDS: "2",
      },
      stdout: "ignore",
      stderr: "inherit",
    });
    const env = await createIngestEnv({ gateway, books, db: pg, kv });
    try {
      const book = await insertBook(pg, { title: "The Keeper's Ledger" });
      await enqueueJob(kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID }, { queue: keys.queue });
      await extracting;
      child.kill("SIGKILL");
      await child.exited;

      expect(await kv.llen(keys.inFlight)).toBe(1);
      expect(await kv.llen(keys.queue)).toBe(0);
      expect((await getBook(pg, book.id))?.processingStatus).toBe("processing");

      gateway.override.extract = undefined;
      const rescuer = startWorker(env.deps, { ...FAST, keys, visibilityTimeoutSeconds: 2, claimGraceMs: 200, reapIntervalMs: 200 });
      await eventually(async () => (await getBook(pg, book.id))?.processingStatus === "completed", "the second worker to complete the book");
      await rescuer.stop();

      expect((await listCharacters(pg, book.id)).map((c) => c.name)).toEqual(expect.arrayContaining(["Clara", "Tobias Finch"]));
      expect([await kv.llen(keys.queue), await kv.llen(keys.inFlight), await kv.llen(keys.deadLetter)]).toEqual([0, 0, 0]);
      const metrics = await env.deps.metrics.registry.metrics();
      expect(metricValue(metrics, "processing_jobs_retried_total")).toBe(1);
      expect(metricValue(metrics, 'processing_jobs_processed_total{status="completed"}')).toBe(1);
    } finally {
      child.kill("SIGKILL");
      gateway.stop();
      await env.close();
      await live.close();
      await rm(childData, { recursive: true, force: true });
    }
  });
});
