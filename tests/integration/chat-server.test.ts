import { SSE_OPENING } from "../../api/sse.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "../../common/db/migrate.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import { createSession } from "../../common/db/frontend-rows.ts";
import { createMetrics } from "../../common/metrics/index.ts";
import { createEmbeddedTextIndex } from "../../common/text-index/embedded.ts";
import { createEmbeddedVectorIndex } from "../../common/vector/embedded.ts";
import { metricValue } from "../support/app.ts";
import {
  createTestLanguageModel,
  parseSseEvents,
  readSse,
  requestsOfKind,
  scriptGateway,
  seedChatWorld,
  type ChatWorld,
} from "../support/chat.ts";
import { startFakeLlmGateway, type FakeLlmGateway } from "../support/fake-llm-gateway.ts";
import { startFakeReranker, type FakeReranker } from "../support/fake-reranker.ts";
import { startService, type ServiceProcess } from "../support/process.ts";

/**
 * POST /character/chat against the real server process (api/server.ts) on its embedded stores, over
 * real sockets: the data dir is seeded with a book, a character and indexed passages before the
 * server starts, as ingestion would leave it.
 */

describe("POST /character/chat on the server process", () => {
  let gateway: FakeLlmGateway;
  let reranker: FakeReranker;
  let dataDir: string;
  let world: ChatWorld;
  let api: ServiceProcess;

  // The server holds the embedded database, so the sessions the tests use are created before it starts.
  const sessions: string[] = [];
  const SESSIONS = 2;

  beforeAll(async () => {
    gateway = startFakeLlmGateway();
    reranker = startFakeReranker();
    dataDir = await mkdtemp(join(tmpdir(), "chat-server-"));
    const db = await createPgliteDatabase({ dataDir: join(dataDir, "pg") });
    await migrate(db);
    const vector = createEmbeddedVectorIndex({ dir: join(dataDir, "vectors") });
    const text = createEmbeddedTextIndex({ dir: join(dataDir, "text") });
    world = await seedChatWorld(db, { vector, text, llm: createTestLanguageModel(gateway, createMetrics({ defaultMetrics: false })) });
    for (let i = 0; i < SESSIONS; i++) sessions.push((await createSession(db, { userId: world.userId, characterId: world.characterId })).id);
    await Promise.all([vector.close?.(), text.close?.()]);
    await db.close();
    gateway.reset();
    api = await startService("api/server.ts", {
      DATA_DIR: dataDir,
      LLM_GATEWAY_URL: gateway.baseURL,
      RERANK_URL: reranker.url,
      RERANK_API_KEY: "any-key-turns-it-on",
      LOG_LEVEL: "warn",
    });
  }, 60_000);

  afterAll(async () => {
    await api?.stop();
    gateway?.stop();
    reranker?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const chat = (sessionId: string, message: string, signal?: AbortSignal) =>
    fetch(`${api.url}/character/chat`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-user-id": world.userId, "x-api-key": "ignored" },
      body: JSON.stringify({ user_id: world.userId, character_id: world.characterId, book_id: world.bookId, session_id: sessionId, user_message: message }),
      ...(signal ? { signal } : {}),
    });
  const metric = async (series: string) => metricValue(await (await fetch(`${api.url}/metrics`)).text(), series) ?? 0;

  test("streams a grounded reply framed as data lines, and the next message carries it as history", async () => {
    scriptGateway(gateway, { chat: { chunks: ["The ", "Albatross ", "struck\n", "the shoals."] } });
    const res = await chat(sessions[0]!, "What happened to the Albatross?");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const { text, events } = await readSse(res);
    expect(text).toStartWith(SSE_OPENING + 'data: {"token":"The "}\n\ndata: {"token":"Albatross "}\n\ndata: {"token":"struck\\n"}\n\n');
    expect(events.at(-1)).toMatchObject({ done: true, full_response: "The Albatross struck\nthe shoals." });
    expect(requestsOfKind(gateway, "chat")[0]!.messages[0]!.content).toContain("schooner Albatross");
    expect(reranker.rerankRequests().length).toBe(1);

    scriptGateway(gateway);
    await readSse(await chat(sessions[0]!, "And the crew?"));
    expect(requestsOfKind(gateway, "chat")[1]!.messages.slice(1).map((m) => m.content)).toEqual([
      "What happened to the Albatross?",
      "The Albatross struck\nthe shoals.",
      "And the crew?",
    ]);
    expect(await metric('chat_requests_total{outcome="ok"}')).toBe(2);
    expect(await metric('llm_tokens_total{purpose="chat",type="completion"}')).toBeGreaterThan(0);
    expect(await metric('http_requests_total{method="POST",endpoint="/character/chat",status_code="200"}')).toBe(2);
  });

  test("an unknown session is a 404 JSON error before any stream", async () => {
    const res = await chat(crypto.randomUUID(), "Hello?");
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: "session not found" });
  });

  test("a client that hangs up mid-reply cancels the model's request, and the session is free again", async () => {
    const session = sessions[1]!;
    gateway.reset();
    scriptGateway(gateway, { chat: { chunks: Array.from({ length: 500 }, (_, i) => `word${i} `), tokenDelayMs: 5 } });
    const hangUp = new AbortController();
    const res = await chat(session, "Tell me everything.", hangUp.signal);
    const reader = res.body!.getReader();
    // Past the opening comment, to the first token.
    let received = "";
    while (parseSseEvents(received.slice(0, received.lastIndexOf("\n\n") + 2)).length === 0) received += new TextDecoder().decode((await reader.read()).value);
    expect(parseSseEvents(received.slice(0, received.lastIndexOf("\n\n") + 2))[0]).toHaveProperty("token");
    hangUp.abort();

    await gateway.waitForAbort();
    expect(requestsOfKind(gateway, "chat").length).toBe(1);
    expect(gateway.chatRequests().find((r) => (r.body as { stream?: boolean }).stream)?.aborted).toBe(true);
    // The outcome is counted after the lock is released: once it shows, the session is free.
    while ((await metric('chat_requests_total{outcome="aborted"}')) < 1) await Bun.sleep(20);

    scriptGateway(gateway);
    const { events } = await readSse(await chat(session, "The short version, then."));
    expect(events.at(-1)).toMatchObject({ done: true, full_response: "Echo: The short version, then." });
  });

  test("/health, answered by the server's own router, is counted and timed under its method; other methods get the app's 405", async () => {
    const [gets, heads] = [await metric('http_requests_total{method="GET",endpoint="/health",status_code="200"}'), await metric('http_request_duration_seconds_count{method="HEAD",endpoint="/health"}')];
    const res = await fetch(`${api.url}/health`);
    expect([res.status, res.headers.get("content-type"), await res.text()]).toEqual([200, "text/plain; charset=utf-8", "ok"]);
    expect((await fetch(`${api.url}/health`, { method: "HEAD" })).status).toBe(200);
    const refused = await fetch(`${api.url}/health`, { method: "POST" });
    expect([refused.status, refused.headers.get("allow")]).toEqual([405, "GET"]);
    expect(await metric('http_requests_total{method="GET",endpoint="/health",status_code="200"}')).toBe(gets + 1);
    expect(await metric('http_request_duration_seconds_count{method="HEAD",endpoint="/health"}')).toBe(heads + 1);
  });

  test("the documentation lists the chat operation", async () => {
    const doc = (await (await fetch(`${api.url}/docs/json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(doc.paths["/character/chat"] ?? {})).toEqual(["post"]);
  });
});
