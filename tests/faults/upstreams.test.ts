import { afterAll, beforeAll, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { MODEL_FAILED } from "../../api/chat/turn.ts";
import { foldKey, lockKey } from "../../api/chat/session-lock.ts";
import type { Database } from "../../common/db/index.ts";
import { getBook } from "../../common/db/books.ts";
import { getIngestion } from "../../common/db/ingestions.ts";
import { listCharacters } from "../../common/db/characters.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import { createOpenAiLanguageModel } from "../../common/llm/gateway.ts";
import { PASSAGE_OPEN } from "../../common/llm/prompt-format.ts";
import { createReliableQueue, enqueueJob } from "../../common/queue.ts";
import { createHttpReranker } from "../../common/rerank/http.ts";
import { createTypesenseTextIndex } from "../../common/text-index/typesense.ts";
import { createQdrantVectorIndex } from "../../common/vector/qdrant.ts";
import { BookRejectedError } from "../../ingest/errors.ts";
import { runPipeline } from "../../ingest/pipeline.ts";
import { startWorker } from "../../ingest/jobs/queue-consumer.ts";
import { metricValue } from "../support/app.ts";
import { readSse, requestsOfKind, scriptGateway, startEmbeddedChat, type CallKind, type ChatHarness, type EmbeddedChat } from "../support/chat.ts";
import type { ChatBehaviour } from "../support/fake-llm-gateway.ts";
import { openEmbeddedDatabase } from "../support/embedded-stores.ts";
import { closedPort } from "../support/redis.ts";
import {
  ENGLISH_BOOK,
  TEST_PIPELINE_OPTIONS,
  USER_ID,
  createIngestEnv,
  eventually,
  startBookServer,
  startScriptedGateway,
  type BookServer,
} from "../fixtures/ingest/harness.ts";

/**
 * Every upstream failing in every way we know, one at a time, against the real adapters over loopback:
 * the LLM gateway (errors, timeouts, malformed bodies, cut streams), the reranker, and the vector and
 * full-text index endpoints (Qdrant and Typesense wire protocols, answered by servers that fail). Each
 * case must end in its documented outcome, and after every chat turn the session is free and holds
 * exactly the exchanges that ended in `done`.
 */

setDefaultTimeout(120_000);

/** Short limits, so that timeouts are tested in a second rather than in production's minute. */
const TIMEOUT_MS = 800;

type Failure = "500" | "hang" | "garbage" | "closed";

/** A loopback server standing in for Qdrant or Typesense that fails every request the same way. */
function startFailingEndpoint(failure: Exclude<Failure, "closed">) {
  let requests = 0;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      requests++;
      if (failure === "hang") await new Promise((resolve) => request.signal.addEventListener("abort", resolve, { once: true }));
      if (failure === "garbage") return new Response("<html>502 Bad Gateway</html>", { status: 200, headers: { "content-type": "application/json" } });
      return Response.json({ status: { error: "Service internal error: shard unavailable" }, message: "internal error" }, { status: 500 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, requests: () => requests, stop: () => void server.stop(true) };
}

function failingIndexUrl(failure: Failure, servers: { stop(): void }[]): string {
  if (failure === "closed") return `http://127.0.0.1:${closedPort()}`;
  const server = startFailingEndpoint(failure);
  servers.push(server);
  return server.url;
}

const failingVectorIndex = (url: string) => createQdrantVectorIndex({ url, timeoutMs: TIMEOUT_MS });
const failingTextIndex = (url: string) => createTypesenseTextIndex({ url, apiKey: "test-key", timeoutMs: TIMEOUT_MS, maxRetries: 1 });

describe("chat when an upstream fails", () => {
  let chat: EmbeddedChat;
  let db: Database;
  let h: ChatHarness;
  let llm: LanguageModel;
  const servers: { stop(): void }[] = [];

  beforeAll(async () => {
    chat = await startEmbeddedChat();
    ({ h, db } = chat);
    llm = createOpenAiLanguageModel({ baseURL: h.gateway.baseURL, chatModel: "m", embedModel: "e", maxRetries: 1, timeoutMs: TIMEOUT_MS });
  }, 60_000);
  afterAll(async () => {
    for (const server of servers) server.stop();
    await chat?.stop();
  });
  beforeEach(() => h.resetUpstreams());

  let turns = 0;

  /** Runs one turn on a fresh session with `overrides`, then checks the invariants every outcome shares. */
  async function turn(overrides: Parameters<ChatHarness["appWith"]>[0] = {}) {
    const session = await h.newSession();
    const app = await h.appWith({ llm, ...overrides });
    // A new message each time: a rewrite cached from an earlier turn would hide the rewrite's failure.
    const { events } = await readSse(await app.postJson("/character/chat", h.body(session, `Tell me of the storm and the Albatross (${++turns}).`)));
    await app.settle();
    const last = events.at(-1)!;
    const saved = "done" in last ? 1 : 0;
    const [row] = await db.query<{ message_count: number }>("SELECT message_count FROM chat_sessions WHERE id = $1", [session]);
    const messages = await db.query<{ role: string }>("SELECT role FROM messages WHERE session_id = $1", [session]);
    expect({ count: row!.message_count, messages: messages.length }).toEqual({ count: saved, messages: 2 * saved });
    expect([await h.kv.get(lockKey(session)), await h.kv.get(foldKey(session))]).toEqual([null, null]);
    const tokens = events.flatMap((e) => ("token" in e ? [e.token] : []));
    if ("done" in last) expect(last.full_response).toBe(tokens.join(""));
    return { last, tokens };
  }

  const systemPrompt = () => requestsOfKind(h.gateway, "chat")[0]?.messages[0]?.content ?? "";

  describe("the language model", () => {
    const replyFails: [string, ChatBehaviour][] = [
      ["a 500 on every try", { status: 500 }],
      ["a 503 on every try", { status: 503, message: "overloaded" }],
      ["no answer at all (timeout)", { hang: true }],
      ["a body that is not JSON", { raw: "<html>gateway error</html>", contentType: "text/html" }],
      ["a stream cut after two tokens", { chunks: ["It ", "was ", "a ", "dark ", "night."], dropAfterChunks: 2 }],
      ["an error event mid-stream", { chunks: ["It ", "was ", "a ", "dark ", "night."], errorEventAfterChunks: 3 }],
      ["a stream that goes quiet mid-reply (idle timeout)", { chunks: ["It ", "was ", "a "], tokenDelayMs: TIMEOUT_MS * 3 }],
    ];
    test.each(replyFails)("the reply failing with %s ends in one 502 event; nothing is saved and the session is free", async (_, behaviour) => {
      scriptGateway(h.gateway, { chat: behaviour });
      const { last } = await turn();
      expect(last).toEqual({ error: MODEL_FAILED, code: 502 });
    });

    const sideFails: [string, CallKind, ChatBehaviour][] = [
      ["the query rewrite answering 500", "rewrite", { status: 500 }],
      ["the query rewrite timing out", "rewrite", { hang: true }],
      ["the query rewrite answering prose instead of JSON", "rewrite", { content: "Sure! Here are some queries you could use." }],
      ["the query rewrite answering a body that is not JSON", "rewrite", { raw: "not json at all", contentType: "text/plain" }],
    ];
    test.each(sideFails)("%s degrades to searching with the reader's own words: the reply is saved", async (_, kind, behaviour) => {
      scriptGateway(h.gateway, { [kind]: behaviour });
      const { last } = await turn();
      expect(last).toMatchObject({ done: true });
      expect(requestsOfKind(h.gateway, "rewrite").length).toBeGreaterThan(0);
      expect(systemPrompt()).toContain(PASSAGE_OPEN);
    });

    test("embeddings failing degrade to keyword search: the reply is saved and grounded", async () => {
      h.gateway.onEmbeddings(() => ({ status: 500 }));
      const { last } = await turn();
      expect(last).toMatchObject({ done: true });
      expect(systemPrompt()).toContain("Albatross");
    });
  });

  test.each(["500", "hang", "garbage", "closed"] as const)("the reranker failing (%s) degrades to rank fusion: the reply is saved and grounded", async (failure) => {
    const url = failingIndexUrl(failure, servers);
    const { last } = await turn({ reranker: createHttpReranker({ url, timeoutMs: TIMEOUT_MS, maxRetries: 1 }) });
    expect(last).toMatchObject({ done: true });
    expect(systemPrompt()).toContain("Albatross");
  });

  test.each(["500", "hang", "garbage", "closed"] as const)("the vector index endpoint failing (%s) degrades to keyword search", async (failure) => {
    const { last } = await turn({ vectorIndex: failingVectorIndex(failingIndexUrl(failure, servers)) });
    expect(last).toMatchObject({ done: true });
    expect(systemPrompt()).toContain("Albatross");
  });

  test.each(["500", "hang", "garbage", "closed"] as const)("the full-text index endpoint failing (%s) degrades to vector search", async (failure) => {
    const { last } = await turn({ textIndex: failingTextIndex(failingIndexUrl(failure, servers)) });
    expect(last).toMatchObject({ done: true });
    expect(systemPrompt()).toContain(PASSAGE_OPEN);
  });

  test("both index endpoints failing leave the character answering from its persona alone: the reply is saved", async () => {
    const { last } = await turn({
      vectorIndex: failingVectorIndex(failingIndexUrl("500", servers)),
      textIndex: failingTextIndex(failingIndexUrl("closed", servers)),
    });
    expect(last).toMatchObject({ done: true, sources: [], sources_missing: "search_failed" });
    expect(systemPrompt()).toContain("No passages of the book were found");
  });

  test("the summary fold failing keeps the previous summary and never delays or fails the reply", async () => {
    const session = await h.newSession({ summary: "They met at the lamp." });
    scriptGateway(h.gateway, { summary: { status: 500 } });
    const app = await h.appWith({ llm });
    for (let i = 0; i < 6; i++) {
      const { events } = await readSse(await app.postJson("/character/chat", h.body(session, `Message ${i}`)));
      expect(events.at(-1)).toMatchObject({ done: true });
      await app.settle();
    }
    expect(requestsOfKind(h.gateway, "summary").length).toBeGreaterThan(0);
    const [row] = await db.query<{ summary: string; message_count: number }>("SELECT (SELECT summary FROM chat_session_summaries WHERE session_id = s.id) AS summary, message_count FROM chat_sessions s WHERE id = $1", [session]);
    expect(row).toEqual({ summary: "They met at the lamp.", message_count: 6 });
    expect([await h.kv.get(lockKey(session)), await h.kv.get(foldKey(session))]).toEqual([null, null]);
  });
});

describe("ingestion when an upstream fails", () => {
  let books: BookServer;
  /** One embedded database for the describe's books (a new one per test is an initdb of seconds); each test reads only its own book. */
  let db: Database;
  const servers: { stop(): void }[] = [];
  beforeAll(async () => {
    books = startBookServer();
    db = await openEmbeddedDatabase();
  }, 60_000);
  afterAll(async () => {
    for (const server of servers) server.stop();
    books.stop();
    await db?.close();
  });

  async function ingestWith(setup: { failure?: Failure; store?: "vector" | "text"; gatewayFails?: "extract" | "persona" | "embeddings"; behaviour?: ChatBehaviour }) {
    const gateway = startScriptedGateway();
    const env = await createIngestEnv({ gateway, books, db });
    env.deps.llm = createOpenAiLanguageModel({ baseURL: gateway.baseURL, chatModel: "m", embedModel: "e", maxRetries: 0, timeoutMs: TIMEOUT_MS });
    if (setup.store === "vector") env.deps.vectorIndex = failingVectorIndex(failingIndexUrl(setup.failure!, servers));
    if (setup.store === "text") env.deps.textIndex = failingTextIndex(failingIndexUrl(setup.failure!, servers));
    if (setup.gatewayFails === "extract") gateway.override.extract = () => setup.behaviour!;
    if (setup.gatewayFails === "persona") gateway.override.persona = () => setup.behaviour!;
    if (setup.gatewayFails === "embeddings") gateway.override.embeddings = () => setup.behaviour as { status: number };
    const book = await insertBook(env.deps.db, { title: "Failing upstreams" });
    let error: unknown;
    try {
      await runPipeline(env.deps, { bookId: book.id, source: { url: books.url(ENGLISH_BOOK) } }, TEST_PIPELINE_OPTIONS);
    } catch (err) {
      error = err;
    }
    const row = await getBook(env.deps.db, book.id);
    const characters = await listCharacters(env.deps.db, book.id);
    const metrics = await env.deps.metrics.registry.metrics();
    gateway.stop();
    await env.close();
    return { error, status: row?.processingStatus, characters, metrics };
  }

  test.each([
    ["a 500", { status: 500 }],
    ["a timeout", { hang: true }],
    ["a body that is not JSON", { raw: "<html>oops</html>", contentType: "text/html" }],
    ["JSON that is not a profile", { content: JSON.stringify({ nope: true }) }],
  ] as [string, ChatBehaviour][])("every profile call failing with %s fails the attempt, to be retried: the book is not marked failed yet", async (_, behaviour) => {
    const result = await ingestWith({ gatewayFails: "extract", behaviour });
    expect(result.error).toBeInstanceOf(Error);
    expect(result.error).not.toBeInstanceOf(BookRejectedError);
    expect(result.status).toBe("processing");
    expect(result.characters).toEqual([]);
  });

  test.each(["500", "hang", "garbage", "closed"] as const)("the vector index endpoint failing (%s) fails the attempt, to be retried", async (failure) => {
    const result = await ingestWith({ store: "vector", failure });
    expect(result.error).toBeInstanceOf(Error);
    expect(result.error).not.toBeInstanceOf(BookRejectedError);
    expect(result.status).toBe("processing");
  });

  test.each(["500", "hang", "garbage", "closed"] as const)("the full-text index endpoint failing (%s) fails the attempt, to be retried", async (failure) => {
    const result = await ingestWith({ store: "text", failure });
    expect(result.error).toBeInstanceOf(Error);
    expect(result.error).not.toBeInstanceOf(BookRejectedError);
    expect(result.status).toBe("processing");
  });

  test("embeddings failing for every batch still put every chunk in the full-text index, and the vector index's emptiness fails the attempt", async () => {
    const result = await ingestWith({ gatewayFails: "embeddings", behaviour: { status: 500 } });
    expect(result.error).toBeInstanceOf(Error);
    expect(String((result.error as Error).message)).toContain("no chunk reached the vector index");
    expect(metricValue(result.metrics, 'processing_items_skipped_total{kind="embedding_batch"}')).toBeGreaterThan(0);
  });

  test("a worker whose vector index stays down retries the job MAX_ATTEMPTS times, then dead-letters it and marks the book failed, leaving nothing in flight", async () => {
    const gateway = startScriptedGateway();
    const env = await createIngestEnv({ gateway, books, db, env: { MAX_ATTEMPTS: "2" } });
    env.deps.vectorIndex = failingVectorIndex(failingIndexUrl("500", servers));
    try {
      const book = await insertBook(env.deps.db, { title: "Never indexed" });
      const { job } = await enqueueJob(env.deps.kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID });
      const worker = startWorker(env.deps, { minPollMs: 10, maxPollMs: 50, pipeline: TEST_PIPELINE_OPTIONS });
      await eventually(async () => (await getBook(env.deps.db, book.id))?.processingStatus === "failed", "the book to fail");
      await worker.stop();
      expect((await getIngestion(env.deps.db, book.id))?.lastError).toMatch(/^gave up after 2 attempts: /);
      const queue = createReliableQueue(env.deps.kv, { maxAttempts: 2 });
      expect((await queue.deadLetters()).map((d) => d.job?.job_id)).toEqual([job.job_id]);
      expect([await queue.depth(), await env.deps.kv.llen(queue.keys.inFlight)]).toEqual([0, 0]);
      expect(await env.deps.kv.get(`${queue.keys.leasePrefix}${job.job_id}`)).toBeNull();
    } finally {
      gateway.stop();
      await env.close();
    }
  });
});
