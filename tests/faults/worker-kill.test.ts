import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chunkTextToArray } from "../../common/chunking.ts";
import { createDatabase } from "../../common/db/create.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { getBook } from "../../common/db/books.ts";
import { getIngestion } from "../../common/db/ingestions.ts";
import { listCharacters } from "../../common/db/characters.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { enqueueJob, queueKeys } from "../../common/queue.ts";
import { createEmbeddedTextIndex } from "../../common/text-index/embedded.ts";
import { createEmbeddedVectorIndex } from "../../common/vector/embedded.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";
import { REPO_ROOT } from "../support/process.ts";
import { seededRandom } from "../support/seeded-random.ts";
import { deleteKeysWithPrefix, keysWithPrefix, probeRedis, uniqueKeyPrefix } from "../support/redis.ts";
import { ENGLISH_BOOK, FIXTURES, TEST_PIPELINE_OPTIONS, USER_ID, eventually, startBookServer, startScriptedGateway, type BookServer, type ScriptedGateway } from "../fixtures/ingest/harness.ts";

/**
 * Worker processes killed with SIGKILL at random moments, over and over: while idle, while claiming,
 * in the middle of any phase of a book, while writing the indexes, after finishing but before saying
 * so. Every book must still end `completed` exactly once: one set of characters, one copy of every
 * chunk in both indexes, nothing left on the queue, in flight, dead-lettered or leased.
 *
 * The seed is printed. A first run without kills measures how long a worker takes over two books;
 * every later run enqueues two books, kills one or two workers each at a random moment within that
 * time, then lets a last worker finish. Seeds that once failed are kept as cases; each run of the
 * suite also tries a new one (FAULTS_SEED picks it, to replay a printed seed).
 *
 * Robust to a loaded machine rather than fast: nothing waits a fixed time except the kill moments
 * (drawn within the measured window, which a slow machine widens); every wait is on a condition,
 * with a deadline scaled to that window, and the leases are long enough that a worker starved for
 * a second or two keeps its job.
 */

const RUNS = 6;
const BOOKS_PER_RUN = 2;
const KILLS_PER_RUN = 2;
/**
 * Seeds that failed before, kept as cases. 354564323: a worker completed a book and was killed
 * before it closed the job; the reaper recorded "attempt 1 of 5 stopped: the worker went away" on
 * the completed book.
 */
const KEPT_SEEDS = [354564323];
const SEEDS = [...KEPT_SEEDS, Number(process.env.FAULTS_SEED ?? Date.now() % 2 ** 31)];
/** A worker process's start (Bun, the database's migrations) on a busy machine. */
const WORKER_READY_MS = 60_000;
/** Each seed's whole test: seven runs on a loaded machine, the deadlines below failing first. */
const TEST_TIMEOUT_MS = 1_200_000;
/** Waits for a run's books: generous, and at least this many times the measured window. */
const MIN_WAIT_MS = 120_000;
const WAIT_WINDOWS = 20;

const [redis, postgres] = await Promise.all([probeRedis(), probePostgres()]);
const skip = !redis.reachable
  ? `a killed worker's queue must outlive it, which needs Redis: ${redis.reason}`
  : !postgres.reachable
    ? `worker processes need a shared database: ${postgres.reason}`
    : undefined;
if (skip) console.warn(`faults-worker-kill: skipped: ${skip}`);

describe.skipIf(skip !== undefined)("workers killed with SIGKILL at random points", () => {
  let testDb: TestDatabase;
  let db: Database;
  let kv: KeyValueStore;
  let books: BookServer;
  let gateway: ScriptedGateway;
  let dataDir: string;
  const prefix = uniqueKeyPrefix("faults-kill");
  const keys = queueKeys(`${prefix}processing_queue`);

  beforeAll(async () => {
    if (!redis.reachable || !postgres.reachable) return;
    testDb = await createTestDatabase(postgres.url);
    db = await createDatabase({ driver: "postgres", url: testDb.url });
    await migrate(db);
    kv = createRedisKeyValueStore({ url: redis.url });
    books = startBookServer();
    gateway = startScriptedGateway();
    // A little latency per model call spreads a book over a couple of seconds, so kills land in every phase.
    gateway.override.extract = async () => void (await Bun.sleep(40));
    gateway.override.persona = async () => void (await Bun.sleep(40));
    dataDir = await mkdtemp(join(tmpdir(), "faults-kill-"));
  }, 60_000);

  afterAll(async () => {
    gateway?.stop();
    books?.stop();
    await kv?.close();
    await db?.close();
    await testDb?.drop();
    await deleteKeysWithPrefix(prefix);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  function startChild() {
    const child = Bun.spawn([process.execPath, join(REPO_ROOT, "tests/support/crash-worker.ts")], {
      cwd: REPO_ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        // Every worker of the test shares one data folder, as pods share their indexes' servers.
        DATA_DIR: dataDir,
        DATABASE_URL: testDb.url,
        REDIS_URL: redis.url,
        LLM_GATEWAY_URL: gateway.baseURL,
        FILE_URL_ALLOWED_HOSTS: books.host,
        MAX_ATTEMPTS: "5",
        // Renewed every 1.3 s: a worker starved for a moment on a loaded machine keeps its job.
        FAULTS_VISIBILITY_SECONDS: "4",
        LOG_LEVEL: "error",
        FAULTS_QUEUE_PREFIX: prefix,
      },
      stdout: "pipe",
      stderr: "inherit",
    });
    const ready = (async () => {
      const reader = child.stdout.getReader();
      let seen = "";
      const deadline = setTimeout(() => child.kill("SIGKILL"), WORKER_READY_MS);
      try {
        while (!seen.includes("worker ready")) {
          const { done, value } = await reader.read();
          if (done) throw new Error(`the worker exited before it was ready (or was not ready within ${WORKER_READY_MS} ms)`);
          seen += new TextDecoder().decode(value);
        }
      } finally {
        clearTimeout(deadline);
      }
      reader.releaseLock();
    })();
    return { child, ready };
  }

  test.each(SEEDS)(`seed %d: ${RUNS} runs of ${BOOKS_PER_RUN} books with up to ${KILLS_PER_RUN} kills each: every book completes once, with no error left on it, and nothing is left behind`, async (seed) => {
    const next = seededRandom(seed);
    console.info(`faults-worker-kill: seed ${seed}`);
    const text = await readFile(join(FIXTURES, ENGLISH_BOOK), "utf8");
    const expectedChunks = chunkTextToArray(text, { chunkTokens: TEST_PIPELINE_OPTIONS.index!.chunkTokens! }).length;
    const bookIds: string[] = [];
    const killedWhile: Record<string, number> = {};
    let kills = 0;

    let window = 0;

    for (let run = 0; run <= RUNS; run++) {
      const ids: string[] = [];
      for (let b = 0; b < BOOKS_PER_RUN; b++) {
        const book = await insertBook(db, { title: `Killed ${run}.${b}` });
        ids.push(book.id);
        await enqueueJob(kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID }, { queue: keys.queue });
      }
      bookIds.push(...ids);
      const killsThisRun = run === 0 ? 0 : 1 + Math.floor(next() * KILLS_PER_RUN);
      for (let k = 0; k < killsThisRun; k++) {
        const { child, ready } = startChild();
        await ready;
        await Bun.sleep(Math.floor(next() * window));
        const statuses = await Promise.all(ids.map(async (id) => (await getBook(db, id))?.processingStatus ?? "missing"));
        const moment = statuses.includes("processing") ? "processing a book" : statuses.every((s) => s === "completed") ? "idle, all done" : "idle or claiming";
        killedWhile[moment] = (killedWhile[moment] ?? 0) + 1;
        child.kill("SIGKILL");
        await child.exited;
        kills++;
      }
      const { child, ready } = startChild();
      await ready;
      const started = performance.now();
      const waitMs = Math.max(MIN_WAIT_MS, WAIT_WINDOWS * window);
      try {
        await eventually(
          async () => (await Promise.all(ids.map((id) => getBook(db, id)))).every((b) => b?.processingStatus === "completed"),
          `run ${run}'s books to complete (seed ${seed})`,
          waitMs,
        );
        // The last worker stops cleanly once the queue has drained.
        await eventually(async () => (await kv.llen(keys.inFlight)) === 0 && (await kv.llen(keys.queue)) === 0, `run ${run}'s queue to drain (seed ${seed})`, waitMs);
      } finally {
        child.kill("SIGTERM");
        await child.exited;
      }
      if (run === 0) window = performance.now() - started;
    }
    console.info(
      `faults-worker-kill: ${kills} workers killed over ${RUNS} runs within ${Math.round(window)} ms of starting (${JSON.stringify(killedWhile)}), ${bookIds.length} books`,
    );

    const vectors = createEmbeddedVectorIndex({ dir: join(dataDir, "vectors") });
    const texts = createEmbeddedTextIndex({ dir: join(dataDir, "text") });
    try {
      const reference = (await listCharacters(db, bookIds[0]!)).map((c) => c.name).sort();
      expect(reference.length).toBeGreaterThan(2);
      for (const id of bookIds) {
        const book = await getBook(db, id);
        const error = (await getIngestion(db, id))?.lastError ?? null;
        expect({ id, status: book?.processingStatus, error }).toEqual({ id, status: "completed", error: null });
        const names = (await listCharacters(db, id)).map((c) => c.name).sort();
        expect(names).toEqual(reference);
        expect([await vectors.count(id), await texts.count(id)]).toEqual([expectedChunks, expectedChunks]);
      }
    } finally {
      await vectors.close?.();
      await texts.close?.();
    }
    const [{ n }] = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM characters WHERE book_id IN (SELECT jsonb_array_elements_text($1::jsonb)::uuid)", [
      bookIds,
    ])) as [{ n: number }];
    expect(n).toBe(bookIds.length * (await listCharacters(db, bookIds[0]!)).length);
    expect([await kv.llen(keys.queue), await kv.llen(keys.inFlight), await kv.llen(keys.deadLetter)]).toEqual([0, 0, 0]);
    expect(await keysWithPrefix(prefix, redis.url)).toEqual([]);
  }, TEST_TIMEOUT_MS);
});
