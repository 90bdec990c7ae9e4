/**
 * Many workers, one queue, no loss. WORKERS `bun run worker` processes (ingest/worker.ts, the image's
 * command, with its production lease and reaper) share processing_queue on a Redis of our own and a
 * throwaway PostgreSQL database; BOOKS books of mixed sizes (cut from the Project Gutenberg texts in
 * ../shared/books, or the sample story repeated) are queued at once, on the embedded defaults that
 * need no service: the offline provider, the native NLP engine, embedded indexes. Meanwhile a worker
 * is killed every KILL_EVERY seconds, with SIGKILL or SIGTERM at random, and started again, and the
 * Redis is killed and restarted once (it keeps an append-only file synced on every write, as
 * Upstash persists every write). Then it checks, and exits non-zero if anything does not hold:
 *
 *   - every book `completed`, its ingestion recorded with its one job;
 *   - no book ingested to its end twice (the workers' `book ingested` log lines, one per run to completion);
 *   - the queue, the in-flight and the dead-letter lists empty, no lease left.
 *
 * Before that, one worker alone ingests BOOKS / WORKERS books of the same mix without faults: the
 * throughput against which the many workers' scaling efficiency is given.
 *
 *   bun bench/soak.ts [--books 200] [--workers 8] [--kill-every 6] [--seed N]
 *   bun bench/soak.ts --books 24 --workers 3      # a small run
 *
 * On a shared machine run it as `nice -n 10 bun bench/soak.ts`: the workers inherit the niceness.
 *
 * Loopback only. Needs PostgreSQL (DATABASE_URL_TEST or the test defaults) and redis-server.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createDatabase } from "../common/db/create.ts";
import { migrate } from "../common/db/migrate.ts";
import { insertBook } from "../common/db/frontend-rows.ts";
import { createRedisKeyValueStore } from "../common/kv/redis.ts";
import { enqueueJob, queueKeys } from "../common/queue.ts";
import { createTestDatabase, probePostgres } from "../tests/support/postgres.ts";
import { startPrivateRedis, unavailableRedisServer, type PrivateRedis } from "../tests/support/private-servers.ts";
import { freePort, REPO_ROOT } from "../tests/support/process.ts";
import { seededRandom } from "../tests/support/seeded-random.ts";
import { answerHelp, machineHeader, markdownTable, runCleanups, SHARED_BOOKS_DIR } from "./support.ts";

answerHelp(`
usage: bun bench/soak.ts [--books 200] [--workers 8] [--kill-every 6] [--seed N]

WORKERS worker processes on one queue ingest BOOKS books of mixed sizes while workers are killed
(SIGKILL or SIGTERM) and restarted and the Redis is restarted once; every book must complete exactly
once and the queue end empty. A single worker's run on BOOKS / WORKERS books gives the scaling
efficiency. Needs PostgreSQL (127.0.0.1:5432) and redis-server; see BENCHMARKS.md.`);

const { values: args } = parseArgs({
  options: {
    books: { type: "string", default: "200" },
    workers: { type: "string", default: "8" },
    "kill-every": { type: "string", default: "6" },
    seed: { type: "string" },
  },
});

/** Book sizes in bytes, used in turn: short stories to a long novel's first half. */
const SIZES = [20_000, 60_000, 150_000, 400_000, 800_000];
const SAMPLE_STORY = join(REPO_ROOT, "ingest", "sample", "the-mending-room.txt");
const USER_ID = "10ca1000-0000-4000-8000-000000000001";
/** A worker process's start: Bun, the database's migrations, on a busy machine. */
const WORKER_READY_MS = 60_000;
/** The killing stops once this share of the books is done, so the run ends on a settled queue rather than on the last kill's lease. */
const CHAOS_UNTIL = 0.9;
/** The Redis restarts once this share of the books is done. */
const REDIS_RESTART_AT = 0.4;
/** Longest wait for the books after the last fault: a killed worker's job returns within its lease (60 s) plus the reaper's pace. */
const SETTLE_MS = 240_000;

process.exit(await main());

function log(message: string) {
  process.stderr.write(`soak: ${message}\n`);
}

function fail(message: string): number {
  console.error(`soak: ${message}`);
  return 1;
}

/** The texts books are cut from: the Gutenberg books when present, else the sample story. */
function sourceTexts(): string[] {
  const dir = SHARED_BOOKS_DIR;
  if (existsSync(dir)) {
    const files = ["pg2600_war_and_peace.txt", "pg1342_pride_and_prejudice.txt", "pg1661_adventures_of_sherlock_holmes.txt", "pg11_alices_adventures_in_wonderland.txt"];
    const found = files.map((f) => join(dir, f)).filter(existsSync);
    if (found.length > 0) return found.map((f) => readFileSync(f, "utf8"));
  }
  return [readFileSync(SAMPLE_STORY, "utf8")];
}

/** The i-th book: SIZES[i mod 5] bytes of a source text, repeated when it is shorter, cut at a paragraph's end. */
function bookText(texts: string[], i: number): string {
  const size = SIZES[i % SIZES.length]!;
  let text = texts[i % texts.length]!;
  while (text.length < size) text += `\n\n${text}`;
  const cut = text.lastIndexOf("\n\n", size);
  return text.slice(0, cut > size / 2 ? cut : size);
}

interface Slot {
  index: number;
  proc?: ReturnType<typeof Bun.spawn>;
  starts: number;
}

async function main(): Promise<number> {
  const bookCount = Number(args.books);
  const workerCount = Number(args.workers);
  const killEveryMs = Number(args["kill-every"]) * 1000;
  const seed = Number(args.seed ?? Date.now() % 2 ** 31);
  const random = seededRandom(seed);
  if (!(bookCount >= workerCount && workerCount >= 1)) return fail("--books must be at least --workers, and --workers at least 1");

  const postgres = await probePostgres();
  if (!postgres.reachable) return fail(`PostgreSQL is needed: ${postgres.reason}`);
  const redisMissing = unavailableRedisServer();
  if (redisMissing) return fail(redisMissing);

  const cleanups: (() => unknown)[] = [];
  const problems: string[] = [];
  try {
    const testDb = await createTestDatabase(postgres.url);
    cleanups.push(() => testDb.drop());
    const db = await createDatabase({ driver: "postgres", url: testDb.url });
    cleanups.push(() => db.close());
    await migrate(db);
    const redis = await startPrivateRedis();
    cleanups.push(() => redis.stop());
    const kv = createRedisKeyValueStore({ url: redis.url });
    cleanups.push(() => kv.close());
    const work = await mkdtemp(join(tmpdir(), "soak-"));
    cleanups.push(() => rm(work, { recursive: true, force: true }));

    const texts = sourceTexts();
    const served = new Map<string, string>();
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (request) => {
        const text = served.get(new URL(request.url).pathname.slice(1));
        return text === undefined ? new Response("not found", { status: 404 }) : new Response(text, { headers: { "content-type": "text/plain; charset=utf-8" } });
      },
    });
    cleanups.push(() => server.stop(true));
    const host = `127.0.0.1:${server.port}`;
    const env = { DATABASE_URL: testDb.url, REDIS_URL: redis.url, FILE_URL_ALLOWED_HOSTS: host, LOG_FORMAT: "json", LOG_LEVEL: "info" };

    log(`seed ${seed}; ${bookCount} books, ${workerCount} workers, a kill every ${killEveryMs / 1000} s; ${cpus().length} cores, load ${loadavg()[0]!.toFixed(1)}`);

    /** Queues books [from, to) of the mix; returns their ids and job ids. */
    async function queueBooks(from: number, to: number, label: string) {
      const books: { id: string; jobId: string; bytes: number }[] = [];
      for (let i = from; i < to; i++) {
        const text = bookText(texts, i);
        const book = await insertBook(db, { title: `${label} ${i}` });
        served.set(`${book.id}.txt`, text);
        books.push({ id: book.id, jobId: "", bytes: Buffer.byteLength(text) });
      }
      for (const book of books) book.jobId = (await enqueueJob(kv, { book_id: book.id, file_url: `http://${host}/${book.id}.txt`, user_id: USER_ID })).job.job_id;
      return books;
    }

    /** Books completed, and books settled (completed or failed: a failed book ends the wait too, and fails the checks). */
    const counts = async (ids: string[]) =>
      (
        await db.query<{ completed: number; settled: number }>(
          "SELECT count(*) FILTER (WHERE processing_status = 'completed')::int AS completed, count(*) FILTER (WHERE processing_status IN ('completed', 'failed'))::int AS settled FROM books WHERE id = ANY($1::uuid[])",
          [ids],
        )
      )[0]!;

    async function startWorker(slot: Slot): Promise<void> {
      const port = await freePort();
      const dataDir = join(work, `worker-${slot.index}`);
      await mkdir(dataDir, { recursive: true });
      slot.starts++;
      const proc = Bun.spawn([process.execPath, "ingest/worker.ts"], {
        cwd: REPO_ROOT,
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATA_DIR: dataDir, HOST: "127.0.0.1", METRICS_PORT: String(port), ...env },
        // One log file per process start: the `book ingested` lines are counted from them at the end.
        stdout: Bun.file(join(work, `worker-${slot.index}-${slot.starts}.log`)),
        stderr: "ignore",
      });
      slot.proc = proc;
      spawned.add(proc);
      const deadline = Date.now() + WORKER_READY_MS;
      while (Date.now() < deadline) {
        if (proc.exitCode !== null) throw new Error(`worker ${slot.index} exited with ${proc.exitCode} before it was ready`);
        try {
          if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) return;
        } catch {
          // not listening yet
        }
        await Bun.sleep(200);
      }
      throw new Error(`worker ${slot.index} was not ready within ${WORKER_READY_MS} ms`);
    }

    const slots: Slot[] = [];
    /** Every worker process started: one whose slot was restarted again before it was ready is no longer its slot's, and must not outlive the run. */
    const spawned = new Set<ReturnType<typeof Bun.spawn>>();
    /** Set while the workers are being stopped on purpose: a killed worker is restarted only otherwise. */
    let stopping = false;
    const stopAll = async () => {
      stopping = true;
      await Promise.all(
        slots.map(async (slot) => {
          slot.proc?.kill("SIGTERM");
          await slot.proc?.exited;
          slot.proc = undefined;
        }),
      );
      stopping = false;
    };
    cleanups.push(async () => {
      for (const proc of spawned) proc.kill("SIGKILL");
    });

    async function waitForBooks(ids: string[], timeoutMs: number, onProgress?: (done: number) => Promise<void>): Promise<number> {
      const started = performance.now();
      while (performance.now() - started < timeoutMs) {
        const { completed, settled } = await counts(ids);
        await onProgress?.(completed);
        if (settled === ids.length) return (performance.now() - started) / 1000;
        await Bun.sleep(500);
      }
      return Number.NaN;
    }

    // 1. One worker alone, no faults: the baseline --------------------------------------------------
    const baselineCount = Math.max(SIZES.length, Math.round(bookCount / workerCount));
    slots.push({ index: 0, starts: 0 });
    await startWorker(slots[0]!);
    log(`baseline: 1 worker, ${baselineCount} books`);
    const baselineBooks = await queueBooks(0, baselineCount, "Baseline");
    const baselineSeconds = await waitForBooks(baselineBooks.map((b) => b.id), SETTLE_MS * 4);
    const baselineDone = (await counts(baselineBooks.map((b) => b.id))).completed;
    if (Number.isNaN(baselineSeconds) || baselineDone < baselineBooks.length) return fail(`the baseline's books did not all complete: ${baselineDone} of ${baselineBooks.length}`);
    await stopAll();
    slots.length = 0;

    // 2. Many workers, faults ----------------------------------------------------------------------
    for (let i = 0; i < workerCount; i++) slots.push({ index: i, starts: 0 });
    await Promise.all(slots.map((slot) => startWorker(slot)));
    log(`${workerCount} workers ready; queueing ${bookCount} books`);
    const books = await queueBooks(0, bookCount, "Soak");
    const ids = books.map((b) => b.id);
    const faults = { sigkill: 0, sigterm: 0, redisRestarts: 0 };
    let chaos = true;
    let redisRestarted = false;

    const restartRedis = async (r: PrivateRedis) => {
      redisRestarted = true;
      log("restarting Redis");
      await r.restart();
      faults.redisRestarts++;
    };
    const chaosLoop = (async () => {
      while (chaos) {
        await Bun.sleep(killEveryMs * (0.5 + random()));
        if (!chaos) break;
        const live = slots.filter((s) => s.proc && s.proc.exitCode === null);
        if (live.length === 0) continue;
        const slot = live[Math.floor(random() * live.length)]!;
        const signal = random() < 0.5 ? "SIGKILL" : "SIGTERM";
        if (signal === "SIGKILL") faults.sigkill++;
        else faults.sigterm++;
        const proc = slot.proc!;
        proc.kill(signal);
        // Restarted as soon as it has gone, as a Deployment replaces a pod; the loop does not wait for a SIGTERM's drain.
        void proc.exited.then(() => (!stopping && slot.proc === proc ? startWorker(slot) : undefined)).catch((err) => problems.push(`restart of worker ${slot.index}: ${err}`));
      }
    })();

    const soakSeconds = await waitForBooks(ids, SETTLE_MS * 4, async (done) => {
      if (!redisRestarted && done >= bookCount * REDIS_RESTART_AT) await restartRedis(redis);
      if (chaos && done >= bookCount * CHAOS_UNTIL) {
        chaos = false;
        log(`${done} of ${bookCount} done: no more faults`);
      }
    });
    chaos = false;
    await chaosLoop;
    if (Number.isNaN(soakSeconds)) problems.push(`books still not completed after ${(SETTLE_MS * 4) / 1000} s: ${bookCount - (await counts(ids)).settled} left`);

    // The queue settles: the last job closed, the in-flight list emptied.
    const keys = queueKeys();
    const lengths = async () => [await kv.llen(keys.queue), await kv.llen(keys.inFlight), await kv.llen(keys.deadLetter)];
    const settleDeadline = Date.now() + SETTLE_MS;
    while (Date.now() < settleDeadline && (await lengths()).some((n) => n > 0)) await Bun.sleep(500);
    await stopAll();

    // Checks ------------------------------------------------------------------------------------
    const rows = await db.query<{ id: string; processing_status: string; completed_job_id: string | null; last_error: string | null }>(
      `SELECT b.id, b.processing_status, i.completed_job_id, i.last_error
         FROM books b LEFT JOIN book_ingestions i ON i.book_id = b.id WHERE b.id = ANY($1::uuid[])`,
      [ids],
    );
    const jobOf = new Map(books.map((b) => [b.id, b.jobId]));
    const notCompleted = rows.filter((r) => r.processing_status !== "completed");
    if (notCompleted.length > 0) problems.push(`${notCompleted.length} books not completed, e.g. ${JSON.stringify(notCompleted[0])}`);
    const wrongJob = rows.filter((r) => r.completed_job_id !== jobOf.get(r.id));
    if (wrongJob.length > 0) problems.push(`${wrongJob.length} books whose ingestion is not recorded with their job, e.g. ${JSON.stringify(wrongJob[0])}`);
    const withError = rows.filter((r) => r.last_error !== null).length;

    const runsToCompletion = new Map<string, number>();
    for (const slot of slots) {
      for (let start = 1; start <= slot.starts; start++) {
        const text = await readFile(join(work, `worker-${slot.index}-${start}.log`), "utf8").catch(() => "");
        for (const line of text.split("\n")) {
          if (!line.includes('"book ingested"')) continue;
          const bookId = (JSON.parse(line) as { book_id?: string }).book_id;
          if (bookId && jobOf.has(bookId)) runsToCompletion.set(bookId, (runsToCompletion.get(bookId) ?? 0) + 1);
        }
      }
    }
    const twice = [...runsToCompletion].filter(([, n]) => n > 1);
    if (twice.length > 0) problems.push(`${twice.length} books ingested to the end more than once, e.g. ${twice[0]![0]} ${twice[0]![1]} times`);
    // A worker killed between recording the book and logging it leaves no line: completed, once, silently.
    const unlogged = ids.filter((id) => !runsToCompletion.has(id)).length;

    const [queued, inFlight, deadLettered] = await lengths();
    if (queued! + inFlight! + deadLettered! > 0) problems.push(`queue, in-flight, dead-letter lengths ${queued}, ${inFlight}, ${deadLettered}`);
    const leases = redis.cli("--scan", "--pattern", `${keys.leasePrefix}*`);
    if (leases !== "") problems.push(`leases left: ${leases.split("\n").length}`);

    // Report ------------------------------------------------------------------------------------
    const megabytes = (list: { bytes: number }[]) => list.reduce((n, b) => n + b.bytes, 0) / 1e6;
    const baselineRate = baselineBooks.length / baselineSeconds;
    const soakRate = bookCount / soakSeconds;
    const restarts = slots.reduce((n, s) => n + s.starts - 1, 0);
    const lines = [
      `## Soak: ${workerCount} workers on one queue, ${bookCount} books, workers killed and restarted, Redis restarted once`,
      "",
      `${machineHeader()} · seed ${seed} · workers run under nice 10`,
      "",
      `Books of ${SIZES.map((s) => `${s / 1000} kB`).join(", ")} in turn, cut from ${texts.length > 1 ? "the Project Gutenberg texts" : "the sample story"}; offline provider, native NLP, embedded indexes, PostgreSQL, Redis with an append-only file.`,
      "",
      markdownTable(
        ["run", "workers", "books", "MB", "s to all completed", "books/s", "books/h per worker", "scaling efficiency", "SIGKILL", "SIGTERM", "worker restarts", "Redis restarts"],
        [
          ["one worker, no faults", 1, baselineBooks.length, megabytes(baselineBooks).toFixed(1), baselineSeconds.toFixed(1), baselineRate.toFixed(2), (baselineRate * 3600).toFixed(0), "1.00", 0, 0, 0, 0],
          [
            "many workers, faults",
            workerCount,
            bookCount,
            megabytes(books).toFixed(1),
            soakSeconds.toFixed(1),
            soakRate.toFixed(2),
            ((soakRate * 3600) / workerCount).toFixed(0),
            (soakRate / (workerCount * baselineRate)).toFixed(2),
            faults.sigkill,
            faults.sigterm,
            restarts,
            faults.redisRestarts,
          ],
        ],
      ),
      "",
      `Books completed ${rows.length - notCompleted.length}/${bookCount}, each recorded with its own job; ingested to the end twice: ${twice.length}; completed by a worker killed before it logged so: ${unlogged}; an attempt's error left on a completed book: ${withError}. Queue, in-flight, dead-letter lengths at the end: ${queued}, ${inFlight}, ${deadLettered}; leases left: ${leases === "" ? 0 : leases.split("\n").length}.`,
      "",
      problems.length === 0 ? "All checks held: every book completed exactly once, no job lost or dead-lettered, the queue empty." : `FAILED:\n${problems.map((p) => `- ${p}`).join("\n")}`,
    ];
    console.log(lines.join("\n"));
    return problems.length === 0 ? 0 : 1;
  } catch (err) {
    return fail(err instanceof Error ? (err.stack ?? err.message) : String(err));
  } finally {
    await runCleanups(cleanups);
  }
}
