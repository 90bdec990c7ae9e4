import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readChatEvents } from "../../api/sse-client.ts";
import { chunkTextToArray } from "../../common/chunking.ts";
import { createDatabase } from "../../common/db/create.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { getBook } from "../../common/db/books.ts";
import { listCharacters } from "../../common/db/characters.ts";
import { createSession, insertBook } from "../../common/db/frontend-rows.ts";
import { silentLogger } from "../../common/log.ts";
import { DEFAULT_INDEX_BATCH_SIZE } from "../../ingest/phases/indexing.ts";
import { metricValue } from "../support/app.ts";
import { defaultChatReply } from "../support/fake-llm-gateway.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";
import { startPrivateRedis, unavailableRedisServer, type PrivateRedis } from "../support/private-servers.ts";
import { startService, type ServiceProcess } from "../support/process.ts";
import { ENGLISH_BOOK, FIXTURES, USER_ID, eventually, startBookServer, startScriptedGateway, type BookServer, type ScriptedGateway } from "../fixtures/ingest/harness.ts";

/**
 * SPEC's metric catalogue as an operator sees it: the API and the worker run as two real processes
 * (`bun api/server.ts`, `bun ingest/worker.ts`) on one Postgres, one Redis and one data dir; a book is
 * submitted through the API and ingested by the worker (one character's profile pass failing), then
 * a reader chats once. Both /metrics are scraped: every catalogue entry is on the process doing its
 * work, with SPEC's type, label names and label values, each counter moved by exactly what happened,
 * and promtool accepts both expositions.
 */

setDefaultTimeout(180_000);

const PROMTOOL = ["/usr/bin/promtool", "/usr/local/bin/promtool"].find(existsSync);
if (!PROMTOOL) console.warn("metrics-catalogue: promtool checks skipped: promtool is absent (apt-get install prometheus)");

type Process = "api" | "worker";

interface CatalogueEntry {
  name: string;
  type: "counter" | "gauge" | "histogram";
  labels: string[];
  /** Label values SPEC allows, where it names them. */
  values?: Record<string, string[]>;
  on: Process[];
}

/** SPEC, "Metric catalogue", with the process that does each metric's work. */
const CATALOGUE: CatalogueEntry[] = [
  { name: "http_requests_total", type: "counter", labels: ["method", "endpoint", "status_code"], on: ["api"] },
  { name: "http_request_duration_seconds", type: "histogram", labels: ["method", "endpoint"], on: ["api"] },
  { name: "http_requests_in_progress", type: "gauge", labels: ["method", "endpoint"], on: ["api"] },
  { name: "processing_jobs_queued_total", type: "counter", labels: [], on: ["api"] },
  { name: "processing_jobs_processed_total", type: "counter", labels: ["status"], values: { status: ["completed", "failed"] }, on: ["worker"] },
  { name: "processing_characters_extracted_total", type: "counter", labels: [], on: ["worker"] },
  { name: "processing_characters_processed_total", type: "counter", labels: ["status"], on: ["worker"] },
  {
    name: "processing_pipeline_duration_seconds",
    type: "histogram",
    labels: ["phase"],
    values: { phase: ["booknlp", "extract", "prompt", "index"] },
    on: ["worker"],
  },
  { name: "processing_active_workers", type: "gauge", labels: [], on: ["worker"] },
  { name: "processing_queue_depth", type: "gauge", labels: [], on: ["api", "worker"] },
  { name: "indexing_chunks_generated_total", type: "counter", labels: [], on: ["worker"] },
  { name: "indexing_chunks_indexed_total", type: "counter", labels: ["store"], values: { store: ["qdrant", "typesense"] }, on: ["worker"] },
  { name: "indexing_embeddings_generated_total", type: "counter", labels: [], on: ["worker"] },
  { name: "indexing_duration_seconds", type: "histogram", labels: ["pipeline"], values: { pipeline: ["vector", "full_text"] }, on: ["worker"] },
];

interface Sample {
  labels: Record<string, string>;
  value: number;
}

/** The TYPE and the samples of one metric family in a text exposition (histogram series folded in, `le` dropped). */
function family(exposition: string, name: string): { type: string | undefined; samples: Sample[] } {
  const lines = exposition.split("\n");
  const type = lines.find((l) => l.startsWith(`# TYPE ${name} `))?.split(" ")[3];
  const series = new RegExp(`^${name}(?:_bucket|_sum|_count)?(?:\\{(.*)\\})? (\\S+)$`);
  const samples = lines.flatMap((line) => {
    const match = series.exec(line);
    if (!match) return [];
    const labels = Object.fromEntries([...(match[1] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
    delete labels.le;
    return [{ labels, value: Number(match[2]) }];
  });
  return { type, samples };
}

function promtool(exposition: string, dir: string, name: string) {
  const file = join(dir, `${name}.txt`);
  return writeFile(file, exposition).then(() => {
    const check = Bun.spawnSync([PROMTOOL!, "check", "metrics"], { stdin: Bun.file(file), stdout: "pipe", stderr: "pipe" });
    return { exitCode: check.exitCode, output: check.stdout.toString() + check.stderr.toString() };
  });
}

const [postgres, redisUnavailable] = [await probePostgres(), unavailableRedisServer()];
const skip = !postgres.reachable ? postgres.reason : redisUnavailable;
if (skip) console.warn(`metrics-catalogue: skipped: the API and the worker need a shared Postgres and a Redis of their own: ${skip}`);

describe.skipIf(skip !== undefined)("the metric catalogue on the API and the worker processes", () => {
  const FAILING = "Mr. Pennington";
  let testDb: TestDatabase;
  let db: Database;
  let redis: PrivateRedis;
  let books: BookServer;
  let gateway: ScriptedGateway;
  let dataDir: string;
  let api: ServiceProcess;
  let worker: ServiceProcess;
  const scraped = {} as Record<Process, string>;
  let saved = 0;
  let sessionId = "";
  let chunks = 0;

  beforeAll(async () => {
    if (!postgres.reachable) return;
    testDb = await createTestDatabase(postgres.url);
    db = await createDatabase({ driver: "postgres", url: testDb.url }, { logger: silentLogger });
    await migrate(db);
    redis = await startPrivateRedis({ persistent: false });
    books = startBookServer();
    gateway = startScriptedGateway();
    gateway.override.extract = (input) => (input.character.name === FAILING ? { status: 500 } : undefined);
    dataDir = await mkdtemp(join(tmpdir(), "metrics-catalogue-"));
    const env = {
      DATA_DIR: dataDir,
      DATABASE_URL: testDb.url,
      REDIS_URL: redis.url,
      LLM_GATEWAY_URL: gateway.baseURL,
      FILE_URL_ALLOWED_HOSTS: books.host,
    };
    [api, worker] = await Promise.all([startService("api/server.ts", env), startService("ingest/worker.ts", env, undefined, "METRICS_PORT")]);

    const book = await insertBook(db, { title: "The Keeper's Ledger" });
    const submitted = await fetch(`${api.url}/character/processing`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID }),
    });
    expect(submitted.status).toBe(202);
    // The worker counts the job just after it marks the book completed.
    await eventually(async () => (await getBook(db, book.id))?.processingStatus === "completed", "the book to be ingested", 120_000);
    await eventually(
      async () => metricValue(await (await fetch(`${worker.url}/metrics`)).text(), 'processing_jobs_processed_total{status="completed"}') === 1,
      "the job to be counted",
    );
    const characters = await listCharacters(db, book.id);
    saved = characters.length;
    chunks = chunkTextToArray(await readFile(join(FIXTURES, ENGLISH_BOOK), "utf8")).length;

    gateway.onChat(defaultChatReply);
    const session = await createSession(db, { userId: USER_ID, characterId: characters[0]!.id });
    sessionId = session.id;
    const chat = await fetch(`${api.url}/character/chat`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ user_id: USER_ID, character_id: session.characterId, book_id: book.id, session_id: session.id, user_message: "What does the ledger remember?" }),
    });
    expect(chat.status).toBe(200);
    const events = [];
    for await (const event of readChatEvents(chat.body!)) events.push(event);
    expect(events.at(-1)).toMatchObject({ done: true });

    scraped.api = await (await fetch(`${api.url}/metrics`)).text();
    scraped.worker = await (await fetch(`${worker.url}/metrics`)).text();
  });

  afterAll(async () => {
    await Promise.allSettled([api?.stop(), worker?.stop()]);
    await db?.close();
    await testDb?.drop();
    await redis?.stop();
    books?.stop();
    gateway?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  test.each(CATALOGUE.map((entry) => [entry.name, entry] as const))("%s: type, labels and values as SPEC lists them, on the process doing the work", (_, entry) => {
    for (const proc of ["api", "worker"] as const) {
      const { type, samples } = family(scraped[proc], entry.name);
      if (!entry.on.includes(proc)) {
        expect({ proc, type }).toEqual({ proc, type: undefined });
        continue;
      }
      expect({ proc, type }).toEqual({ proc, type: entry.type });
      expect(samples.length).toBeGreaterThan(0);
      for (const sample of samples) {
        expect(Object.keys(sample.labels).sort()).toEqual([...entry.labels].sort());
        for (const [label, allowed] of Object.entries(entry.values ?? {})) expect(allowed).toContain(sample.labels[label]!);
      }
    }
  });

  test("the API's counters moved by one submission and one chat", () => {
    const m = (series: string) => metricValue(scraped.api, series);
    expect(m("processing_jobs_queued_total")).toBe(1);
    expect(m('http_requests_total{method="POST",endpoint="/character/processing",status_code="202"}')).toBe(1);
    expect(m('http_requests_total{method="POST",endpoint="/character/chat",status_code="200"}')).toBe(1);
    expect(m('http_request_duration_seconds_count{method="POST",endpoint="/character/chat"}')).toBe(1);
    expect(m('http_requests_in_progress{method="POST",endpoint="/character/chat"}')).toBe(0);
  });

  test("the API logs the chat turn as one plain text line on stdout", () => {
    const turns = api.output().stdout.split("\n").filter((line) => line.includes(" chat turn "));
    expect(turns).toHaveLength(1);
    expect(turns[0]).toMatch(new RegExp(`^\\S+Z INFO  chat turn component=chat session_id=${sessionId} character_id=[0-9a-f-]{36} outcome=ok seconds=[\\d.]+$`));
  });

  test("the worker's counters moved by one book: its characters, its chunks in each store, one embedding per chunk", () => {
    const m = (series: string) => metricValue(scraped.worker, series);
    expect(saved).toBeGreaterThan(1);
    expect(m('processing_jobs_processed_total{status="completed"}')).toBe(1);
    // Present at 0 from the start, so an alert on failed jobs has a series to watch.
    expect(m('processing_jobs_processed_total{status="failed"}')).toBe(0);
    expect(m("processing_characters_extracted_total")).toBe(saved + 1);
    expect(m('processing_characters_processed_total{status="completed"}')).toBe(saved);
    expect(m('processing_characters_processed_total{status="failed"}')).toBe(1);
    for (const phase of ["booknlp", "extract", "prompt", "index"]) {
      expect(m(`processing_pipeline_duration_seconds_count{phase="${phase}"}`)).toBe(1);
    }
    expect(m("processing_active_workers")).toBe(0);
    expect(m("processing_queue_depth")).toBe(0);
    expect(m("indexing_chunks_generated_total")).toBe(chunks);
    expect(m('indexing_chunks_indexed_total{store="qdrant"}')).toBe(chunks);
    expect(m('indexing_chunks_indexed_total{store="typesense"}')).toBe(chunks);
    expect(m("indexing_embeddings_generated_total")).toBe(chunks);
    const batches = Math.ceil(chunks / DEFAULT_INDEX_BATCH_SIZE);
    expect([m('indexing_duration_seconds_count{pipeline="vector"}'), m('indexing_duration_seconds_count{pipeline="full_text"}')]).toEqual([batches, batches]);
  });

  test.skipIf(!PROMTOOL)("promtool accepts both expositions", async () => {
    const dir = await mkdtemp(join(tmpdir(), "metrics-"));
    try {
      expect(await promtool(scraped.api, dir, "api")).toEqual({ exitCode: 0, output: "" });
      expect(await promtool(scraped.worker, dir, "worker")).toEqual({ exitCode: 0, output: "" });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
