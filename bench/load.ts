/**
 * Load and soak: the API server process and two worker processes on real PostgreSQL (a throwaway
 * database) and a Redis of our own, against loopback LLM gateways in a child process. For a bounded
 * time, SESSIONS readers chat at once, each in its own session, each sending its next message as soon
 * as the previous reply ends (and now and then a second message at the same moment, which must get
 * 429); meanwhile BOOKS books are submitted at once through POST /character/processing and ingested
 * by the two workers. Then it checks what must hold and exits non-zero if anything does not:
 *
 *   - no error but the expected 429s (no HTTP error, no 502 event, no broken stream);
 *   - every session's message_count equals the `done` events its reader received, with two messages each;
 *   - no chat lock or fold key left once the API has settled;
 *   - every book completed, with one set of characters; the queue, in-flight and dead-letter lists empty, no lease left;
 *   - the API's memory flat after warm-up: the objects alive after a full collection (sampled every
 *     5 s), median of the last third of the samples within MAX_LIVE_OBJECT_GROWTH of the first third's.
 *
 *   bun bench/load.ts [--duration 60] [--sessions 200] [--books 10] [--warmup 15]
 *   bun bench/load.ts --short      # the CI run: 45 s of load
 *
 * Loopback only. Needs a reachable PostgreSQL (DATABASE_URL_TEST or the test defaults) and redis-server.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createDatabase } from "../common/db/create.ts";
import type { Database } from "../common/db/index.ts";
import { migrate } from "../common/db/migrate.ts";
import { getBook } from "../common/db/books.ts";
import { getIngestion } from "../common/db/ingestions.ts";
import { listCharacters } from "../common/db/characters.ts";
import { createSession, insertBook } from "../common/db/frontend-rows.ts";
import { createRedisKeyValueStore } from "../common/kv/redis.ts";
import { createMetrics } from "../common/metrics/index.ts";
import { queueKeys } from "../common/queue.ts";
import { createEmbeddedTextIndex } from "../common/text-index/embedded.ts";
import { createEmbeddedVectorIndex } from "../common/vector/embedded.ts";
import { ENGLISH_BOOK, startBookServer, startScriptedGateway } from "../tests/fixtures/ingest/harness.ts";
import { PASSAGES, createTestLanguageModel, scriptGateway, seedChatWorld } from "../tests/support/chat.ts";
import { startFakeLlmGateway } from "../tests/support/fake-llm-gateway.ts";
import { createTestDatabase, probePostgres } from "../tests/support/postgres.ts";
import { startPrivateRedis, unavailableRedisServer } from "../tests/support/private-servers.ts";
import { freePort, REPO_ROOT, startService, type ServiceProcess } from "../tests/support/process.ts";
import { answerHelp, machineHeader, markdownTable, memoryOf, percentile, runCleanups } from "./support.ts";

/**
 * Objects alive in the API after a full collection may grow this much from the end of warm-up to the
 * end of the run. The replies in flight at a sample move it by about 8%; a leak of a few objects per
 * turn passes this within a minute at 100 turns a second.
 */
const MAX_LIVE_OBJECT_GROWTH = 0.15;
const REPLY_TOKENS = 24;
const TOKEN_DELAY_MS = 8;
const EXTRA_CHUNKS = 300;
/** One message in this many is sent twice at once, to see the second refused with 429. */
const DOUBLE_SEND_EVERY = 10;
const SAMPLE_EVERY_MS = 5_000;

answerHelp(`
usage: bun bench/load.ts [--duration 60] [--sessions 200] [--books 10] [--warmup 15] [--short]

Load and soak: the API and two workers on a throwaway PostgreSQL database and a Redis of their own, SESSIONS
readers chatting at once while BOOKS books are submitted and ingested, for DURATION seconds after WARMUP.
--short is a quick run. Needs PostgreSQL (127.0.0.1:5432) and redis-server; see BENCHMARKS.md.`);

const { values: args } = parseArgs({
  options: {
    duration: { type: "string", default: "60" },
    sessions: { type: "string", default: "200" },
    books: { type: "string", default: "10" },
    warmup: { type: "string", default: "15" },
    short: { type: "boolean", default: false },
    gateways: { type: "boolean", default: false },
  },
});

if (args.gateways) serveGateways();
else process.exit(await main());

/** The child process: the chat gateway and the ingestion gateway, URLs on stdout, gone with its parent. */
function serveGateways() {
  const chat = startFakeLlmGateway();
  scriptGateway(chat, { chat: { chunks: Array.from({ length: REPLY_TOKENS }, (_, i) => `word${i} `), tokenDelayMs: TOKEN_DELAY_MS } });
  const ingest = startScriptedGateway();
  // Nothing is kept for long: the run sends tens of thousands of requests.
  setInterval(() => {
    chat.clearRequests();
    ingest.clearRequests();
  }, 1_000);
  console.log(`${chat.baseURL} ${ingest.baseURL}`);
  void (async () => {
    for await (const _ of Bun.stdin.stream());
    process.exit(0);
  })();
}

function log(message: string) {
  process.stderr.write(`load: ${message}\n`);
}

/** Resident set size of a process in MiB (Linux), or NaN. */
async function rssMiB(pid: number): Promise<number> {
  return (await memoryOf(pid)).rss / 2 ** 20;
}

/**
 * The API's live JavaScript heap, in MiB and in objects: it collects garbage on SIGUSR2
 * (tests/support/api-with-gc.ts) and appends what is left to heap.jsonl in its data folder.
 */
async function liveHeap(api: Pick<ServiceProcess, "proc">, dataDir: string): Promise<{ mib: number; objects: number }> {
  const read = () => readFile(join(dataDir, "heap.jsonl"), "utf8").catch(() => "");
  const before = (await read()).length;
  api.proc.kill("SIGUSR2");
  for (let i = 0; i < 100; i++) {
    await Bun.sleep(50);
    const text = await read();
    if (text.length > before) {
      const { heapBytes, objects } = JSON.parse(text.trimEnd().split("\n").at(-1)!) as { heapBytes: number; objects: number };
      return { mib: heapBytes / 2 ** 20, objects };
    }
  }
  return { mib: Number.NaN, objects: Number.NaN };
}

interface Tally {
  done: number;
  busy: number;
  errors: number;
  firstErrors: string[];
  latencies: number[];
}

async function main(): Promise<number> {
  const duration = Number(args.short ? 45 : args.duration) * 1000;
  const sessionCount = Number(args.sessions);
  const bookCount = Number(args.books);
  const warmup = Math.min(Number(args.warmup) * 1000, duration / 2);

  const postgres = await probePostgres();
  if (!postgres.reachable) return fail(`PostgreSQL is needed: ${postgres.reason}`);
  const redisMissing = unavailableRedisServer();
  if (redisMissing) return fail(redisMissing);

  const cleanups: (() => unknown)[] = [];
  const problems: string[] = [];
  try {
    const gatewayProcess = Bun.spawn([process.execPath, import.meta.path, "--gateways"], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
    cleanups.push(() => gatewayProcess.kill());
    const reader = gatewayProcess.stdout.getReader();
    const [chatGateway, ingestGateway] = new TextDecoder().decode((await reader.read()).value).trim().split(" ") as [string, string];
    reader.releaseLock();

    const testDb = await createTestDatabase(postgres.url);
    cleanups.push(() => testDb.drop());
    const db = await createDatabase({ driver: "postgres", url: testDb.url });
    cleanups.push(() => db.close());
    await migrate(db);
    const redis = await startPrivateRedis();
    cleanups.push(() => redis.stop());
    const kv = createRedisKeyValueStore({ url: redis.url });
    cleanups.push(() => kv.close());
    const books = startBookServer();
    cleanups.push(() => books.stop());

    log(`seeding ${sessionCount} sessions`);
    const apiData = await mkdtemp(join(tmpdir(), "load-api-"));
    cleanups.push(() => rm(apiData, { recursive: true, force: true }));
    const { world, sessions } = await seed(db, apiData, chatGateway, sessionCount);

    const common = { DATABASE_URL: testDb.url, REDIS_URL: redis.url, FILE_URL_ALLOWED_HOSTS: books.host, LOG_LEVEL: "error" };
    // api/server.ts itself, with a hook that reports the live heap after a full collection.
    const api = await startService("tests/support/api-with-gc.ts", { ...common, DATA_DIR: apiData, LLM_GATEWAY_URL: chatGateway });
    cleanups.push(() => api.stop());
    const workers = await Promise.all([0, 1].map(() => startWorkerProcess({ ...common, LLM_GATEWAY_URL: ingestGateway })));
    for (const worker of workers) cleanups.push(() => worker.stop());

    const chatBody = (session: string, message: string) =>
      JSON.stringify({ user_id: world.userId, character_id: world.characterId, book_id: world.bookId, session_id: session, user_message: message });
    const tally: Tally = { done: 0, busy: 0, errors: 0, firstErrors: [], latencies: [] };
    const doneBySession = new Map(sessions.map((s) => [s, 0]));
    const error = (what: string) => {
      tally.errors++;
      if (tally.firstErrors.length < 5) tally.firstErrors.push(what);
    };

    async function send(session: string, message: string): Promise<"done" | "busy" | "error"> {
      const started = performance.now();
      try {
        const res = await fetch(`${api.url}/character/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: chatBody(session, message) });
        const text = await res.text();
        if (res.status !== 200) return error(`HTTP ${res.status}: ${text.slice(0, 120)}`), "error";
        const last = text.trimEnd().split("\n\n").at(-1) ?? "";
        if (last.startsWith('data: {"done":true')) {
          tally.latencies.push(performance.now() - started);
          return "done";
        }
        if (last.includes('"code":429')) return "busy";
        return error(`stream ended with ${last.slice(0, 120)}`), "error";
      } catch (err) {
        return error(String(err)), "error";
      }
    }

    const start = performance.now();
    const deadline = start + duration;
    const samples: { at: number; api: number; heap: { mib: number; objects: number }; workers: number[] }[] = [];
    const sampler = setInterval(async () => {
      samples.push({
        at: (performance.now() - start) / 1000,
        api: await rssMiB(api.proc.pid),
        heap: await liveHeap(api, apiData),
        workers: await Promise.all(workers.map((w) => rssMiB(w.pid))),
      });
    }, SAMPLE_EVERY_MS);
    cleanups.push(() => clearInterval(sampler));

    log(`${sessionCount} readers for ${duration / 1000} s; ${bookCount} books submitted at once`);
    const readers = sessions.map(async (session, i) => {
      for (let turn = 0; performance.now() < deadline; turn++) {
        const message = `What happened to the Albatross? (${i}.${turn})`;
        const outcomes = turn % DOUBLE_SEND_EVERY === DOUBLE_SEND_EVERY - 1 ? await Promise.all([send(session, message), send(session, `${message} again`)]) : [await send(session, message)];
        for (const outcome of outcomes) {
          if (outcome === "done") {
            tally.done++;
            doneBySession.set(session, doneBySession.get(session)! + 1);
          } else if (outcome === "busy") tally.busy++;
        }
        if (outcomes.includes("error")) await Bun.sleep(100);
      }
    });

    const bookIds: string[] = [];
    for (let i = 0; i < bookCount; i++) bookIds.push((await insertBook(db, { title: `Load book ${i}` })).id);
    const submissions = await Promise.all(
      bookIds.map(async (bookId) => {
        const res = await fetch(`${api.url}/character/processing`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ book_id: bookId, file_url: books.url(ENGLISH_BOOK), user_id: world.userId }),
        });
        return res.status;
      }),
    );
    const refused = submissions.filter((s) => s !== 202);
    if (refused.length > 0) problems.push(`book submissions refused: ${refused.join(", ")}`);
    const allBooksSettled = async () =>
      (await Promise.all(bookIds.map((id) => getBook(db, id)))).every((b) => b?.processingStatus === "completed" || b?.processingStatus === "failed");
    let booksSettledAt = Number.NaN;
    const bookWatch = (async () => {
      while (Number.isNaN(booksSettledAt) && performance.now() < deadline + 120_000) {
        if (await allBooksSettled()) booksSettledAt = (performance.now() - start) / 1000;
        else await Bun.sleep(1_000);
      }
    })();

    await Promise.all(readers);
    const loadSeconds = (performance.now() - start) / 1000;
    clearInterval(sampler);
    log(`load over after ${loadSeconds.toFixed(0)} s; waiting for the books and for the API to settle`);

    await bookWatch;
    const booksDone = !Number.isNaN(booksSettledAt);
    const keys = queueKeys();
    const lockKeys = () => redis.cli("--scan", "--pattern", "chat:lock:*") + redis.cli("--scan", "--pattern", "chat:fold:*");
    const settled = await waitFor(30_000, async () => lockKeys() === "");

    // Checks ------------------------------------------------------------------------------------
    if (tally.errors > 0) problems.push(`${tally.errors} errors: ${tally.firstErrors.join(" | ")}`);
    if (!settled) problems.push(`chat lock or fold keys left: ${lockKeys().split("\n").slice(0, 5).join(", ")}`);
    const counts = await db.query<{ id: string; message_count: number; messages: number }>(
      "SELECT s.id, s.message_count, (SELECT count(*)::int FROM messages m WHERE m.session_id = s.id) AS messages FROM chat_sessions s",
    );
    const mismatched = counts.filter((row) => doneBySession.has(row.id) && (row.message_count !== doneBySession.get(row.id) || row.messages !== 2 * row.message_count));
    if (mismatched.length > 0) problems.push(`${mismatched.length} sessions whose counts differ from the replies received, e.g. ${JSON.stringify(mismatched[0])} vs ${doneBySession.get(mismatched[0]!.id)}`);
    const savedExchanges = counts.reduce((n, row) => n + row.message_count, 0);
    if (savedExchanges !== tally.done) problems.push(`${savedExchanges} exchanges saved but ${tally.done} done events received`);

    if (!booksDone) problems.push("books still processing after 120 s");
    const bookRows = await Promise.all(bookIds.map((id) => getBook(db, id)));
    const failedBooks = bookRows.filter((b) => b?.processingStatus !== "completed");
    if (failedBooks.length > 0) {
      const errors = await Promise.all(failedBooks.map(async (b) => (b ? (await getIngestion(db, b.id))?.lastError : null) ?? ""));
      problems.push(`${failedBooks.length} books not completed: ${failedBooks.map((b, i) => `${b?.processingStatus} ${errors[i]}`).join("; ")}`);
    }
    const characterSets = await Promise.all(bookIds.map(async (id) => (await listCharacters(db, id)).map((c) => c.name).sort().join(",")));
    if (new Set(characterSets).size !== 1 || characterSets[0] === "") problems.push(`books ended with different character sets: ${[...new Set(characterSets)].join(" / ")}`);
    const leftovers = [await kv.llen(keys.queue), await kv.llen(keys.inFlight), await kv.llen(keys.deadLetter)];
    if (leftovers.some((n) => n > 0)) problems.push(`queue, in-flight, dead-letter lengths ${leftovers.join(", ")}`);
    const leases = redis.cli("--scan", "--pattern", `${keys.leasePrefix}*`);
    if (leases !== "") problems.push(`leases left: ${leases}`);

    // What a leak grows is the number of objects alive after a full collection. The resident set
    // follows the collector's pace and the allocator's caching, and the heap's size after collection
    // its fragmentation, so both are reported but not judged. Medians of the first and last thirds of
    // the samples after warm-up, so that one sample (and the replies in flight at it) cannot decide.
    const afterWarmup = samples.filter((s) => s.at * 1000 >= warmup).map((s) => s.heap.objects);
    const third = Math.max(1, Math.floor(afterWarmup.length / 3));
    const baseline = afterWarmup.length > 0 ? percentile(afterWarmup.slice(0, third), 50) : Number.NaN;
    const final = afterWarmup.length > 0 ? percentile(afterWarmup.slice(-third), 50) : Number.NaN;
    const growth = (final - baseline) / baseline;
    if (!(growth <= MAX_LIVE_OBJECT_GROWTH)) {
      problems.push(`live objects in the API grew ${(growth * 100).toFixed(0)}% after warm-up (${baseline} → ${final})`);
    }

    // Report ------------------------------------------------------------------------------------
    const lines = [
      `## Load: ${sessionCount} chat sessions for ${(duration / 1000).toFixed(0)} s, ${bookCount} books by 2 workers`,
      "",
      machineHeader(),
      "",
      markdownTable(
        ["chat turns done", "turns/s", "p50 ms", "p99 ms", "429 (expected)", "errors", "exchanges saved", "books completed", "books all done at"],
        [
          [
            tally.done,
            (tally.done / loadSeconds).toFixed(0),
            tally.latencies.length ? percentile(tally.latencies, 50).toFixed(0) : "–",
            tally.latencies.length ? percentile(tally.latencies, 99).toFixed(0) : "–",
            tally.busy,
            tally.errors,
            savedExchanges,
            `${bookRows.filter((b) => b?.processingStatus === "completed").length}/${bookCount}`,
            `${booksSettledAt.toFixed(0)} s`,
          ],
        ],
      ),
      "",
      "Memory every 5 s: resident set of each process, and the API's heap after a full collection:",
      "",
      markdownTable(
        ["t (s)", "API resident MiB", "API live heap MiB", "API live objects", ...workers.map((_, i) => `worker ${i + 1} resident MiB`)],
        samples.map((s) => [s.at.toFixed(0), s.api.toFixed(0), s.heap.mib.toFixed(1), s.heap.objects, ...s.workers.map((w) => w.toFixed(0))]),
      ),
      "",
      `Objects alive in the API after a full collection, after warm-up (${(warmup / 1000).toFixed(0)} s), median of the first third of the samples → median of the last third: ${baseline} → ${final} (${growth >= 0 ? "+" : ""}${(growth * 100).toFixed(1)}%, limit +${MAX_LIVE_OBJECT_GROWTH * 100}%).`,
      "",
      problems.length === 0 ? "All checks held: nothing lost, nothing left locked, no error but the expected 429s." : `FAILED:\n${problems.map((p) => `- ${p}`).join("\n")}`,
    ];
    console.log(lines.join("\n"));
    return problems.length === 0 ? 0 : 1;
  } catch (err) {
    return fail(err instanceof Error ? (err.stack ?? err.message) : String(err));
  } finally {
    await runCleanups(cleanups);
  }
}

function fail(message: string): number {
  console.error(`load: ${message}`);
  return 1;
}

async function waitFor(timeoutMs: number, check: () => Promise<boolean>): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (await check()) return true;
    await Bun.sleep(250);
  }
  return check();
}

/** The chat book with its passages in an embedded index under dataDir, and one session per reader. */
async function seed(db: Database, dataDir: string, gatewayUrl: string, count: number) {
  const vector = createEmbeddedVectorIndex({ dir: join(dataDir, "vectors") });
  const text = createEmbeddedTextIndex({ dir: join(dataDir, "text") });
  const llm = createTestLanguageModel({ baseURL: gatewayUrl }, createMetrics({ defaultMetrics: false }));
  const world = await seedChatWorld(db, { vector, text, llm });
  const extra = Array.from({ length: EXTRA_CHUNKS }, (_, i) => ({ chunkIndex: PASSAGES.length + i, text: `${PASSAGES[i % PASSAGES.length]} Part ${i}.` }));
  const vectors = await llm.embed(extra.map((c) => c.text));
  await vector.upsert(world.bookId, extra.map((c, i) => ({ ...c, vector: vectors[i]! })));
  await text.upsert(world.bookId, extra);
  await Promise.all([vector.close?.(), text.close?.()]);
  const sessions: string[] = [];
  for (let i = 0; i < count; i++) sessions.push((await createSession(db, { userId: world.userId, characterId: world.characterId })).id);
  return { world, sessions };
}

/** `bun run worker` as its own process with its own data folder, ready once /health answers. */
async function startWorkerProcess(env: Record<string, string>) {
  const dataDir = await mkdtemp(join(tmpdir(), "load-worker-"));
  const port = await freePort();
  const proc = Bun.spawn([process.execPath, "ingest/worker.ts"], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATA_DIR: dataDir, METRICS_PORT: String(port), ...env },
    stdout: "ignore",
    stderr: "inherit",
  });
  const ready = await waitFor(60_000, async () => {
    try {
      return (await fetch(`http://127.0.0.1:${port}/health`)).ok;
    } catch {
      return false;
    }
  });
  if (!ready) throw new Error("a worker did not start within 60 s");
  return {
    pid: proc.pid,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
