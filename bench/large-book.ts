/**
 * A 50 MB book on embedded defaults: what ingesting it costs the worker, and what the first chat on
 * it costs the API and everyone else using the API meanwhile.
 *
 *   bun bench/large-book.ts [--mb 50] [--only ingest|api]
 *
 * The book is War and Peace from ../shared/books followed by copies of it with each paragraph's words
 * shuffled (bench/support.ts, nonRepeatingText), or, without it, the generated novel-shaped text of
 * bench/support.ts; either way the same bytes on every run.
 *
 * - ingest: `bun run ingest <book>` in its own process on a fresh data dir against the loopback
 *   gateway of the ingestion tests (embeddings of dimension 1536), peak RSS from a launcher process
 *   (bench/measured-spawn.ts), beside the budget of 10 × the book + 300 MB.
 * - api: a data dir holding a chat world whose book also holds the large book's chunks (unit vectors
 *   of dimension 1536 from a seeded generator, both indexes written in batches as an ingestion does),
 *   then the API server process on it: the first chat on the book (its indexes start loading), then
 *   a chat a second until one is grounded in the book's passages (the indexes are loaded), with
 *   /health asked every 20 ms and another reader chatting on a small book all along. The API's
 *   resident memory from /proc.
 */
import { readFileSync, existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { chunkText } from "../common/chunking.ts";
import { createSession } from "../common/db/frontend-rows.ts";
import { createPgliteDatabase } from "../common/db/pglite.ts";
import { createMetrics } from "../common/metrics/index.ts";
import { createEmbeddedTextIndex } from "../common/text-index/embedded.ts";
import { createEmbeddedVectorIndex } from "../common/vector/embedded.ts";
import { extractWork } from "../ingest/book/book-text.ts";
import { startScriptedGateway } from "../tests/fixtures/ingest/harness.ts";
import { createTestLanguageModel, scriptGateway, seedChatWorld } from "../tests/support/chat.ts";
import { startFakeLlmGateway } from "../tests/support/fake-llm-gateway.ts";
import { createTestDatabase, probePostgres } from "../tests/support/postgres.ts";
import { startService } from "../tests/support/process.ts";
import { seededRandom } from "../tests/support/seeded-random.ts";
import { measuredSpawn } from "./measured-spawn.ts";
import { answerHelp, freshDataDir, generatedNovel, nonRepeatingText, machineHeader, markdownTable, memoryOf, percentile, removeDataDirTemplate, SHARED_BOOKS_DIR } from "./support.ts";

const CLI = resolve(import.meta.dir, "..", "ingest", "cli.ts");
const EMBEDDING_DIMENSION = 1536;
const HEALTH_EVERY_MS = 20;
const BATCH = 64;

answerHelp(
  "usage: bun bench/large-book.ts [--mb 50] [--only ingest|api] [--profile <dir>]\n\nIngests a book of that many megabytes on embedded defaults, then measures the first chat on it and the API meanwhile. --profile writes the API's CPU profile to <dir>.",
);
const { values } = parseArgs({ args: process.argv.slice(2), options: { mb: { type: "string", default: "50" }, only: { type: "string" }, profile: { type: "string" } } });
const bytes = Number(values.mb) * 1e6;
const parts = values.only ? [values.only] : ["ingest", "api"];

/**
 * The book's text, deterministic and not repeating: War and Peace, then copies of it with each
 * paragraph's words shuffled by a seeded generator (the vocabulary, names and sentence lengths of a
 * novel, but no run of eight words in the same order twice, as in a real long book: repeated text
 * would collapse to one copy's shingles in the spoiler guard's index). Without ../shared/books, the
 * generated novel-shaped text of bench/support.ts.
 */
function largeBookText(): { text: string; source: string } {
  const warAndPeace = join(SHARED_BOOKS_DIR, "pg2600_war_and_peace.txt");
  if (!existsSync(warAndPeace)) return { text: generatedNovel(bytes), source: "generated novel-shaped text (../shared/books is absent)" };
  // The work alone: a Gutenberg footer in the middle of the text would end the book there.
  const text = nonRepeatingText(extractWork(readFileSync(warAndPeace, "utf8")).text, bytes);
  return { text, source: "War and Peace (../shared/books, the work without the licence), then copies of it with each paragraph's words shuffled (seeded)" };
}

const mib = (n: number) => (n / 2 ** 20).toFixed(0);

/** On the embedded database, or on a throwaway database of the PostgreSQL at DEFAULT_TEST_POSTGRES_URLS. */
async function ingest(bookPath: string, bookBytes: number, database: "embedded" | "postgres"): Promise<string> {
  const dataDir = await freshDataDir();
  const gateway = startScriptedGateway({ embeddingDimension: EMBEDDING_DIMENSION });
  const probe = database === "postgres" ? await probePostgres() : undefined;
  if (probe && !probe.reachable) return `PostgreSQL unreachable, skipped: ${probe.reason}`;
  const postgres = probe?.reachable ? await createTestDatabase(probe.url) : undefined;
  try {
    // A throwaway database is ours to write the books row to.
    const run = await measuredSpawn([process.execPath, CLI, bookPath, "--title", "A large book", ...(postgres ? ["--write-frontend-tables"] : [])], {
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        DATA_DIR: dataDir,
        LLM_GATEWAY_URL: gateway.baseURL,
        LOG_LEVEL: "warn",
        ...(postgres ? { DATABASE_URL: postgres.url } : {}),
      },
    });
    const counts = /: (\d+) characters, (\d+) chunks/.exec(run.stdout);
    if (run.exitCode !== 0 || !counts) throw new Error(`bun run ingest failed (exit ${run.exitCode}):\n${run.stderr.slice(-3000)}\n${run.stdout}`);
    const budget = (10 * bookBytes + 300e6) / 2 ** 20;
    return markdownTable(
      ["book MB", "chunks", "characters", "wall s", "CPU s", "peak RSS MiB", "budget MiB (10 × book + 300 MB)", "peak ÷ book"],
      [[(bookBytes / 1e6).toFixed(1), counts[2]!, counts[1]!, run.wallSeconds.toFixed(1), run.cpuSeconds.toFixed(1), run.rssMb.toFixed(0), budget.toFixed(0), ((run.rssMb * 2 ** 20) / bookBytes).toFixed(1)]],
    );
  } finally {
    gateway.stop();
    await postgres?.drop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/**
 * A data dir with two chat worlds: a small book, and one whose book holds every chunk of `text`
 * (in fresh collections of the query's dimension: the world's own passages are dropped).
 */
async function seedLargeBook(text: string, baseURL: string) {
  const dataDir = await freshDataDir();
  const db = await createPgliteDatabase({ dataDir: join(dataDir, "pg") });
  const vector = createEmbeddedVectorIndex({ dir: join(dataDir, "vectors") });
  const textIndex = createEmbeddedTextIndex({ dir: join(dataDir, "text") });
  const llm = createTestLanguageModel({ baseURL }, createMetrics({ defaultMetrics: false }));
  const small = await seedChatWorld(db, { vector, text: textIndex, llm });
  const large = await seedChatWorld(db, { vector, text: textIndex, llm });
  const session = async (world: typeof small) => ({ world, id: (await createSession(db, { userId: world.userId, characterId: world.characterId })).id });
  const sessions = { small: await session(small), large: [await session(large), await session(large)] };
  await db.close();
  await Promise.all([vector.deleteBook(large.bookId), textIndex.deleteBook(large.bookId)]);
  const random = seededRandom(50);
  let chunks = 0;
  let batch: { chunkIndex: number; text: string }[] = [];
  const flush = async () => {
    const points = batch.map((c) => ({ ...c, vector: Array.from({ length: EMBEDDING_DIMENSION }, () => random() - 0.5) }));
    await Promise.all([vector.upsert(large.bookId, points), textIndex.upsert(large.bookId, batch)]);
    batch = [];
  };
  for (const chunk of chunkText(text)) {
    batch.push({ chunkIndex: chunk.chunkIndex, text: chunk.text });
    chunks++;
    if (batch.length === BATCH) await flush();
  }
  if (batch.length > 0) await flush();
  await Promise.all([vector.close?.(), textIndex.close?.()]);
  return { dataDir, sessions, chunks };
}

async function firstChats(text: string): Promise<string> {
  const gateway = startFakeLlmGateway({ embeddingDimension: EMBEDDING_DIMENSION });
  scriptGateway(gateway, { chat: { chunks: ["It ", "was ", "the ", "war."] } });
  const { dataDir, sessions, chunks } = await seedLargeBook(text, gateway.baseURL);
  const profile = values.profile ? ["--cpu-prof", `--cpu-prof-dir=${resolve(values.profile)}`] : [];
  const api = await startService("api/server.ts", { DATA_DIR: dataDir, LLM_GATEWAY_URL: gateway.baseURL, LOG_LEVEL: "error" }, undefined, undefined, [], profile);
  try {
    const pid = api.proc.pid;
    /** Milliseconds to the end of the reply, and whether it quoted any passage. */
    const chat = async ({ world, id }: (typeof sessions)["small"]) => {
      const start = performance.now();
      const res = await fetch(`${api.url}/character/chat`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ user_id: world.userId, character_id: world.characterId, book_id: world.bookId, session_id: id, user_message: "What did Pierre say to Natasha about the war?" }),
      });
      const body = await res.text();
      if (!res.ok || !body.includes('"done":true')) throw new Error(`chat failed (${res.status}): ${body.slice(-300)}`);
      return { ms: performance.now() - start, grounded: !body.includes('"sources":[]') };
    };
    // The API's own first-request costs (the database, the code) are paid on the small book first.
    for (let i = 0; i < 3; i++) await chat(sessions.small);
    const before = await memoryOf(pid);
    let loading = true;
    const health: number[] = [];
    const other: number[] = [];
    const poll = (async () => {
      while (loading) {
        const start = performance.now();
        await (await fetch(`${api.url}/health`)).text();
        health.push(performance.now() - start);
        await Bun.sleep(HEALTH_EVERY_MS);
      }
    })();
    const otherReader = (async () => {
      while (loading) other.push((await chat(sessions.small)).ms);
    })();
    const started = performance.now();
    const first = await chat(sessions.large[0]!);
    // Until the book's indexes are in memory, its chats answer without its passages.
    let chats = 1;
    let last = first;
    while (!last.grounded) {
      await Bun.sleep(1000);
      last = await chat(sessions.large[1]!);
      chats++;
    }
    const loadedAfter = performance.now() - started;
    loading = false;
    await Promise.all([poll, otherReader]);
    const after = await memoryOf(pid);
    return markdownTable(
      ["chunks", "first chat ms", "first chat grounded", "book searchable after s (chats)", "/health meanwhile: requests, p50 / max ms", "another reader's chats meanwhile: count, max ms", "chat once loaded ms", "API RSS MiB before → after", "API peak RSS MiB"],
      [
        [
          chunks,
          first.ms.toFixed(0),
          first.grounded ? "yes" : "no",
          `${(loadedAfter / 1000).toFixed(1)} (${chats})`,
          `${health.length}, ${percentile(health, 50).toFixed(1)} / ${Math.max(...health).toFixed(1)}`,
          `${other.length}, ${Math.max(...other).toFixed(0)}`,
          last.ms.toFixed(0),
          `${mib(before.rss)} → ${mib(after.rss)}`,
          mib(after.peak),
        ],
      ],
    );
  } finally {
    await api.stop();
    gateway.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

const { text, source } = largeBookText();
const dir = await mkdtemp(join(tmpdir(), "bench-large-book-"));
const bookPath = join(dir, "large-book.txt");
await writeFile(bookPath, text);
const bookBytes = Buffer.byteLength(text);
const out = [`## A ${(bookBytes / 1e6).toFixed(0)} MB book`, "", machineHeader(), "", `Book: ${source}, ${(bookBytes / 1e6).toFixed(1)} MB.`];
try {
  if (parts.includes("ingest")) {
    console.error("ingesting…");
    out.push("", "**Ingestion** (`bun run ingest`, embedded defaults, native NLP)", "", await ingest(bookPath, bookBytes, "embedded"));
    console.error("ingesting on PostgreSQL…");
    out.push("", "**Ingestion on PostgreSQL** (the same, with `DATABASE_URL` on a throwaway database: no PGlite in the process)", "", await ingest(bookPath, bookBytes, "postgres"));
  }
  if (parts.includes("api")) {
    console.error("seeding the API's data dir…");
    out.push("", "**API, first chats on the book** (API server process, embedded indexes)", "", await firstChats(text));
  }
} finally {
  await removeDataDirTemplate();
  await rm(dir, { recursive: true, force: true });
}
console.log(out.join("\n"));
