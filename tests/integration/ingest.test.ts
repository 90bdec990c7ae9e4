import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { characterCacheKey } from "../../common/contract/cache-keys.ts";
import { chunkTextToArray } from "../../common/chunking.ts";
import type { Language } from "../../common/contract/rows.ts";
import { getBook } from "../../common/db/books.ts";
import { getIngestion } from "../../common/db/ingestions.ts";
import { listCharacters } from "../../common/db/characters.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { downloadBook } from "../../common/file-url.ts";
import { createReliableQueue, enqueueJob, queueKeys } from "../../common/queue.ts";
import { BookRejectedError } from "../../ingest/errors.ts";
import { PIPELINE_PHASES } from "../../common/metrics/processing.ts";
import { runPipeline } from "../../ingest/pipeline.ts";
import { startWorker, type WorkerHandle } from "../../ingest/jobs/queue-consumer.ts";
import { buildTestApp, metricValue } from "../support/app.ts";
import { openIngestSuite } from "../support/ingest-suite.ts";
import { openLiveStores } from "../support/live-stores.ts";
import { probePostgres } from "../support/postgres.ts";
import { probeRedis } from "../support/redis.ts";
import {
  ENGLISH_BOOK,
  FIXTURES,
  TEST_PIPELINE_OPTIONS,
  URDU_BOOK,
  USER_ID,
  createIngestEnv,
  eventually,
  listFiles,
  startScriptedGateway,
  type IngestEnv,
  type ScriptedGateway,
} from "../fixtures/ingest/harness.ts";

// Whole books go through the pipeline, and worker processes start an embedded Postgres.
setDefaultTimeout(60_000);

const englishText = await readFile(join(FIXTURES, ENGLISH_BOOK), "utf8");
const urduText = await readFile(join(FIXTURES, URDU_BOOK), "utf8");
const chunkCount = (text: string) => chunkTextToArray(text, { chunkTokens: TEST_PIPELINE_OPTIONS.index!.chunkTokens! }).length;

/** The chunk_index of the English book's chunk that holds `phrase` (at the test's chunk size unless given). */
function chunkHolding(phrase: string, chunkTokens = TEST_PIPELINE_OPTIONS.index!.chunkTokens!) {
  const index = chunkTextToArray(englishText, { chunkTokens }).findIndex((c) => c.text.includes(phrase));
  if (index < 0) throw new Error(`no chunk holds ${phrase}`);
  return index;
}

const { books, db, setup, defer } = await openIngestSuite();

async function newBook(title: string, language: Language = "English") {
  return insertBook(db, { title, author: "A. Tester", language });
}

function work(env: IngestEnv): WorkerHandle {
  const worker = startWorker(env.deps, { minPollMs: 10, maxPollMs: 50, pipeline: TEST_PIPELINE_OPTIONS });
  defer(() => worker.stop());
  return worker;
}

async function statusOf(bookId: string) {
  return (await getBook(db, bookId))?.processingStatus;
}

const untilStatus = (bookId: string, status: string) =>
  eventually(async () => (await statusOf(bookId)) === status, `book ${bookId} to be ${status}`);

async function exposition(env: IngestEnv) {
  return env.deps.metrics.registry.metrics();
}

describe("ingesting an English book", () => {
  test("a book submitted with POST /character/processing ends completed with characters, backups, both indexes and metrics", async () => {
    const { gateway, env } = await setup();
    const app = await buildTestApp({
      db,
      kv: env.deps.kv,
      metrics: env.deps.metrics,
      probeBook: (url) => downloadBook(url, { allowedHosts: [books.host], maxBytes: env.deps.config.maxBookBytes }),
    });
    const book = await newBook("The Keeper's Ledger");
    work(env);

    const res = await app.postJson("/character/processing", { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID });
    expect(res.status).toBe(202);
    await untilStatus(book.id, "completed");

    const characters = await listCharacters(db, book.id);
    const names = characters.map((c) => c.name);
    expect(names).toEqual(expect.arrayContaining(["Clara", "Tobias Finch", "Mr. Pennington"]));
    for (const c of characters) {
      expect(c.systemPrompt).toStartWith(`I am ${c.name}, from The Keeper's Ledger.`);
      expect(c.profileJson).toMatchObject({ psychology: expect.stringContaining(c.name), motivations: ["keep faith with the work"] });
      expect(c.description).toBe(`${c.name} is steady and watchful. They notice what others miss.`);
      expect(c.color).toMatch(/^#[0-9A-F]{6}$/i);
      expect(c.emoji?.length).toBeGreaterThan(0);
      expect(c.importance).toBeGreaterThan(0);
    }
    // Most important first, as the NLP step ranked them.
    expect(characters.map((c) => c.importance)).toEqual([...characters.map((c) => c.importance)].sort((a, b) => b - a));

    const backups = await listFiles(join(env.promptDir, book.id));
    expect(backups).toHaveLength(characters.length);
    expect(backups).toContain("tobias finch.md");
    expect(await readFile(join(env.promptDir, book.id, "tobias finch.md"), "utf8")).toBe(`${characters.find((c) => c.name === "Tobias Finch")!.systemPrompt}\n`);

    const chunks = chunkCount(englishText);
    expect(chunks).toBeGreaterThan(3);
    expect(await env.deps.vectorIndex.count(book.id)).toBe(chunks);
    expect(await env.deps.textIndex.count(book.id)).toBe(chunks);
    const [hit] = await env.deps.textIndex.search(book.id, "Margaret Ann Whitby brig");
    expect(hit?.text).toContain("Margaret Ann");

    // What the passes sent: profile in JSON mode at 0.3 with the NLP step's findings, persona at 0.7.
    const requests = gateway.chatRequests().map((r) => r.body as { temperature?: number; response_format?: { type: string } });
    const extraction = gateway.extractions().find((e) => e.character.name === "Clara")!;
    // A line split by its tag ("You were right, Aunt Agnes," said Clara. "The ledger remembered.") is one line, without the tag.
    expect(extraction.character.quotes).toContain("You were right, Aunt Agnes. The ledger remembered.");
    expect(extraction.cooccurring.map((c) => c.name)).toEqual(expect.arrayContaining(["Tobias Finch"]));
    expect(extraction.passages.length).toBeGreaterThan(0);
    expect(requests.filter((r) => r.response_format?.type === "json_object").every((r) => r.temperature === 0.3)).toBe(true);
    expect(requests.filter((r) => r.temperature === 0.7)).toHaveLength(characters.length);
    expect(gateway.personas().find((p) => p.name === "Clara")?.profile.signatureThemes).toEqual(["duty"]);

    // The worker counts the job just after it marks the book completed.
    const metrics = await eventually(async () => {
      const text = await (await app.request("/metrics")).text();
      return metricValue(text, 'processing_jobs_processed_total{status="completed"}') === 1 && text;
    }, "the job counted as completed");
    expect(metricValue(metrics, "processing_jobs_queued_total")).toBe(1);
    expect(metricValue(metrics, "processing_queue_depth")).toBe(0);
    expect(metricValue(metrics, "processing_active_workers")).toBe(0);
    expect(metricValue(metrics, "indexing_chunks_generated_total")).toBe(chunks);
    expect(metricValue(metrics, 'indexing_chunks_indexed_total{store="qdrant"}')).toBe(chunks);
    expect(metricValue(metrics, 'indexing_chunks_indexed_total{store="typesense"}')).toBe(chunks);
    expect(metricValue(metrics, "indexing_embeddings_generated_total")).toBe(chunks);
    expect(metricValue(metrics, 'indexing_duration_seconds_count{pipeline="vector"}')).toBe(Math.ceil(chunks / 3));
    expect(metricValue(metrics, 'indexing_duration_seconds_count{pipeline="full_text"}')).toBe(Math.ceil(chunks / 3));
    expect(metricValue(metrics, 'indexing_write_duration_seconds_count{store="qdrant"}')).toBe(Math.ceil(chunks / 3));
    expect(metricValue(metrics, "processing_characters_extracted_total")).toBe(characters.length);
    expect(metricValue(metrics, 'processing_characters_processed_total{status="completed"}')).toBe(characters.length);
    for (const phase of ["booknlp", "extract", "prompt", "index"]) {
      expect(metricValue(metrics, `processing_pipeline_duration_seconds_count{phase="${phase}"}`)).toBe(1);
    }
    expect(metricValue(metrics, "processing_download_duration_seconds_count")).toBe(1);
    expect(metricValue(metrics, "processing_job_duration_seconds_count")).toBe(1);
    expect(metricValue(metrics, 'llm_tokens_total{purpose="extract",type="prompt"}')).toBeGreaterThan(0);
    expect(metricValue(metrics, 'llm_tokens_total{purpose="persona",type="completion"}')).toBeGreaterThan(0);
    expect(metricValue(metrics, 'llm_tokens_total{purpose="embedding",type="prompt"}')).toBeGreaterThan(0);
  });

  test("ingesting a book twice leaves one set of characters, one backup each and one copy of every chunk; a redelivered job is not run again", async () => {
    const { gateway, env } = await setup();
    const book = await newBook("The Keeper's Ledger, twice");
    const submission = { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID };
    await enqueueJob(env.deps.kv, submission);
    const worker = work(env);
    await eventually(async () => worker.state().jobsHandled === 1, "the first run");
    const first = await listCharacters(db, book.id);
    const firstBackups = await listFiles(join(env.promptDir, book.id));
    // What a chat turn would have cached from the first run.
    await env.deps.kv.set(characterCacheKey(first[0]!.id), JSON.stringify({ stale: true }), { ex: 3600 });

    // The book submitted again: a second job.
    const { job } = await enqueueJob(env.deps.kv, submission);
    await eventually(async () => worker.state().jobsHandled === 2, "the second run");
    const profileCalls = gateway.extractions().length;
    // That very job record once more, as a redelivery would bring it: closed without a third run.
    await env.deps.kv.lpush("processing_queue", JSON.stringify(job));
    await eventually(async () => worker.state().jobsHandled === 3, "the redelivered job to be closed");
    expect(gateway.extractions()).toHaveLength(profileCalls);

    expect(await statusOf(book.id)).toBe("completed");
    const second = await listCharacters(db, book.id);
    expect(second.map((c) => [c.id, c.name])).toEqual(first.map((c) => [c.id, c.name]));
    expect(await listFiles(join(env.promptDir, book.id))).toEqual(firstBackups);
    expect(await env.deps.kv.get(characterCacheKey(first[0]!.id))).toBeNull();
    expect(await env.deps.vectorIndex.count(book.id)).toBe(chunkCount(englishText));
    expect(await env.deps.textIndex.count(book.id)).toBe(chunkCount(englishText));
    expect(metricValue(await exposition(env), 'processing_jobs_processed_total{status="completed"}')).toBe(2);
  });

  test("after a re-ingestion in which one character fails and another is no longer found, the backups are exactly the characters rows with their personas", async () => {
    const { gateway, env } = await setup();
    const book = await newBook("The Keeper's Ledger, backups and rows");
    const dir = await mkdtemp(join(tmpdir(), "backup-rows-"));
    defer(() => rm(dir, { recursive: true, force: true }));
    const ingest = async (text: string) => {
      const path = join(dir, `${crypto.randomUUID()}.txt`);
      await writeFile(path, text);
      return runPipeline(env.deps, { bookId: book.id, source: { path } }, TEST_PIPELINE_OPTIONS);
    };
    /** Each characters row's persona, and each backup file's content, by file name. */
    const rowsAndBackups = async () => {
      const rows = await db.query<{ name: string; system_prompt: string }>("SELECT name, system_prompt FROM characters WHERE book_id = $1", [book.id]);
      const files = await listFiles(join(env.promptDir, book.id));
      return {
        rows: Object.fromEntries(rows.map((r) => [`${r.name.toLowerCase()}.md`, `${r.system_prompt}\n`])),
        backups: Object.fromEntries(await Promise.all(files.map(async (f) => [f, await readFile(join(env.promptDir, book.id, f), "utf8")] as const))),
      };
    };
    await ingest(englishText);
    const tobias = (await listCharacters(db, book.id)).find((c) => c.name === "Tobias Finch")!;
    // A reader's session keeps Tobias Finch's row (retired) once an edition no longer has him.
    await db.query("INSERT INTO chat_sessions (user_id, character_id, book_id) VALUES ($1, $2, $3)", [USER_ID, tobias.id, book.id]);

    gateway.override.extract = (input) => (input.character.name === "Clara" ? { status: 400, message: "refused" } : undefined);
    const second = await ingest(englishText.replaceAll("Tobias Finch", "Tobias Quill").replaceAll("Finch", "Quill"));
    const written = second.characters.map((c) => c.character.name);
    expect(written).not.toContain("Clara");
    expect(written).not.toContain("Tobias Finch");

    const { rows, backups } = await rowsAndBackups();
    expect(Object.keys(rows)).toEqual(expect.arrayContaining(["clara.md", "tobias finch.md", "tobias quill.md"]));
    expect(backups).toEqual(rows);
    // Every written character's reported backup is its own file.
    for (const { character, backupPath } of second.characters) expect(backupPath).toBe(join(env.promptDir, book.id, `${character.name.toLowerCase()}.md`));
  });

  test("a character whose profile keeps failing and an embedding batch that keeps failing are skipped, counted, and the book completes", async () => {
    const { gateway, env } = await setup();
    gateway.override.extract = (input) => (input.character.name === "Mr. Pennington" ? { status: 500 } : undefined);
    gateway.override.embeddings = (inputs) => (inputs.some((t) => t.includes("grey opinion")) ? { status: 503 } : undefined);
    const book = await newBook("The Keeper's Ledger, with failures");
    await enqueueJob(env.deps.kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID });
    work(env);
    await untilStatus(book.id, "completed");

    const names = (await listCharacters(db, book.id)).map((c) => c.name);
    expect(names).not.toContain("Mr. Pennington");
    expect(names).toEqual(expect.arrayContaining(["Clara", "Tobias Finch"]));
    // Retried with back-off before being given up: three tries.
    expect(gateway.extractions().filter((e) => e.character.name === "Mr. Pennington")).toHaveLength(3);
    expect(await listFiles(join(env.promptDir, book.id))).not.toContain("mr. pennington.md");

    // The batch is tried again in halves after its retries: only the chunk that fails alone is lost.
    const chunks = chunkCount(englishText);
    const lost = 1;
    expect(await env.deps.textIndex.count(book.id)).toBe(chunks);
    expect(await env.deps.vectorIndex.count(book.id)).toBe(chunks - lost);

    // The worker counts the job just after it marks the book completed.
    const metrics = await eventually(async () => {
      const text = await exposition(env);
      return metricValue(text, 'processing_jobs_processed_total{status="completed"}') === 1 && text;
    }, "the job counted as completed");
    expect(metricValue(metrics, 'processing_items_skipped_total{kind="character"}')).toBe(1);
    expect(metricValue(metrics, 'processing_items_skipped_total{kind="embedding_batch"}')).toBe(1);
    expect(metricValue(metrics, 'processing_characters_processed_total{status="failed"}')).toBe(1);
    expect(metricValue(metrics, 'processing_characters_processed_total{status="completed"}')).toBe(names.length);
    expect(metricValue(metrics, "processing_characters_extracted_total")).toBe(names.length + 1);
    expect(metricValue(metrics, "indexing_embeddings_generated_total")).toBe(chunks - lost);
  });

  test("the book is chunked and embedded while its characters are written, and reaches the indexes only once they are saved", async () => {
    const { gateway, env } = await setup();
    const release = Promise.withResolvers<void>();
    const extracting = Promise.withResolvers<void>();
    const answer = gateway.override;
    gateway.override = {
      ...answer,
      extract: async () => {
        extracting.resolve();
        await release.promise;
        return undefined;
      },
    };
    const book = await newBook("The Keeper's Ledger, side by side");
    const run = runPipeline(env.deps, { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } }, TEST_PIPELINE_OPTIONS);
    const { batchSize } = TEST_PIPELINE_OPTIONS.index! as { batchSize: number };
    const chunks = chunkCount(englishText);
    try {
      await extracting.promise;
      // Every batch is embedded while the profile pass is still waiting for the model...
      await eventually(async () => gateway.embeddingRequests().length === Math.ceil(chunks / batchSize), "every batch to be embedded");
      // ...and nothing of this book is in the indexes yet.
      expect(await env.deps.textIndex.count(book.id)).toBe(0);
      expect(await env.deps.vectorIndex.count(book.id)).toBe(0);
    } finally {
      release.resolve();
    }
    const result = await run;
    expect(result.index).toMatchObject({ chunks, vectors: chunks, documents: chunks });
    expect(await env.deps.textIndex.count(book.id)).toBe(chunks);
    expect(await statusOf(book.id)).toBe("completed");
  });

  test("on a small machine the index preparation starts once the NLP step has found the characters", async () => {
    const { gateway, env } = await setup();
    const book = await newBook("The Keeper's Ledger, on two cores");
    let embeddedDuringNlp: number | undefined;
    const result = await runPipeline(
      env.deps,
      { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } },
      {
        ...TEST_PIPELINE_OPTIONS,
        indexAfterNlp: true,
        onProgress: (event) => {
          if (event.phase === "booknlp" && event.done === 1) embeddedDuringNlp = gateway.embeddingRequests().length;
        },
      },
    );
    expect(embeddedDuringNlp).toBe(0);
    expect(result.index.chunks).toBe(chunkCount(englishText));
    expect(await statusOf(book.id)).toBe("completed");
  });

  test("every step of an ingestion shows progress under its name and has its time, so none is spent unnamed", async () => {
    const { env } = await setup();
    const book = await newBook("The Keeper's Ledger, step by step");
    const shown = new Set<string>();
    const result = await runPipeline(env.deps, { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } }, { ...TEST_PIPELINE_OPTIONS, onProgress: (event) => shown.add(event.phase) });
    const steps = PIPELINE_PHASES.filter((p) => p !== "total");
    expect([...shown].sort()).toEqual([...steps].sort());
    for (const step of PIPELINE_PHASES) expect(result.durations[step]).toBeGreaterThanOrEqual(0);
    const metrics = await exposition(env);
    expect(metricValue(metrics, 'processing_step_duration_seconds_count{step="text"}')).toBeGreaterThan(0);
    expect(metricValue(metrics, 'processing_step_duration_seconds_count{step="guard"}')).toBeGreaterThan(0);
  });

  test("a chunk the full-text index keeps refusing is skipped and counted; the rest of its batch and of the book is indexed", async () => {
    const { env } = await setup();
    const textIndex = env.deps.textIndex;
    env.deps.textIndex = {
      ...textIndex,
      adapter: textIndex.adapter,
      upsert: (bookId, chunks) =>
        chunks.some((c) => c.text.includes("grey opinion")) ? Promise.reject(new Error("index unavailable")) : textIndex.upsert(bookId, chunks),
    };
    const book = await newBook("The Keeper's Ledger, with a stubborn index");
    const result = await runPipeline(env.deps, { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } }, TEST_PIPELINE_OPTIONS);

    const chunks = chunkCount(englishText);
    const lost = 1;
    expect(result.index).toMatchObject({ chunks, vectors: chunks, documents: chunks - lost });
    // A skipped chunk still has its place in the book.
    expect(result.index.chunkEnds).toHaveLength(chunks);
    expect(await textIndex.count(book.id)).toBe(chunks - lost);
    expect(await statusOf(book.id)).toBe("completed");
    const metrics = await exposition(env);
    expect(metricValue(metrics, 'processing_items_skipped_total{kind="chunk_batch"}')).toBe(1);
    // Three tries of the batch, then each piece holding the chunk once, down to the chunk alone.
    const { batchSize } = TEST_PIPELINE_OPTIONS.index! as { batchSize: number };
    expect(metricValue(metrics, 'indexing_errors_total{store="typesense"}')).toBe(3 + Math.ceil(Math.log2(batchSize)));
    expect(metricValue(metrics, 'indexing_chunks_indexed_total{store="typesense"}')).toBe(chunks - lost);
    expect(metricValue(metrics, 'indexing_chunks_indexed_total{store="qdrant"}')).toBe(chunks);
  });

  test("a chunk whose embedding input the gateway refuses is the only one missing from the vector index; the other 63 of its batch are there", async () => {
    const { gateway, env } = await setup();
    const chunkTokens = 32;
    const bad = chunkHolding("grey opinion", chunkTokens);
    const badText = chunkTextToArray(englishText, { chunkTokens })[bad]!.text;
    gateway.override.embeddings = (inputs) => (inputs.includes(badText) ? { status: 400, message: "input refused by the content filter" } : undefined);
    const vectorIndex = env.deps.vectorIndex;
    const written = new Set<number>();
    env.deps.vectorIndex = {
      ...vectorIndex,
      adapter: vectorIndex.adapter,
      upsert: async (bookId, points) => {
        await vectorIndex.upsert(bookId, points);
        for (const p of points) written.add(p.chunkIndex);
      },
    };
    const book = await newBook("The Keeper's Ledger, with one refused chunk");
    // One batch of 64 holds the whole book (50 chunks of 32 tokens).
    const result = await runPipeline(env.deps, { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } }, { ...TEST_PIPELINE_OPTIONS, index: { chunkTokens, batchSize: 64 } });

    const chunks = chunkTextToArray(englishText, { chunkTokens }).length;
    expect(chunks).toBeGreaterThan(32);
    expect(result.index).toMatchObject({ chunks, vectors: chunks - 1, documents: chunks });
    expect([...written].sort((a, b) => a - b)).toEqual(Array.from({ length: chunks }, (_, i) => i).filter((i) => i !== bad));
    expect(await vectorIndex.count(book.id)).toBe(chunks - 1);
    expect(await env.deps.textIndex.count(book.id)).toBe(chunks);
    expect(await statusOf(book.id)).toBe("completed");
    expect(result.skipped).toEqual({ embedding_batch: 1 });
    const metrics = await exposition(env);
    expect(metricValue(metrics, 'processing_items_skipped_total{kind="embedding_batch"}')).toBe(1);
    expect(metricValue(metrics, "indexing_embeddings_generated_total")).toBe(chunks - 1);
    expect(metricValue(metrics, 'indexing_chunks_indexed_total{store="qdrant"}')).toBe(chunks - 1);
  });

  test("an invalid profile answer is asked again once; a character that answers badly twice is skipped", async () => {
    const { gateway, env } = await setup();
    const seen = new Map<string, number>();
    gateway.override.extract = (input) => {
      const n = (seen.get(input.character.name) ?? 0) + 1;
      seen.set(input.character.name, n);
      if (input.character.name === "Clara" && n === 1) return { content: '{"psychology": "missing the voice"}' };
      if (input.character.name === "Tobias Finch") return { content: "Tobias is a fisherman." };
      return undefined;
    };
    const book = await newBook("The Keeper's Ledger, with bad answers");
    await runPipeline(env.deps, { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } }, TEST_PIPELINE_OPTIONS);

    const names = (await listCharacters(db, book.id)).map((c) => c.name);
    expect(names).toContain("Clara");
    expect(names).not.toContain("Tobias Finch");
    expect(seen.get("Clara")).toBe(2);
    expect(seen.get("Tobias Finch")).toBe(2);
  });

  test("the character passes keep CHARACTER_CONCURRENCY model calls in flight, never more", async () => {
    const { gateway, env } = await setup({ env: { CHARACTER_CONCURRENCY: "2" } });
    let inFlight = 0;
    let most = 0;
    gateway.override.extract = async () => {
      most = Math.max(most, ++inFlight);
      // Long enough that the next calls arrive while this one is open.
      await Bun.sleep(20);
      inFlight--;
      return undefined;
    };
    const book = await newBook("The Keeper's Ledger, two at a time");
    await runPipeline(env.deps, { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } }, TEST_PIPELINE_OPTIONS);

    expect(gateway.extractions().length).toBeGreaterThan(2);
    expect(most).toBe(2);
  });

  test("with BOOKNLP_COMMAND set, the characters come from the files the command writes", async () => {
    const { env } = await setup({ env: { BOOKNLP_COMMAND: `${process.execPath} ${join(FIXTURES, "fake-booknlp.ts")}` } });
    const book = await newBook("Emma, as BookNLP saw it");
    await runPipeline(env.deps, { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } }, TEST_PIPELINE_OPTIONS);
    expect((await listCharacters(db, book.id)).map((c) => c.name)).toEqual(["Emma Woodhouse", "Mr. Knightley"]);
    expect(await statusOf(book.id)).toBe("completed");
  });

  test("a BookNLP command that crashes leaves the book failed with the command's error", async () => {
    const { env } = await setup({ env: { BOOKNLP_COMMAND: `${process.execPath} ${join(FIXTURES, "fake-booknlp.ts")} --crash` } });
    const book = await newBook("A book BookNLP chokes on");
    const run = runPipeline(env.deps, { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } }, TEST_PIPELINE_OPTIONS);
    await expect(run).rejects.toBeInstanceOf(BookRejectedError);
    const failed = await getBook(db, book.id);
    expect(failed?.processingStatus).toBe("failed");
    expect((await getIngestion(db, failed!.id))?.lastError).toMatch(/BookNLP exited with code 3: .*No module named 'booknlp'/);
  });
});

describe("books that cannot be ingested", () => {
  test("a file that cannot be downloaded leaves the book failed with the reason, and the job is not retried", async () => {
    const { env } = await setup();
    const book = await newBook("A book that went missing");
    await enqueueJob(env.deps.kv, { book_id: book.id, file_url: books.url("missing.txt"), user_id: USER_ID });
    const worker = work(env);
    await untilStatus(book.id, "failed");
    await eventually(async () => worker.state().jobsHandled === 1, "the job to be settled");

    expect((await getIngestion(db, book.id))?.lastError).toBe("download failed: file_url answered HTTP 404");
    expect(await listCharacters(db, book.id)).toEqual([]);
    const queue = createReliableQueue(env.deps.kv, { maxAttempts: 3 });
    expect([await queue.depth(), await env.deps.kv.llen(queue.keys.inFlight), (await queue.deadLetters()).length]).toEqual([0, 0, 0]);
    expect(metricValue(await exposition(env), 'processing_jobs_processed_total{status="failed"}')).toBe(1);
  });

  test("a file that is not text past its first bytes leaves the book failed", async () => {
    const { env } = await setup();
    const book = await newBook("A binary file");
    const path = join(env.dataDir, "binary.txt");
    await Bun.write(path, Buffer.concat([Buffer.from("A plain beginning.\n".repeat(5000)), Buffer.from([0xff, 0xfe, 0x00, 0x01])]));
    await expect(runPipeline(env.deps, { bookId: book.id, source: { path } }, TEST_PIPELINE_OPTIONS)).rejects.toBeInstanceOf(BookRejectedError);
    expect((await getIngestion(db, book.id))?.lastError).toBe("file is not text: it contains NUL bytes, and not in the pattern of UTF-16 text");
  });

  test.each([
    ["Russian in KOI8-R", () => koi8r(russian.repeat(60)), /^the text is not language: 100% of its Latin letters are accented .*KOI8-R.* \(read as WINDOWS-1252\)$/],
    ["random printable bytes", () => printableNoise(100_000), /^the text is not language: only \d+% of its characters are letters/],
  ])("%s, which decode without an error, leave the book failed with the reason", async (_, bytes, reason) => {
    const { gateway, env } = await setup();
    const book = await newBook("Bytes that decode");
    const path = join(env.dataDir, "garbled.txt");
    await Bun.write(path, bytes());
    await expect(runPipeline(env.deps, { bookId: book.id, source: { path } }, TEST_PIPELINE_OPTIONS)).rejects.toBeInstanceOf(BookRejectedError);
    expect(await statusOf(book.id)).toBe("failed");
    expect((await getIngestion(db, book.id))?.lastError).toMatch(reason);
    expect(gateway.extractions()).toEqual([]);
    expect(await env.deps.textIndex.count(book.id)).toBe(0);
  });

  test.each([
    ["a PDF renamed .txt", Buffer.from("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n", "latin1"), "file is a PDF document, not plain text"],
    ["an EPUB renamed .txt", Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04]), Buffer.from("mimetypeapplication/epub+zip")]), "file is a ZIP archive (an EPUB, DOCX or ZIP), not plain text"],
    ["a Gutenberg file with nothing but its header and licence", Buffer.from(wrapInGutenberg("\n")), "no text of the work is left once the Project Gutenberg header, licence and contents are removed"],
  ])("%s leaves the book failed with the reason and is not retried", async (_, bytes, reason) => {
    const { env } = await setup();
    const book = await newBook("Not a book");
    const path = join(env.dataDir, "not-a-book.txt");
    await Bun.write(path, bytes);
    const failure = await runPipeline(env.deps, { bookId: book.id, source: { path } }, TEST_PIPELINE_OPTIONS).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(BookRejectedError);
    expect((failure as BookRejectedError).reason).toBe(reason);
    expect(await statusOf(book.id)).toBe("failed");
    expect((await getIngestion(db, book.id))?.lastError).toBe(reason);
    expect(await env.deps.textIndex.count(book.id)).toBe(0);
  });
});

/** A story wrapped as Project Gutenberg wraps its files, with the names its header and licence carry. */
function wrapInGutenberg(story: string): string {
  return [
    "The Project Gutenberg eBook of The Keeper's Ledger, by Ada Quill",
    "",
    "Title: The Keeper's Ledger",
    "",
    "Author: Ada Quill",
    "",
    "Produced by: David Widger",
    "",
    "*** START OF THE PROJECT GUTENBERG EBOOK THE KEEPER'S LEDGER ***",
    "",
    "Produced by Dana Proofer and David Widger",
    "",
    "by Ada Quill",
    "",
    story,
    "",
    "*** END OF THE PROJECT GUTENBERG EBOOK THE KEEPER'S LEDGER ***",
    "",
    "Michael Hart, the originator of the Project Gutenberg concept, and Dr. Gregory B. Newby,",
    '"Project Gutenberg is a registered trademark," said Michael Hart.',
    "",
  ].join("\r\n");
}

const russian =
  "Все счастливые семьи похожи друг на друга, каждая несчастливая семья несчастлива по-своему. Всё смешалось в доме Облонских. " +
  "Жена узнала, что муж был в связи с бывшею в их доме француженкою-гувернанткой, и объявила мужу, что не может жить с ним.\n\n";

function koi8r(text: string): Uint8Array {
  const decoder = new TextDecoder("koi8-r");
  const byChar = new Map(Array.from({ length: 256 }, (_, b) => [decoder.decode(new Uint8Array([b])), b]));
  return new Uint8Array([...text].map((c) => byChar.get(c)!));
}

/** Printable ASCII in no order, the same every run. */
function printableNoise(length: number): Uint8Array {
  let seed = 7;
  return Uint8Array.from({ length }, () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return 0x20 + (seed % 95);
  });
}

/** Windows-1252 bytes of a text: what an older download or a Windows editor writes. */
function windows1252(text: string): Uint8Array {
  const decoder = new TextDecoder("windows-1252");
  const high = new Map(Array.from({ length: 128 }, (_, i) => [decoder.decode(new Uint8Array([0x80 + i])), 0x80 + i]));
  return new Uint8Array([...text].map((c) => (c.charCodeAt(0) < 0x80 ? c.charCodeAt(0) : high.get(c)!)));
}

function utf16le(text: string): Uint8Array {
  return new Uint8Array([0xff, 0xfe, ...[...text].flatMap((c) => [c.charCodeAt(0) & 0xff, c.charCodeAt(0) >> 8])]);
}

describe("real book files", () => {
  const story = `${englishText.trim()}\n\n\u201cCaf\u00e9 for the keeper,\u201d said Clara.`;

  test.each([
    ["in Windows-1252 with CRLF lines", windows1252(wrapInGutenberg(story))],
    ["in UTF-16 with a byte order mark", utf16le(wrapInGutenberg(story))],
  ])("a Gutenberg story %s is read, and only the story is analysed, indexed and counted in positions", async (_, bytes) => {
    const { gateway, env } = await setup();
    const book = await newBook("The Keeper's Ledger, as downloaded");
    const path = join(env.dataDir, "pg-ledger.txt");
    await Bun.write(path, bytes);
    const result = await runPipeline(env.deps, { bookId: book.id, source: { path } }, TEST_PIPELINE_OPTIONS);
    expect(await statusOf(book.id)).toBe("completed");
    expect(Buffer.from(await Bun.file(path).bytes())).toEqual(Buffer.from(bytes));

    const names = (await listCharacters(db, book.id)).map((c) => c.name);
    expect(names).toEqual(expect.arrayContaining(["Clara", "Tobias Finch"]));
    for (const name of names) expect(name).not.toMatch(/Widger|Hart|Newby|Quill|Proofer|Gutenberg/);
    expect(JSON.stringify(gateway.extractions())).not.toMatch(/Gutenberg|Widger|Michael Hart/);

    // The index holds the story and only the story (its title line, the header's title, went with the
    // title page): its positions run from its first line to its last.
    const work = story.slice(story.indexOf("A story written for the tests"));
    const chunks = chunkTextToArray(work, { chunkTokens: TEST_PIPELINE_OPTIONS.index!.chunkTokens! });
    expect(result.index.chunks).toBe(chunks.length);
    expect(result.index.chunkEnds.at(-1)).toBe(1);
    expect(await env.deps.textIndex.search(book.id, "Gutenberg")).toEqual([]);
    expect(await env.deps.textIndex.search(book.id, "Widger")).toEqual([]);
    const [first] = await env.deps.textIndex.search(book.id, "story written for the tests");
    expect(first?.text).toStartWith(chunks[0]!.text);
    const [cafe] = await env.deps.textIndex.search(book.id, "Caf\u00e9 keeper");
    expect(cafe?.text).toContain("\u201cCaf\u00e9 for the keeper,\u201d said Clara.");
    expect(cafe?.text).not.toContain("\r");
  });

  test("a UTF-8 story with one invalid byte past its first 64 KiB is read as UTF-8: the byte is replaced, every accent and quote intact", async () => {
    const { env } = await setup();
    const book = await newBook("The Keeper's Ledger, with a stray byte");
    // Long enough that the byte is beyond what a download's first check reads (TEXT_SNIFF_BYTES).
    const text = new TextEncoder().encode(wrapInGutenberg(`${`${englishText.trim()}\n\n`.repeat(20)}\u201cCaf\u00e9 for the keeper,\u201d said Clara.`));
    const at = text.indexOf(0x20, Math.floor(text.length * 0.9));
    expect(at).toBeGreaterThan(64 * 1024);
    const path = join(env.dataDir, "stray-byte.txt");
    // A Windows-1252 "é" pasted into the UTF-8 file.
    await Bun.write(path, Buffer.concat([text.subarray(0, at), Buffer.from([0xe9]), text.subarray(at)]));
    await runPipeline(env.deps, { bookId: book.id, source: { path } }, TEST_PIPELINE_OPTIONS);
    expect(await statusOf(book.id)).toBe("completed");
    const [cafe] = await env.deps.textIndex.search(book.id, "Caf\u00e9 keeper");
    expect(cafe?.text).toContain("\u201cCaf\u00e9 for the keeper,\u201d said Clara.");
    expect(await env.deps.textIndex.search(book.id, "\u00e2\u20ac")).toEqual([]);
  });

  test("a book registered as English whose text is in Arabic script is ingested as the Urdu book it is", async () => {
    const { gateway, env } = await setup();
    gateway.discoveries = [{ seenBy: "زینب", name: "زینب", aliases: [], quotes: ["کوئی تو یاد رکھے"] }];
    const book = await newBook("چراغ والی گلی, registered as English", "English");
    await runPipeline(env.deps, { bookId: book.id, source: { url: books.url(URDU_BOOK) } }, TEST_PIPELINE_OPTIONS);
    expect(await statusOf(book.id)).toBe("completed");
    expect((await listCharacters(db, book.id)).map((c) => c.name)).toEqual(["زینب"]);
    expect(gateway.chatRequests().some((r) => JSON.stringify(r.body).includes("BOOK SAMPLES (JSON):"))).toBe(true);
  });
});

describe("ingesting an Urdu book", () => {
  let gateway: ScriptedGateway;
  let env: IngestEnv;
  let bookId: string;

  beforeAll(async () => {
    ({ gateway, env } = await setup());
    gateway.discoveries = [
      { seenBy: "زینب", name: "زینب", aliases: [], quotes: ["کوئی تو یاد رکھے"] },
      { seenBy: "احمد", name: "احمد", aliases: [], quotes: ["یہ ماسٹر صاحب نے بھیجا ہے"] },
      { seenBy: "رحیم", name: "رحیم چاچا", aliases: ["رحیم بھائی"], quotes: ["بیٹی، تیل مہنگا ہو گیا ہے"] },
      // A hostile or broken model names a character like a path; the alias is how the book calls him.
      { seenBy: "ماسٹر", name: "../../etc/x", aliases: ["ماسٹر صاحب"], quotes: ["رحیم بھائی"] },
      // Named by the model but nowhere in the book: dropped.
      { seenBy: "زینب", name: "شہزادی گل", aliases: [], quotes: [] },
    ];
    const book = await newBook("چراغ والی گلی", "Urdu");
    bookId = book.id;
    await runPipeline(env.deps, { bookId, source: { url: books.url(URDU_BOOK) } }, TEST_PIPELINE_OPTIONS);
  }, 60_000);

  test("characters come from LLM discovery over samples of the book and the book completes", async () => {
    expect(await statusOf(bookId)).toBe("completed");
    const characters = await listCharacters(db, bookId);
    expect(characters.map((c) => c.name).sort()).toEqual(["../../etc/x", "احمد", "رحیم چاچا", "زینب"].sort());
    expect(characters[0]?.name).toBe("زینب");
    expect(characters.find((c) => c.name === "رحیم چاچا")?.aliases).toEqual(["رحیم بھائی"]);
    const discovery = gateway.chatRequests().filter((r) => JSON.stringify(r.body).includes("BOOK SAMPLES (JSON):"));
    expect(discovery.length).toBeGreaterThan(0);
    expect(gateway.extractions().find((e) => e.character.name === "زینب")?.passages.join(" ")).toContain("زینب");
  });

  test("Urdu chunks are in both indexes and found by an Urdu keyword", async () => {
    expect(await env.deps.vectorIndex.count(bookId)).toBe(chunkCount(urduText));
    expect(await env.deps.textIndex.count(bookId)).toBe(chunkCount(urduText));
    const hits = await env.deps.textIndex.search(bookId, "آندھی");
    expect(hits[0]?.text).toContain("آندھی");
  });

  test("a character named ../../etc/x gets a safe backup inside the book's folder", async () => {
    const files = await listFiles(env.promptDir);
    expect(files).toHaveLength(4);
    expect(files.sort()).toEqual([`${bookId}/.._.._etc_x.md`, `${bookId}/احمد.md`, `${bookId}/رحیم چاچا.md`, `${bookId}/زینب.md`].sort());
    expect(await listFiles(join(env.dataDir, "etc"))).toEqual([]);
    const row = (await listCharacters(db, bookId)).find((c) => c.name === "../../etc/x");
    expect(await readFile(join(env.promptDir, bookId, ".._.._etc_x.md"), "utf8")).toBe(`${row?.systemPrompt}\n`);
  });
});

const redis = await probeRedis();
const postgres = await probePostgres();
const liveSkip = !redis.reachable ? redis.reason : !postgres.reachable ? postgres.reason : undefined;
if (liveSkip) console.warn(`ingest: live Postgres + Redis run skipped: ${liveSkip}`);

describe.skipIf(liveSkip !== undefined)("ingesting on Postgres and Redis", () => {
  test("a queued book completes with its characters and chunks", async () => {
    const live = await openLiveStores("ingest", (postgres as { url: string }).url, redis.url);
    const { db: pg, kv } = live;
    const gateway = startScriptedGateway();
    const env = await createIngestEnv({ gateway, books, db: pg, kv });
    const keys = queueKeys(`${live.prefix}processing_queue`);
    const worker = startWorker(env.deps, { keys, minPollMs: 10, maxPollMs: 50, pipeline: TEST_PIPELINE_OPTIONS });
    try {
      const book = await insertBook(pg, { title: "The Keeper's Ledger" });
      await enqueueJob(kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID }, { queue: keys.queue });
      await eventually(async () => (await getBook(pg, book.id))?.processingStatus === "completed", "the book to complete");
      expect((await listCharacters(pg, book.id)).map((c) => c.name)).toEqual(expect.arrayContaining(["Clara", "Tobias Finch"]));
      expect(await env.deps.textIndex.count(book.id)).toBe(chunkCount(englishText));
      expect(await kv.llen(keys.inFlight)).toBe(0);
    } finally {
      await worker.stop();
      gateway.stop();
      await env.close();
      await live.close();
    }
  });
});
