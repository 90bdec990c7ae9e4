// The API on Deno and on workerd, end to end on the production drivers: Postgres through the Neon
// driver (over the WebSocket-to-TCP bridge), Redis through the Upstash REST bridge, Qdrant and
// Typesense through the index stand-in, the fake LLM gateway, and the Bun ingest worker taking the
// jobs the edge API queues and indexing the books in the same stand-in.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { getBook } from "../../common/db/books.ts";
import { listCharacters, saveCharacters } from "../../common/db/characters.ts";
import { createSession, insertBook } from "../../common/db/frontend-rows.ts";
import type { Database } from "../../common/db/index.ts";
import { createPostgresDatabase } from "../../common/db/postgres.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { parseSseEvents } from "../support/chat.ts";
import { rawExchange } from "../support/raw-http.ts";
import { EDGE_RUNTIMES, edgeRuntimeMissing, startEdgeRuntime, type EdgeService } from "../support/edge-runtime.ts";
import { startScriptedGateway, type ScriptedGateway } from "../fixtures/ingest/harness.ts";
import { startFakeLlmGateway, type ChatCompletionRequest, type FakeLlmGateway } from "../support/fake-llm-gateway.ts";
import { startIndexStandIn, type IndexStandIn } from "../../dev/edge/index-stand-in.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";
import { startService, REPO_ROOT, type ServiceProcess } from "../support/process.ts";
import { probeRedis, testRedisUrl } from "../support/redis.ts";
import { startUpstashBridge, type UpstashBridge } from "../../dev/edge/upstash-bridge.ts";
import { startNeonBridge, type NeonBridge } from "../../dev/edge/neon-bridge.ts";

setDefaultTimeout(180_000);

const BOOK = readFileSync(join(REPO_ROOT, "tests", "fixtures", "ingest", "the-keepers-ledger.txt"));
/** A Redis database of its own, so the fixed `processing_queue` key is not shared with other suites. */
const REDIS_DB = 11;
const SLOW_REPLY = { chunks: ["The ", "lamp ", "is ", "lit."], tokenDelayMs: 400 };
/**
 * The session lock's expiry here (SESSION_LOCK_TTL_SECONDS): SPEC's 30 s shortened, so that a reply can
 * outlive it in seconds. Renewed every second while a reply streams.
 */
const LOCK_TTL_SECONDS = 3;
/**
 * A reply outlasting the session lock's expiry: its fourth token comes 10 s in, over three expiries
 * after the lock was taken, its last 12.5 s in (gaps under the fake gateway's 10 s idle cut-off, as a
 * model streaming steadily).
 */
const LONG_REPLY = { chunks: ["The ", "tide ", "turned ", "at ", "dusk."], tokenDelayMs: 2_500 };
const TOKENS_PAST_LOCK_EXPIRY = 4;
/** The API's SSE keep-alive interval here: under half of LONG_REPLY's gaps, so each gap holds a comment even when it goes out a third late. */
const KEEPALIVE_SECONDS = 1;

const postgres = await probePostgres();
const redis = await probeRedis();
const unreachable = !postgres.reachable ? `PostgreSQL unreachable (${postgres.reason})` : !redis.reachable ? `Redis unreachable (${redis.reason})` : undefined;
if (unreachable) console.log(`skipping the edge runtime suites: ${unreachable}`);

interface World {
  testDb: TestDatabase;
  db: Database;
  /** The Redis the Upstash bridge serves, read directly. */
  kv: KeyValueStore;
  neon: NeonBridge;
  upstash: UpstashBridge;
  /** The edge API's model. */
  gateway: FakeLlmGateway;
  /** The worker's model, answering the profile and persona passes as the pipeline expects. */
  ingestGateway: ScriptedGateway;
  /** Qdrant and Typesense (the servers cannot be installed here): the worker indexes into it, the edge API searches it. */
  indexes: IndexStandIn;
  files: ReturnType<typeof Bun.serve>;
  worker: ServiceProcess;
  env: Record<string, string>;
}
let world: World | undefined;

beforeAll(async () => {
  if (unreachable || !postgres.reachable) return;
  const testDb = await createTestDatabase(postgres.url);
  const redisUrl = `${testRedisUrl.replace(/\/\d*$/, "")}/${REDIS_DB}`;
  const neon = startNeonBridge();
  const upstash = await startUpstashBridge({ redisUrl });
  const gateway = startFakeLlmGateway();
  const ingestGateway = startScriptedGateway();
  const indexes = startIndexStandIn();
  const indexEnv = {
    QDRANT_URL: indexes.qdrant.url,
    QDRANT_API_KEY: indexes.qdrant.apiKey,
    TYPESENSE_URL: indexes.typesense.url,
    TYPESENSE_API_KEY: indexes.typesense.apiKey,
  };
  const files = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(BOOK, { headers: { "content-type": "text/plain; charset=utf-8" } }) });
  const filesHost = `127.0.0.1:${files.port}`;
  // The worker is a Bun container: Postgres and Redis over TCP, the indexes the edge API searches. It applies the migrations.
  const worker = await startService(
    "ingest/worker.ts",
    { DATABASE_URL: testDb.url, REDIS_URL: redisUrl, LLM_GATEWAY_URL: ingestGateway.baseURL, FILE_URL_ALLOWED_HOSTS: filesHost, HOST: "127.0.0.1", ...indexEnv },
    90_000,
    "METRICS_PORT",
  );
  const db = createPostgresDatabase({ url: testDb.url });
  const kv = createRedisKeyValueStore({ url: redisUrl });
  const env = {
    DATABASE_URL: testDb.url,
    NEON_WS_PROXY: neon.address,
    // workerd sends single statements to the bridge's Neon SQL endpoint; Deno keeps one pool of connections.
    NEON_HTTP_ENDPOINT: neon.httpEndpoint,
    UPSTASH_REDIS_REST_URL: upstash.url,
    UPSTASH_REDIS_REST_TOKEN: upstash.token,
    LLM_GATEWAY_URL: gateway.baseURL,
    ...indexEnv,
    FILE_URL_ALLOWED_HOSTS: filesHost,
    SSE_KEEPALIVE_SECONDS: String(KEEPALIVE_SECONDS),
    SESSION_LOCK_TTL_SECONDS: String(LOCK_TTL_SECONDS),
  };
  world = { testDb, db, kv, neon, upstash, gateway, ingestGateway, indexes, files, worker, env };
});

afterAll(async () => {
  if (!world) return;
  await world.worker.stop();
  await world.db.close();
  await world.kv.close();
  await Promise.allSettled([world.neon.stop(), world.upstash.stop(), world.gateway.stop(), world.ingestGateway.stop(), world.indexes.close(), world.files.stop(true)]);
  await world.testDb.drop();
});

async function chatSession(db: Database) {
  const book = await insertBook(db, { title: "The Keeper's Ledger", processingStatus: "completed" });
  const { characters } = await saveCharacters(db, book.id, [{ name: "Elinor Vance", description: "The keeper's daughter.", systemPrompt: "I am Elinor Vance.", importance: 10 }]);
  const userId = crypto.randomUUID();
  const session = await createSession(db, { userId, characterId: characters[0]!.id });
  return { session_id: session.id, user_id: userId, character_id: characters[0]!.id, book_id: book.id };
}

const post = (api: EdgeService, path: string, body: unknown) =>
  fetch(`${api.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

/** For each token event of a stream, the `: keep-alive` comments since the event before it (or the stream's start). */
function keepAlivesBeforeEachToken(text: string): number[] {
  const counts: number[] = [];
  let quiet = 0;
  for (const block of text.split("\n\n")) {
    if (block === ": keep-alive") quiet++;
    else if (block.startsWith("data: ")) {
      if ("token" in (JSON.parse(block.slice("data: ".length)) as object)) counts.push(quiet);
      quiet = 0;
    }
  }
  return counts;
}

/** A response's SSE text read as it arrives: up to a point (the stream left open), or to its end. */
function streamText(res: Response) {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const readWhile = async (more: (text: string) => boolean) => {
    while (more(text)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    return text;
  };
  return { until: (enough: (text: string) => boolean) => readWhile((t) => !enough(t)), toEnd: () => readWhile(() => true) };
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await Bun.sleep(200);
  }
}

for (const runtime of EDGE_RUNTIMES) {
  const missing = edgeRuntimeMissing(runtime);
  if (missing) console.log(`skipping the API on ${runtime}: ${missing}`);
  describe.skipIf(Boolean(unreachable || missing))(`the API on ${runtime}`, () => {
    let api: EdgeService;
    /** The book the worker ingested from this runtime's submission. */
    let ingestedBookId: string | undefined;
    beforeAll(async () => {
      api = await startEdgeRuntime(runtime, world!.env);
    });
    afterAll(async () => {
      await api?.stop();
    });

    test("answers /health and serves the API's metrics", async () => {
      const health = await fetch(`${api.url}/health`);
      expect([health.status, await health.text()]).toEqual([200, "ok"]);
      const metrics = await (await fetch(`${api.url}/metrics`)).text();
      expect(metrics).toContain("# TYPE http_requests_total counter");
      expect(metrics).toMatch(/^http_requests_total\{[^}]*endpoint="\/health"[^}]*\} [1-9]/m);
      // The isolate has no process to describe: no process metrics.
      expect(metrics).not.toContain("process_cpu_seconds_total");
    });

    test("an HTTP/1.0 request with no Host gets no error page: Deno serves it as addressed to its listening address, workerd refuses it itself", async () => {
      const answer = await rawExchange(api.url, "GET /health HTTP/1.0\r\n\r\n");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1]);
      const body = answer.slice(answer.indexOf("\r\n\r\n") + 4);
      expect([status, body]).toEqual(runtime === "deno" ? [200, "ok"] : [400, "Bad Request"]);
    });

    test("serves the OpenAPI document and Swagger UI's files from its own bundle, and no chat page", async () => {
      const document = (await (await fetch(`${api.url}/docs/json`)).json()) as { paths: Record<string, unknown> };
      expect(Object.keys(document.paths)).toContain("/character/chat");
      const script = await fetch(`${api.url}/docs/assets/swagger-ui-bundle.js`);
      expect([script.status, script.headers.get("content-type")]).toEqual([200, "text/javascript; charset=utf-8"]);
      expect((await script.text()).length).toBeGreaterThan(1_000_000);
      expect((await fetch(`${api.url}/playground`)).status).toBe(404);
    });

    test("queues a submitted book for the Bun worker, which ingests it", async () => {
      const book = await insertBook(world!.db, { title: `Ledger on ${runtime}` });
      const res = await post(api, "/character/processing", { book_id: book.id, file_url: `http://127.0.0.1:${world!.files.port}/ledger.txt`, user_id: crypto.randomUUID() });
      expect(res.status).toBe(202);
      expect(((await res.json()) as { status: string }).status).toBe("accepted");
      const status = await waitFor("the worker to finish the book", async () => {
        const row = await getBook(world!.db, book.id);
        return row?.processingStatus === "completed" || row?.processingStatus === "failed" ? row.processingStatus : undefined;
      });
      const [ingestion] = await world!.db.query<{ last_error: string | null }>("SELECT last_error FROM book_ingestions WHERE book_id = $1", [book.id]);
      expect({ status, error: ingestion?.last_error ?? null }, world!.worker.logs().slice(-4000)).toEqual({ status: "completed", error: null });
      ingestedBookId = book.id;
    });

    test("a chat on the ingested book sends the model passages the API retrieved from the indexes the worker filled", async () => {
      if (!ingestedBookId) throw new Error("the book of the test before was not ingested");
      const bookId = ingestedBookId;
      const { indexes, gateway, db } = world!;
      const documents = indexes.typesense.documents(bookId);
      expect(documents.length).toBeGreaterThan(1);
      expect(indexes.qdrant.points(bookId)).toHaveLength(documents.length);
      const [character] = await listCharacters(db, bookId);
      if (!character) throw new Error("the worker saved no character for the book");
      const userId = crypto.randomUUID();
      const session = await createSession(db, { userId, characterId: character.id });
      gateway.onChat((request) =>
        request.stream
          ? { chunks: ["The ", "ledger ", "was ", "right."] }
          : { content: JSON.stringify({ narrative_query: "the inspector wiping his spectacles over the complaint", keyword_query: "Pennington spectacles complaint" }) },
      );
      const searchesBefore = { vector: indexes.qdrant.calls("query_points").length, text: indexes.typesense.calls("searchCollection").length };

      const res = await post(api, "/character/chat", { session_id: session.id, user_id: userId, character_id: character.id, book_id: bookId, user_message: "What did the inspector say?" });
      const done = parseSseEvents(await res.text()).at(-1) as { done?: boolean; full_response?: string; sources?: { chunk_index: number }[] };
      expect(done).toMatchObject({ done: true, full_response: "The ledger was right." });

      // Both searches went to the indexes, for this book's collection.
      const searched = indexes.qdrant.calls("query_points").slice(searchesBefore.vector).map((e) => e.operation?.params.collection_name);
      const keywordSearched = indexes.typesense.calls("searchCollection").slice(searchesBefore.text).map((e) => e.operation?.params.collectionName);
      expect([searched, keywordSearched]).toEqual([[bookId], [bookId]]);
      // The best passage, as the worker stored it, is in the prompt the model streamed its reply from.
      const best = documents.find((d) => d.chunk_index === done.sources?.[0]?.chunk_index);
      expect(String(best?.text)).toContain("spectacles");
      const streamed = gateway.chatRequests().find((r) => (r.body as ChatCompletionRequest).stream)?.body as ChatCompletionRequest;
      expect(streamed.messages.map((m) => m.content).join("\n")).toContain(String(best!.text).trim());
      expect(indexes.problems()).toEqual([]);
      gateway.reset();
    });

    test("streams a reply, refuses a second message meanwhile with 429, and saves the exchange", async () => {
      const chat = await chatSession(world!.db);
      world!.gateway.onChat((request) => (request.stream ? SLOW_REPLY : { content: JSON.stringify({ narrative_query: "lamp", keyword_query: "lamp" }) }));
      const first = await post(api, "/character/chat", { ...chat, user_message: "Is the lamp lit?" });
      expect(first.headers.get("content-type")).toStartWith("text/event-stream");
      const stream = streamText(first);
      // Read until the first token: the turn holds the session's lock from here to its save.
      await stream.until((text) => text.includes('"token"'));
      const second = await post(api, "/character/chat", { ...chat, user_message: "And the ledger?" });
      expect(parseSseEvents(await second.text())).toEqual([{ error: "another reply is in progress for this session", code: 429 }]);
      const events = parseSseEvents(await stream.toEnd());
      expect(events.filter((e) => "token" in e).map((e) => (e as { token: string }).token).join("")).toBe("The lamp is lit.");
      expect(events.at(-1)).toMatchObject({ done: true, full_response: "The lamp is lit." });
      const saved = await world!.db.query<{ role: string; content: string }>("SELECT role, content FROM messages WHERE session_id = $1 ORDER BY created_at, role DESC", [chat.session_id]);
      expect(saved.map((m) => [m.role, m.content])).toEqual([
        ["user", "Is the lamp lit?"],
        ["assistant", "The lamp is lit."],
      ]);
      world!.gateway.reset();
    });

    test("a client that hangs up mid-reply cancels the model's request, frees the session and saves nothing", async () => {
      const chat = await chatSession(world!.db);
      const lockKey = `chat:lock:${chat.session_id}`;
      world!.gateway.onChat((request) => (request.stream ? { chunks: Array.from({ length: 200 }, (_, i) => `word${i} `), tokenDelayMs: 50 } : { content: JSON.stringify({ narrative_query: "lamp", keyword_query: "lamp" }) }));
      const hangUp = new AbortController();
      const res = await fetch(`${api.url}/character/chat`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...chat, user_message: "Tell me everything." }),
        signal: hangUp.signal,
      });
      await streamText(res).until((text) => text.includes('"token"'));
      expect(await world!.kv.get(lockKey)).not.toBeNull();
      hangUp.abort();

      await world!.gateway.waitForAbort();
      expect(world!.gateway.chatRequests().find((r) => (r.body as { stream?: boolean }).stream)?.aborted).toBe(true);
      await waitFor("the session's lock to be released", async () => ((await world!.kv.get(lockKey)) === null ? true : undefined), 30_000);
      expect(await world!.db.query("SELECT role FROM messages WHERE session_id = $1", [chat.session_id])).toEqual([]);
      const [session] = await world!.db.query<{ message_count: number }>("SELECT message_count FROM chat_sessions WHERE id = $1", [chat.session_id]);
      expect(session?.message_count).toBe(0);
      world!.gateway.reset();
    });

    test("a reply streaming past the session lock's expiry keeps the session locked to its end with keep-alives between its tokens, then saves it", async () => {
      const chat = await chatSession(world!.db);
      world!.gateway.onChat((request) => (request.stream ? LONG_REPLY : { content: JSON.stringify({ narrative_query: "tide", keyword_query: "tide" }) }));
      const first = await post(api, "/character/chat", { ...chat, user_message: "When did the tide turn?" });
      const stream = streamText(first);
      // Four tokens in, the lock as first taken has expired: only its renewals keep the session busy.
      await stream.until((text) => parseSseEvents(text.slice(0, text.lastIndexOf("\n\n") + 2)).filter((e) => "token" in e).length >= TOKENS_PAST_LOCK_EXPIRY);
      const second = await post(api, "/character/chat", { ...chat, user_message: "And then?" });
      expect(parseSseEvents(await second.text())).toEqual([{ error: "another reply is in progress for this session", code: 429 }]);
      const text = await stream.toEnd();
      expect(parseSseEvents(text).at(-1)).toMatchObject({ done: true, full_response: "The tide turned at dusk." });
      // Each wait for a token carried keep-alive comments (every KEEPALIVE_SECONDS of quiet).
      const keepAlives = keepAlivesBeforeEachToken(text);
      expect(keepAlives).toHaveLength(LONG_REPLY.chunks.length);
      expect(keepAlives.filter((n) => n === 0), `keep-alives before each token: ${keepAlives}`).toEqual([]);
      const saved = await waitFor("the exchange to be saved", async () => {
        const rows = await world!.db.query<{ role: string }>("SELECT role FROM messages WHERE session_id = $1", [chat.session_id]);
        return rows.length === 2 ? rows : undefined;
      });
      expect(saved.map((m) => m.role).sort()).toEqual(["assistant", "user"]);
      world!.gateway.reset();
    });

    test("answers 404 for a session that does not exist", async () => {
      const chat = await chatSession(world!.db);
      const res = await post(api, "/character/chat", { ...chat, session_id: crypto.randomUUID(), user_message: "Hello?" });
      expect([res.status, await res.json()]).toEqual([404, { error: "session not found" }]);
    });

    test("logs plain text lines, as SPEC says, with no JSON unless LOG_FORMAT asks for it", async () => {
      const logs = api.logs();
      expect(logs).toMatch(/Z INFO {2}chat turn component=chat session_id=[0-9a-f-]{36} /);
      if (runtime === "deno") expect(logs).toMatch(/Z INFO {2}api listening runtime=deno address=127\.0\.0\.1:\d+ url=/);
      expect(logs).not.toContain('"msg":');
    });
  });
}
