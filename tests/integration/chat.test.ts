import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { SAVE_ATTEMPTS, previewOf } from "../../api/chat/save.ts";
import { MODEL_FAILED, REPLY_FAILED, SAVE_FAILED, SESSION_BUSY } from "../../api/chat/turn.ts";
import { CHARACTER_NOT_IN_BOOK } from "../../api/chat/refusal.ts";
import { lastPageKey } from "../../api/chat/rewrite-ahead.ts";
import { SSE_OPENING } from "../../api/sse.ts";
import { bookCacheKey, characterCacheKey, sessionCacheKey } from "../../common/contract/cache-keys.ts";
import { createDatabase } from "../../common/db/create.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { DatabaseError, type Database, type Row } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { getSessionWithRecentMessages, MESSAGE_COUNT_MAX } from "../../common/db/sessions.ts";
import { CONVERSATION_WINDOW_MESSAGES } from "../../common/prompt/conversation.ts";
import { KvError, type KeyValueStore } from "../../common/kv/index.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { buildChatSystemPrompt } from "../../common/prompt/chat.ts";
import { buildRewriteMessages, rewriteCacheKey, WHOLE_BOOK_REWRITE } from "../../common/prompt/rewrite.ts";
import { NO_SUMMARY_SECTION, PASSAGES_HEADING, SUMMARY_HEADING } from "../../common/llm/prompt-format.ts";
import type { ChatDoneEvent, ChatEvent } from "../../common/contract/schemas.ts";
import { metricValue } from "../support/app.ts";
import {
  BOOK_TITLE,
  CHARACTER_DESCRIPTION,
  CHARACTER_NAME,
  CHARACTER_PROFILE,
  PASSAGES,
  PERSONA,
  STORED_PREFERENCES,
  lastUserContent,
  parseSseEvents,
  readSse,
  requestsOfKind,
  scriptGateway,
  startChatHarness,
  startEmbeddedChat,
  type ChatHarness,
  type EmbeddedChat,
} from "../support/chat.ts";
import { openEmbeddedStores } from "../support/embedded-stores.ts";
import { createTestDatabase, probePostgres } from "../support/postgres.ts";
import { prefixedKeyValueStore } from "../support/recording.ts";
import { deleteKeysWithPrefix, probeRedis, uniqueKeyPrefix } from "../support/redis.ts";

/**
 * POST /character/chat in process, through the whole app, against the loopback LLM gateway and
 * reranker and embedded indexes; once on the embedded stores (PGlite, in-process key-value store)
 * and once on real Postgres and Redis when both are reachable.
 */

const [postgres, redis] = await Promise.all([probePostgres(), probeRedis()]);
const liveSkip = !postgres.reachable ? postgres.reason : !redis.reachable ? redis.reason : undefined;
if (liveSkip) console.warn(`chat: the Postgres and Redis variant is skipped: ${liveSkip}`);

interface Stores {
  db: Database;
  kv: KeyValueStore;
  close(): Promise<void>;
}

const variants: { name: string; skip?: string; open(): Promise<Stores> }[] = [
  {
    name: "PGlite and the in-process key-value store",
    open: () => openEmbeddedStores(),
  },
  {
    name: "Postgres and Redis",
    skip: liveSkip,
    async open() {
      if (!postgres.reachable || !redis.reachable) throw new Error("unreachable");
      const testDb = await createTestDatabase(postgres.url);
      const db = await createDatabase({ driver: "postgres", url: testDb.url });
      await migrate(db);
      const prefix = uniqueKeyPrefix("chat");
      const kv = prefixedKeyValueStore(createRedisKeyValueStore({ url: redis.url }), prefix);
      return {
        db,
        kv,
        async close() {
          await kv.close();
          await deleteKeysWithPrefix(prefix, redis.url);
          await db.close();
          await testDb.drop();
        },
      };
    },
  },
];

const isDone = (e: ChatEvent): e is ChatDoneEvent => "done" in e;
const tokensOf = (events: ChatEvent[]) => events.flatMap((e) => ("token" in e ? [e.token] : []));
const lockKey = (sessionId: string) => `chat:lock:${sessionId}`;

/** Scripts the summary fold to wait until `release()`; `started` resolves once the fold has begun. */
function holdSummaryFold(h: ChatHarness, content: string): { started: Promise<void>; release: () => void } {
  const started = Promise.withResolvers<void>();
  const held = Promise.withResolvers<void>();
  scriptGateway(h.gateway, { summary: async () => (started.resolve(), await held.promise, { content }) });
  return { started: started.promise, release: () => held.resolve() };
}

async function sessionRow(h: ChatHarness, sessionId: string) {
  const [row] = await h.deps.db.query<{ message_count: number; preview: string | null; summary: string | null }>(
    "SELECT message_count, preview, (SELECT summary FROM chat_session_summaries WHERE session_id = s.id) AS summary FROM chat_sessions s WHERE id = $1",
    [sessionId],
  );
  return row!;
}

async function messageRows(h: ChatHarness, sessionId: string) {
  return h.deps.db.query<{ role: string; content: string }>("SELECT role, content FROM messages WHERE session_id = $1 ORDER BY created_at", [sessionId]);
}

async function metric(h: ChatHarness, series: string): Promise<number> {
  return metricValue(await h.metrics.registry.metrics(), series) ?? 0;
}

/** Sends a message and reads the whole reply; fails the test unless the reply ends with `done`. */
async function exchange(h: ChatHarness, sessionId: string, message: string): Promise<ChatDoneEvent> {
  const { events } = await readSse(await h.chat(sessionId, message));
  await h.app.settle();
  const last = events.at(-1);
  if (!last || !isDone(last)) throw new Error(`expected a done event, got ${JSON.stringify(events)}`);
  return last;
}

for (const variant of variants) {
  describe.skipIf(variant.skip !== undefined)(`POST /character/chat on ${variant.name}`, () => {
    let stores: Stores;
    let h: ChatHarness;

    beforeAll(async () => {
      stores = await variant.open();
      h = await startChatHarness({ db: stores.db, kv: stores.kv });
    }, 60_000);
    afterAll(async () => {
      await h?.stop();
      await stores?.close();
    });
    beforeEach(() => h.resetUpstreams());

    describe("the stream", () => {
      test("sends each token as a data line, then one done event whose full_response is the tokens joined", async () => {
        const chunks = ["The ", "lamp ", "never ", "went ", "out", "."];
        scriptGateway(h.gateway, { chat: { chunks } });
        const res = await h.chat(await h.newSession(), "Did the lamp ever go out?");
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
        expect(res.headers.get("cache-control")).toBe("no-cache");
        const { text, events } = await readSse(res);

        expect(tokensOf(events)).toEqual(chunks);
        expect(events.length).toBe(chunks.length + 1);
        const done = events.at(-1)!;
        expect(isDone(done)).toBe(true);
        expect((done as ChatDoneEvent).full_response).toBe("The lamp never went out.");
        // Byte for byte: the opening comment, then `data: <JSON>` and a blank line per event, nothing else.
        expect(text).toBe(SSE_OPENING + events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join(""));
        expect(text.startsWith(`${SSE_OPENING}data: {"token":"The "}\n\ndata: {"token":"lamp "}\n\n`)).toBe(true);
        expect(text.endsWith("]}\n\n")).toBe(true);
      });

      test("a token holding line breaks, carriage returns or 'data:' stays inside its own event", async () => {
        const chunks = ['first\n\ndata: {"token":"forged"}\n\n', "\r\nevent: close\r", "id: 7\n", "data:", "\u2028end"];
        scriptGateway(h.gateway, { chat: { chunks } });
        const { text, events } = await readSse(await h.chat(await h.newSession(), "Say something odd."));
        expect(tokensOf(events)).toEqual(chunks);
        expect((events.at(-1) as ChatDoneEvent).full_response).toBe(chunks.join(""));
        // Only the framing itself produces line breaks.
        expect(text.split("\n").filter((line) => line !== "" && `${line}\n\n` !== SSE_OPENING).every((line) => line.startsWith("data: {"))).toBe(true);
        expect(text).not.toContain("\r");
      });

      test("done lists the passages used, best first, by chunk index and score", async () => {
        const done = await exchange(h, await h.newSession(), "Tell me about the storm and the Albatross");
        expect(done.sources.length).toBeGreaterThan(0);
        expect(done.sources.length).toBeLessThanOrEqual(5);
        for (const s of done.sources) expect(s.chunk_index).toBeLessThan(PASSAGES.length);
        const scores = done.sources.map((s) => s.score);
        expect(scores).toEqual([...scores].sort((a, b) => b - a));
        expect(done.sources[0]!.chunk_index).toBe(2);
      });
    });

    describe("refusals before the stream", () => {
      /**
       * What a refused request asked of the model: at most the query rewrite started on a guess before
       * the database answered (rewrite-ahead.ts), cancelled then; never an embedding or a reply.
       */
      const askedOfModel = () => {
        const rewrites = requestsOfKind(h.gateway, "rewrite").length;
        return { rewrites, others: h.gateway.requests.length - rewrites };
      };

      test("an unknown session is a 404 with {error: 'session not found'}; of the model at most the rewrite started ahead is asked, never an embedding or a reply", async () => {
        // The reader's last page in the book is known: the rewrite starts on it before the database answers.
        await h.kv.set(lastPageKey(h.world.userId, h.world.bookId), "1");
        const res = await h.chat(crypto.randomUUID(), "Hello?");
        expect(res.status).toBe(404);
        expect(res.headers.get("content-type")).toStartWith("application/json");
        expect(await res.json()).toEqual({ error: "session not found" });
        await h.app.settle();
        expect(askedOfModel().others).toBe(0);
        expect(askedOfModel().rewrites).toBeLessThanOrEqual(1);
      });

      test("another reader's session is a 404 exactly like a missing one, and its lock is let go at once", async () => {
        const owner = crypto.randomUUID();
        const theirs = await h.newSession({ userId: owner });
        const res = await h.chat(theirs, "Whose diary is this?");
        expect(res.status).toBe(404);
        expect(await res.json()).toEqual({ error: "session not found" });
        await h.app.settle();
        expect(askedOfModel().others).toBe(0);
        expect(await h.kv.get(lockKey(theirs))).toBeNull();
        // Its owner's next message is answered, not refused as busy.
        expect(isDone((await readSse(await h.chat(theirs, "Hello?", { user_id: owner }))).events.at(-1)!)).toBe(true);
      });

      test("a session named with another character or book is a 404", async () => {
        const session = await h.newSession();
        for (const extra of [{ character_id: h.world.otherCharacterId }, { book_id: crypto.randomUUID() }]) {
          const res = await h.chat(session, "Hello?", extra);
          expect(res.status).toBe(404);
          expect(await res.json()).toEqual({ error: "session not found" });
        }
      });

      test.each([
        ["a missing session_id", { session_id: undefined }, "session_id"],
        ["a user_id that is not a UUID", { user_id: "reader-1" }, "user_id must be a UUID"],
        ["a blank user_message", { user_message: "  \n " }, "user_message must not be blank"],
        ["a user_message over 4000 characters", { user_message: "a".repeat(4001) }, "user_message is longer than 4000 characters"],
        ["preferences that are not a string", { preferences: ["kind"] }, "preferences must be a string"],
      ])("%s is a 400 naming the problem", async (_, change, message) => {
        const res = await h.app.postJson("/character/chat", { ...h.body(crypto.randomUUID(), "Hello"), ...change });
        expect(res.status).toBe(400);
        expect(((await res.json()) as { error: string }).error).toContain(message);
      });

      test("malformed JSON is a 400", async () => {
        const res = await h.app.postJson("/character/chat", "{");
        expect(res.status).toBe(400);
        expect(await res.json()).toEqual({ error: "body is not valid JSON" });
      });

      test("X-User-Id and X-API-Key are accepted and ignored: the body's user_id decides", async () => {
        const session = await h.newSession();
        const res = await h.app.postJson("/character/chat", h.body(session, "Hello"), {
          "x-user-id": crypto.randomUUID(),
          "x-api-key": "anything",
        });
        expect(res.status).toBe(200);
        expect(isDone((await readSse(res)).events.at(-1)!)).toBe(true);
      });
    });

    describe("rows the frontend wrote that the schema allows", () => {
      test("a session whose message_count is at the integer column's largest value keeps chatting; the count stays there", async () => {
        const session = await h.newSession();
        await h.deps.db.query("UPDATE chat_sessions SET message_count = $2 WHERE id = $1", [session, MESSAGE_COUNT_MAX]);
        await h.kv.del(sessionCacheKey(session));
        await exchange(h, session, "Still counting?");
        await exchange(h, session, "And now?");
        expect((await sessionRow(h, session)).message_count).toBe(MESSAGE_COUNT_MAX);
        expect((await messageRows(h, session)).map((m) => m.content)).toEqual(["Still counting?", "Echo: Still counting?", "And now?", "Echo: And now?"]);
      });

      test.each([["the largest timestamp", "294276-12-31 23:59:59.999999+00"], ["infinity", "infinity"]])(
        "after a message stamped %s the next turns are saved, stamped by the clock and in order",
        async (_, stamp) => {
          const session = await h.newSession();
          await h.deps.db.query("INSERT INTO messages (session_id, role, content, created_at) VALUES ($1, 'user', 'Out of time', $2::timestamptz)", [session, stamp]);
          await exchange(h, session, "First.");
          await exchange(h, session, "Second.");
          const rows = await h.deps.db.query<{ content: string; near_now: boolean }>(
            `SELECT content, created_at BETWEEN now() - interval '1 hour' AND now() + interval '1 hour' AS near_now
               FROM messages WHERE session_id = $1 ORDER BY created_at`,
            [session],
          );
          expect(rows).toEqual([
            ...["First.", "Echo: First.", "Second.", "Echo: Second."].map((content) => ({ content, near_now: true })),
            { content: "Out of time", near_now: false },
          ]);
          // The cached history is in the database's order too: the stray stays last there as well.
          const cached = JSON.parse((await h.kv.get(sessionCacheKey(session)))!) as { messages: { content: string }[] };
          const fromDb = (await getSessionWithRecentMessages(h.deps.db, session, CONVERSATION_WINDOW_MESSAGES))!.recentMessages;
          expect(cached.messages.map((m) => m.content)).toEqual(fromDb.map((m) => m.content));
          expect(cached.messages.at(-1)!.content).toBe("Out of time");
        },
      );

      test("a session whose book is not its character's book is a 404 before the stream, and nothing is asked of the model", async () => {
        const other = await insertBook(h.deps.db, { title: "Another Book", author: "Someone Else", processingStatus: "completed" });
        const session = await h.newSession();
        await h.deps.db.query("UPDATE chat_sessions SET book_id = $2 WHERE id = $1", [session, other.id]);
        const res = await h.chat(session, "Which book are we in?", { book_id: other.id });
        expect(res.status).toBe(404);
        expect(await res.json()).toEqual({ error: CHARACTER_NOT_IN_BOOK });
        expect(h.gateway.requests).toEqual([]);
        expect(await h.kv.get(lockKey(session))).toBeNull();
      });
    });

    describe("the session lock", () => {
      test("of 20 simultaneous messages to one session exactly one is answered, the rest get 429, and the lock is gone after", async () => {
        const session = await h.newSession();
        let openGate!: () => void;
        const gate = new Promise<void>((resolve) => (openGate = resolve));
        // The reply waits until the 19 refusals are in, so all 20 really overlap.
        scriptGateway(h.gateway, { chat: async (request) => (await gate, { content: `Reply to ${lastUserContent(request)}` }) });
        let refused = 0;
        const results = await Promise.all(
          Array.from({ length: 20 }, async (_, i) => {
            const { events } = await readSse(await h.chat(session, `Message ${i}`));
            if (events.length === 1 && "code" in events[0]! && events[0].code === 429 && ++refused === 19) openGate();
            return events;
          }),
        );
        const answered = results.filter((events) => isDone(events.at(-1)!));
        const busy = results.filter((events) => events.length === 1 && "code" in events[0]!);
        expect(answered.length).toBe(1);
        expect(busy.length).toBe(19);
        for (const events of busy) expect(events).toEqual([{ error: SESSION_BUSY, code: 429 }]);
        expect(requestsOfKind(h.gateway, "chat").length).toBe(1);
        await h.app.settle();
        expect(await h.kv.get(lockKey(session))).toBeNull();
        expect((await sessionRow(h, session)).message_count).toBe(1);
      });

      test("the lock is taken with a random token for 30 s, only if absent", async () => {
        const session = await h.newSession();
        const before = h.kv.sets.length;
        await exchange(h, session, "Hello");
        const lockSets = h.kv.sets.slice(before).filter((s) => s.key === lockKey(session));
        expect(lockSets.length).toBe(1);
        expect(lockSets[0]!.options).toEqual({ nx: true, ex: 30 });
        expect(lockSets[0]!.value).toMatch(/^[0-9a-f]{32}$/);
        expect(await h.kv.get(lockKey(session))).toBeNull();
      });

      test("a lock held by someone else is left alone: the message gets 429 and the holder's token stays", async () => {
        const session = await h.newSession();
        await h.kv.set(lockKey(session), "someone-else", { nx: true, ex: 30 });
        const { events } = await readSse(await h.chat(session, "Hello"));
        expect(events).toEqual([{ error: SESSION_BUSY, code: 429 }]);
        expect(await h.kv.get(lockKey(session))).toBe("someone-else");
        await h.kv.del(lockKey(session));
      });
    });

    describe("model failures", () => {
      test.each([
        ["an error event", { errorEventAfterChunks: 2 }],
        ["a dropped connection", { dropAfterChunks: 2 }],
      ])("%s mid-stream ends the stream with a 502 event, saves nothing, frees the session", async (_, failure) => {
        const session = await h.newSession();
        scriptGateway(h.gateway, { chat: { chunks: ["It ", "was ", "a ", "dark ", "night."], ...failure } });
        const { events } = await readSse(await h.chat(session, "Tell me of the storm."));
        expect(events).toEqual([{ token: "It " }, { token: "was " }, { error: MODEL_FAILED, code: 502 }]);
        expect(await h.kv.get(lockKey(session))).toBeNull();
        expect(await sessionRow(h, session)).toMatchObject({ message_count: 0, preview: null });
        expect(await messageRows(h, session)).toEqual([]);

        scriptGateway(h.gateway);
        const done = await exchange(h, session, "Tell me of the storm.");
        expect(done.full_response).toBe("Echo: Tell me of the storm.");
        expect((await sessionRow(h, session)).message_count).toBe(1);
      });

      test("a gateway that refuses the reply outright gives a lone 502 event", async () => {
        const session = await h.newSession();
        scriptGateway(h.gateway, { chat: { status: 500 } });
        const { events } = await readSse(await h.chat(session, "Hello"));
        expect(events).toEqual([{ error: MODEL_FAILED, code: 502 }]);
        expect((await sessionRow(h, session)).message_count).toBe(0);
        expect(await h.kv.get(lockKey(session))).toBeNull();
      });
    });

    test("a reader who disconnects mid-reply cancels the model's request, frees the session and saves nothing", async () => {
      const session = await h.newSession();
      scriptGateway(h.gateway, { chat: { chunks: Array.from({ length: 500 }, (_, i) => `word${i} `), tokenDelayMs: 5 } });
      const res = await h.chat(session, "Tell me everything.");
      const reader = res.body!.getReader();
      expect(new TextDecoder().decode((await reader.read()).value)).toBe(SSE_OPENING);
      const first = await reader.read();
      expect(parseSseEvents(new TextDecoder().decode(first.value))[0]).toHaveProperty("token");
      await reader.cancel();

      await h.gateway.waitForAbort();
      const chat = h.gateway.chatRequests().find((r) => (r.body as { stream?: boolean }).stream);
      expect(chat?.aborted).toBe(true);
      expect(await h.kv.get(lockKey(session))).toBeNull();
      await h.app.settle();
      expect((await sessionRow(h, session)).message_count).toBe(0);
      expect(await messageRows(h, session)).toEqual([]);
      scriptGateway(h.gateway);
      expect((await exchange(h, session, "Shorter, please.")).full_response).toBe("Echo: Shorter, please.");
    });

    describe("query rewrite", () => {
      test("is asked at temperature 0 with at most 200 tokens in JSON mode, and its queries drive retrieval", async () => {
        const queries = { narrative_query: "Elinor rows out through the storm to the wrecked schooner", keyword_query: "Albatross shoals storm" };
        scriptGateway(h.gateway, { rewrite: { content: JSON.stringify(queries) } });
        const message = "What happened that night in November?";
        await exchange(h, await h.newSession(), message);

        const [rewrite, ...more] = requestsOfKind(h.gateway, "rewrite");
        expect(more).toEqual([]);
        expect(rewrite).toMatchObject({ temperature: 0, max_tokens: 200, response_format: { type: "json_object" } });
        expect(rewrite!.stream).toBeFalsy();
        expect<unknown>(rewrite!.messages).toEqual(
          buildRewriteMessages({
            character: { name: CHARACTER_NAME, description: CHARACTER_DESCRIPTION, profile: CHARACTER_PROFILE },
            userMessage: message,
            history: [],
          }),
        );
        expect(h.gateway.embeddingRequests().map((r) => (r.body as { input: unknown }).input)).toEqual([[queries.narrative_query]]);
        // SPEC, chat step 8: the reranker scores the passages against the reader's own message.
        expect(h.reranker.rerankRequests().map((r) => (r.body as { query: string }).query)).toEqual([message]);
      });

      test("a rewrite already cached for the same message and history is not asked for again", async () => {
        const message = `Who taught you to trim the wick? (${crypto.randomUUID()})`;
        const queries = { narrative_query: "her father teaching her to trim the lamp wick", keyword_query: "wick lamp father" };
        scriptGateway(h.gateway, { rewrite: { content: JSON.stringify(queries) } });
        const before = h.kv.sets.length;
        await exchange(h, await h.newSession(), message);
        const key = rewriteCacheKey(h.world.characterId, message, []);
        expect(h.kv.sets.slice(before).find((s) => s.key === key)).toMatchObject({ options: { ex: 3600 } });
        expect(JSON.parse((await h.kv.get(key))!)).toEqual({ [WHOLE_BOOK_REWRITE]: queries });

        await exchange(h, await h.newSession(), message);
        expect(requestsOfKind(h.gateway, "rewrite").length).toBe(1);
        expect(h.gateway.embeddingRequests().map((r) => (r.body as { input: unknown }).input)).toEqual([[queries.narrative_query], [queries.narrative_query]]);
      });

      test("a follow-up sent again after its reply failed finds its rewrite cached; other follow-ups do not look for one", async () => {
        const session = await h.newSession();
        await exchange(h, session, "First question.");
        const message = `And the lamp room? (${crypto.randomUUID()})`;
        const queries = { narrative_query: "the lamp room at the top of the tower", keyword_query: "lamp room tower" };
        scriptGateway(h.gateway, { rewrite: { content: JSON.stringify(queries) }, chat: { status: 500 } });
        const gets = () => h.kv.commands.filter((c) => c === "get").length;
        const getsBefore = gets();
        expect((await readSse(await h.chat(session, message))).events).toEqual([{ error: MODEL_FAILED, code: 502 }]);
        await h.app.settle();
        // Its history had moved on with the first exchange: nothing could be cached for it.
        expect(gets()).toBe(getsBefore);
        const rewrites = requestsOfKind(h.gateway, "rewrite").length;

        scriptGateway(h.gateway, { rewrite: { content: JSON.stringify(queries) } });
        expect((await exchange(h, session, message)).full_response).toBe(`Echo: ${message}`);
        expect(gets()).toBe(getsBefore + 1);
        expect(requestsOfKind(h.gateway, "rewrite").length).toBe(rewrites);
        expect(h.gateway.embeddingRequests().map((r) => (r.body as { input: unknown }).input).at(-1)).toEqual([queries.narrative_query]);
      });

      test.each([
        ["prose instead of JSON", { content: "Sure! She would recall the storm." }],
        ["JSON without the queries", { content: '{"query": "storm"}' }],
        ["an HTTP error", { status: 500 }],
      ])("a rewrite answered with %s falls back to the reader's message, uncached", async (_, answer) => {
        const message = `Tell me about Captain Reyes (${crypto.randomUUID()})`;
        scriptGateway(h.gateway, { rewrite: answer });
        const done = await exchange(h, await h.newSession(), message);
        expect(done.sources.length).toBeGreaterThan(0);
        expect(h.gateway.embeddingRequests().map((r) => (r.body as { input: unknown }).input)).toEqual([[message]]);
        expect(h.reranker.rerankRequests().map((r) => (r.body as { query: string }).query)).toEqual([message]);
        expect(await h.kv.get(rewriteCacheKey(h.world.characterId, message, []))).toBeNull();
      });
    });

    describe("cache and persistence", () => {
      test("after a reply the character, session and book are cached for 3600 s, the session with its messages", async () => {
        const session = await h.newSession();
        await h.kv.del(characterCacheKey(h.world.characterId));
        await h.kv.del(bookCacheKey(h.world.bookId));
        const before = h.kv.sets.length;
        const done = await exchange(h, session, "Good evening, Miss Vance.");
        const written = new Map(h.kv.sets.slice(before).map((s) => [s.key, s.options]));
        for (const key of [characterCacheKey(h.world.characterId), sessionCacheKey(session), bookCacheKey(h.world.bookId)]) {
          expect({ key, options: written.get(key) }).toMatchObject({ key, options: { ex: 3600 } });
        }
        expect(JSON.parse((await h.kv.get(sessionCacheKey(session)))!)).toMatchObject({
          id: session,
          user_id: h.world.userId,
          message_count: 1,
          summary: null,
          messages: [
            { role: "user", content: "Good evening, Miss Vance." },
            { role: "assistant", content: done.full_response },
          ],
        });
        expect(JSON.parse((await h.kv.get(characterCacheKey(h.world.characterId)))!)).toMatchObject({ name: CHARACTER_NAME, system_prompt: PERSONA });
        // The spec's field names (SPEC: Key-value store keys), in its order.
        const fields = async (key: string) => Object.keys(JSON.parse((await h.kv.get(key))!) as object);
        // Then ours: the book a turn checks and the character's lines a turn may quote. Never the reader's
        // position: the frontend moves it at any time.
        expect(await fields(characterCacheKey(h.world.characterId))).toEqual(["id", "name", "system_prompt", "profile_json", "description", "book_id", "lines"]);
        expect(await fields(sessionCacheKey(session))).toEqual(["id", "user_id", "character_id", "book_id", "message_count", "messages", "summary"]);
        expect(await fields(bookCacheKey(h.world.bookId))).toEqual(["id", "title", "author", "description"]);
      });

      test("entries in the previous camelCase format (a rolling deploy) are read from the database and replaced", async () => {
        const session = await h.newSession();
        const old = {
          [characterCacheKey(h.world.characterId)]: { id: h.world.characterId, bookId: h.world.bookId, name: "Stale Name", description: null, profile: null, systemPrompt: "I am stale." },
          [sessionCacheKey(session)]: { id: session, userId: h.world.userId, characterId: h.world.characterId, bookId: h.world.bookId, messageCount: 0, summary: null, messages: [] },
          [bookCacheKey(h.world.bookId)]: { id: h.world.bookId, title: "Stale Title", author: null },
        };
        for (const [key, value] of Object.entries(old)) await h.kv.set(key, JSON.stringify(value), { ex: 3600 });
        const done = await exchange(h, session, "Is the lamp lit tonight?");
        expect(done.full_response.length).toBeGreaterThan(0);
        const system = requestsOfKind(h.gateway, "chat").at(-1)!.messages[0]!.content;
        expect(system).toContain(PERSONA);
        expect(system).not.toContain("I am stale.");
        for (const key of Object.keys(old)) expect(JSON.parse((await h.kv.get(key))!)).not.toHaveProperty("bookId");
        expect(JSON.parse((await h.kv.get(sessionCacheKey(session)))!)).toMatchObject({ user_id: h.world.userId, message_count: 1 });
      });

      test("a second message reads the session, character, book and history from the cache, not the database", async () => {
        const session = await h.newSession();
        await exchange(h, session, "First question.");
        const before = h.db.statements.length;
        await exchange(h, session, "Second question.");
        const statements = h.db.statements.slice(before).map((s) => s.replace(/\s+/g, " "));
        const reads = statements.filter((s) => /^SELECT/.test(s));
        // The reader's page is read every turn (never cached) in the statement that reads their preferences: no extra round trip.
        expect(reads).toHaveLength(1);
        expect(reads[0]).toContain("FROM user_preferences WHERE user_id = $1 AND character_id = $2");
        expect(reads[0]).toContain("FROM user_library l WHERE l.user_id = $1 AND l.book_id = $3");
        // The exchange is saved in one statement: one round trip to the database.
        const writes = statements.filter((s) => !/^SELECT/.test(s));
        expect(writes).toHaveLength(1);
        expect(writes[0]).toMatch(/^WITH done AS .* UPDATE chat_sessions s SET .* INSERT INTO messages /);
      });

      test("a second message takes the session lock and reads the session's entry in the same round trip", async () => {
        const session = await h.newSession();
        await exchange(h, session, "First question.");
        const before = h.kv.commands.length;
        // A message never asked before: its rewrite is made, and cached.
        await exchange(h, session, `Second question, ${crypto.randomUUID()}.`);
        const commands = h.kv.commands.slice(before);
        // The lock with the character, session, book and fold key read in the same command (no read
        // of the rewrite's cache: nothing can be cached for a history the last exchange moved on);
        // the session's new entry, the reader's page, the rewrite's and the lock's release, together.
        expect(commands).toEqual(["setIfAbsentThenMget", "set", "set", "set", "deleteIfEquals"]);
      });

      test("two exchanges leave four messages in order and a session with message_count 2 and a preview ending in …", async () => {
        const session = await h.newSession();
        const long = "The sea takes what it wants, and it wanted the Albatross that night, but I would not let it have her crew. ".repeat(2);
        scriptGateway(h.gateway, { chat: { content: "Good evening." } });
        await exchange(h, session, "Hello, Elinor.");
        scriptGateway(h.gateway, { chat: { content: long } });
        await exchange(h, session, "Tell me about the wreck.");

        expect(await messageRows(h, session)).toEqual([
          { role: "user", content: "Hello, Elinor." },
          { role: "assistant", content: "Good evening." },
          { role: "user", content: "Tell me about the wreck." },
          { role: "assistant", content: long },
        ]);
        const row = await sessionRow(h, session);
        expect(row.message_count).toBe(2);
        expect(row.preview!.endsWith("…")).toBe(true);
        expect(long.startsWith(row.preview!.slice(0, -1))).toBe(true);
        expect(row.preview!.length).toBeLessThanOrEqual(101);
        // The second reply was written knowing the first exchange.
        const [, second] = requestsOfKind(h.gateway, "chat");
        expect(second!.messages.slice(1).map((m) => m.content)).toEqual(["Hello, Elinor.", "Good evening.", "Tell me about the wreck."]);
      });
    });

    describe("the prompt", () => {
      test("the system message holds the persona, the stored preferences, the numbered passages and the summary", async () => {
        const summary = "The reader asked about Thomas and the letters that stopped.";
        const done = await exchange(h, await h.newSession({ summary }), "Did Thomas ever write again?");
        const [chat] = requestsOfKind(h.gateway, "chat");
        const system = chat!.messages[0]!;
        expect(system.role).toBe("system");
        expect(system.content).toBe(
          buildChatSystemPrompt({
            personaPrompt: PERSONA,
            preferences: STORED_PREFERENCES,
            passages: done.sources.map((s) => ({ text: PASSAGES[s.chunk_index]! })),
            summary,
          }),
        );
        for (const part of [PERSONA, "Relationship mode: friend", "[1]\n<<<BOOK PASSAGE>>>", summary]) expect(system.content).toContain(part);
        expect(system.content).toContain(PASSAGES[5]!);
        expect(chat!.messages.at(-1)).toEqual({ role: "user", content: "Did Thomas ever write again?" });
      });

      test("on a session's first turn the summary section is there too, after the passages, saying there is none yet", async () => {
        await exchange(h, await h.newSession(), "Who taught you to keep the light?");
        const system = requestsOfKind(h.gateway, "chat")[0]!.messages[0]!.content;
        expect(system.indexOf(PASSAGES_HEADING)).toBeGreaterThan(0);
        expect(system.indexOf(SUMMARY_HEADING)).toBeGreaterThan(system.indexOf(PASSAGES_HEADING));
        expect(system).toEndWith(`${SUMMARY_HEADING}\n${NO_SUMMARY_SECTION}`);
      });

      test("a preferences string in the request replaces the stored preferences", async () => {
        const res = await h.chat(await h.newSession(), "Hello again", { preferences: "Answer only in questions." });
        await readSse(res);
        const system = requestsOfKind(h.gateway, "chat")[0]!.messages[0]!.content;
        expect(system).toContain("## USER PREFERENCE MODIFIERS");
        expect(system).toContain("Answer only in questions.");
        expect(system).not.toContain("Relationship mode: friend");
      });
    });

    describe("degraded retrieval", () => {
      test("with the reranker down the reply is still grounded, in fused rank order", async () => {
        h.reranker.onRerank(() => ({ status: 503 }));
        const done = await exchange(h, await h.newSession(), "Tell me about the Albatross and Captain Reyes");
        expect(h.reranker.rerankRequests().length).toBe(1);
        expect(done.sources.length).toBeGreaterThan(0);
        expect(done.sources.map((s) => s.chunk_index)).toContain(3);
        // Reciprocal-rank-fusion scores are at most 2/61.
        for (const s of done.sources) expect(s.score).toBeLessThanOrEqual(2 / 61);
        expect(requestsOfKind(h.gateway, "chat")[0]!.messages[0]!.content).toContain(PASSAGES[3]!);
      });

      test("with vector search down the reply is still grounded by keyword search", async () => {
        const broken = await h.appWith({ vectorIndex: { ...h.deps.vectorIndex, search: () => Promise.reject(new Error("vector index down")) } });
        const session = await h.newSession();
        const { events } = await readSse(await broken.postJson("/character/chat", h.body(session, "Tell me about the fog bell")));
        await broken.settle();
        const done = events.at(-1) as ChatDoneEvent;
        expect(done.done).toBe(true);
        expect(done.sources.map((s) => s.chunk_index)).toContain(6);
        expect(requestsOfKind(h.gateway, "chat")[0]!.messages[0]!.content).toContain(PASSAGES[6]!);
      });

      test("with embeddings failing the reply is still grounded by keyword search", async () => {
        h.gateway.onEmbeddings(() => ({ status: 500 }));
        scriptGateway(h.gateway);
        const done = await exchange(h, await h.newSession(), "Tell me about the inspector and the log");
        expect(done.sources.map((s) => s.chunk_index)).toContain(7);
      });
    });

    describe("conversation summary", () => {
      test("messages leaving the 10-message window are folded into the summary after the reply, and the next reply sees it", async () => {
        const session = await h.newSession();
        for (let i = 1; i <= 5; i++) await exchange(h, session, `Question ${i}`);
        expect(requestsOfKind(h.gateway, "summary")).toEqual([]);

        scriptGateway(h.gateway, { summary: { content: "The reader opened with Question 1." } });
        await exchange(h, session, "Question 6");
        const [fold, ...more] = requestsOfKind(h.gateway, "summary");
        expect(more).toEqual([]);
        expect(fold!.messages.at(-1)!.content).toContain("Question 1");
        expect(fold!.messages.at(-1)!.content).toContain("Echo: Question 1");
        expect(fold!.messages.at(-1)!.content).not.toContain("Question 2");
        expect((await sessionRow(h, session)).summary).toBe("The reader opened with Question 1.");
        expect(JSON.parse((await h.kv.get(sessionCacheKey(session)))!).summary).toBe("The reader opened with Question 1.");
        expect(await h.kv.get(lockKey(session))).toBeNull();

        await exchange(h, session, "Question 7");
        const chat = requestsOfKind(h.gateway, "chat").at(-1)!;
        expect(chat.messages[0]!.content).toContain("## Conversation Summary\nWhat you and the reader have talked about so far:\nThe reader opened with Question 1.");
        // System, the last 10 messages, the new message.
        expect(chat.messages.length).toBe(12);
        expect(chat.messages[1]!.content).toBe("Question 2");
      });

      test("the fold never delays the stream: the reply ends while the summary is still being written", async () => {
        const session = await h.newSession();
        for (let i = 1; i <= 5; i++) await exchange(h, session, `Turn ${i}`);
        const fold = holdSummaryFold(h, "Held summary.");

        const { events } = await readSse(await h.chat(session, "Turn 6"));
        expect(isDone(events.at(-1)!)).toBe(true);
        await fold.started;
        expect((await sessionRow(h, session)).summary).toBeNull();
        fold.release();
        await h.app.settle();
        expect((await sessionRow(h, session)).summary).toBe("Held summary.");
      });

      test("a message sent while the summary is being folded waits for the fold, then builds on the new summary", async () => {
        const session = await h.newSession();
        for (let i = 1; i <= 5; i++) await exchange(h, session, `Step ${i}`);
        const fold = holdSummaryFold(h, "Folded: steps one and two.");
        await readSse(await h.chat(session, "Step 6"));
        await fold.started;

        const lockSets = () => h.kv.sets.filter((s) => s.key === lockKey(session)).length;
        const before = lockSets();
        const next = h.chat(session, "Step 7").then(readSse);
        while (lockSets() === before) await Bun.sleep(5);
        // Step 7 holds the session lock and waits: it has not even asked for its query rewrite.
        expect(requestsOfKind(h.gateway, "rewrite").some((r) => lastUserContent(r).includes("Step 7"))).toBe(false);
        fold.release();
        const { events } = await next;
        await h.app.settle();
        expect(isDone(events.at(-1)!)).toBe(true);
        expect(requestsOfKind(h.gateway, "chat").at(-1)!.messages[0]!.content).toContain("Folded: steps one and two.");
        expect(await h.kv.get(`chat:fold:${session}`)).toBeNull();
      });

      test("on a follow-up with the position in the body, the rewrite is asked for while the reader's own statement is still on its way", async () => {
        const session = await h.newSession();
        await exchange(h, session, "Hello.");
        let release!: () => void;
        const held = new Promise<void>((resolve) => (release = resolve));
        // The statement that reads the reader's page and preferences waits until released.
        const slow: Database = { ...h.deps.db, query: async (text, params) => (text.includes("user_library") && (await held), h.deps.db.query(text, params)) };
        const app = await h.appWith({ db: slow });
        let rewriteAsked!: () => void;
        const asked = new Promise<void>((resolve) => (rewriteAsked = resolve));
        scriptGateway(h.gateway, { rewrite: () => (rewriteAsked(), { content: JSON.stringify({ narrative_query: "the lamp", keyword_query: "lamp" }) }) });
        // Read as a client reads it, as it comes.
        const reply = app.postJson("/character/chat", h.body(session, `Where were we? (${crypto.randomUUID()})`, { reading_position: 1 })).then(readSse);
        expect(await Promise.race([asked.then(() => "asked"), Bun.sleep(5_000).then(() => "waited")])).toBe("asked");
        release();
        expect(isDone((await reply).events.at(-1)!)).toBe(true);
        await app.settle();
      });

      /** The app with the statement that reads the reader's page held until `release`, and a promise of the first rewrite asked for. */
      async function readerHeld() {
        let release!: () => void;
        const held = new Promise<void>((resolve) => (release = resolve));
        const slow: Database = { ...h.deps.db, query: async (text, params) => (text.includes("user_library") && (await held), h.deps.db.query(text, params)) };
        let rewriteAsked!: () => void;
        const asked = new Promise<void>((resolve) => (rewriteAsked = resolve));
        scriptGateway(h.gateway, { rewrite: () => (rewriteAsked(), { content: JSON.stringify({ narrative_query: "the lamp", keyword_query: "lamp" }) }) });
        const askedFirst = () => Promise.race([asked.then(() => "asked"), Bun.sleep(5_000).then(() => "waited")]);
        return { app: await h.appWith({ db: slow }), release, askedFirst };
      }

      /**
       * `message` sent with the reader's statement held: whether its rewrite was asked for while the
       * statement waited, and how many rewrites the message took once the turn was done.
       */
      async function sentWithTheReaderHeld(session: string, message: string, extra: Record<string, unknown> = {}) {
        const { app, release, askedFirst } = await readerHeld();
        const reply = app.postJson("/character/chat", h.body(session, message, extra)).then(readSse);
        const rewrite = await askedFirst();
        release();
        expect(isDone((await reply).events.at(-1)!)).toBe(true);
        await app.settle();
        return { rewrite, rewrites: requestsOfKind(h.gateway, "rewrite").filter((r) => lastUserContent(r).includes(message)).length };
      }

      test("a first turn with the position in the body asks for its rewrite before the database has said whose session it is, and uses it", async () => {
        const message = `Who keeps the lamp? (${crypto.randomUUID()})`;
        expect(await sentWithTheReaderHeld(await h.newSession(), message, { reading_position: 1 })).toEqual({ rewrite: "asked", rewrites: 1 });
        expect(h.gateway.embeddingRequests().map((r) => (r.body as { input: unknown }).input).at(-1)).toEqual(["the lamp"]);
      });

      test("a first turn without a position in the body starts its rewrite on the reader's last page in the book, from another session of theirs", async () => {
        await exchange(h, await h.newSession(), "Hello.");
        expect(h.kv.sets.filter((s) => s.key === lastPageKey(h.world.userId, h.world.bookId)).at(-1)).toMatchObject({ value: "1", options: { ex: 86_400 } });
        const message = `Who are you? (${crypto.randomUUID()})`;
        expect(await sentWithTheReaderHeld(await h.newSession(), message)).toEqual({ rewrite: "asked", rewrites: 1 });
      });

      test("a follow-up without a position in the body starts its rewrite on the reader's last page, and uses it when the page says the same", async () => {
        const session = await h.newSession();
        await exchange(h, session, "Hello.");
        const message = `And the storm? (${crypto.randomUUID()})`;
        expect(await sentWithTheReaderHeld(session, message)).toEqual({ rewrite: "asked", rewrites: 1 });
      });

      test("a rewrite started on a wrong guess is not used: a session whose cache entry expired is rewritten again with its history", async () => {
        const session = await h.newSession();
        await exchange(h, session, "First.");
        await h.kv.del(sessionCacheKey(session));
        scriptGateway(h.gateway, {
          rewrite: (request) => {
            const withHistory = lastUserContent(request).includes("First.");
            return { content: JSON.stringify({ narrative_query: withHistory ? "with the conversation" : "without it", keyword_query: "lamp" }) };
          },
        });
        const message = `What did I just ask? (${crypto.randomUUID()})`;
        const { events } = await readSse(await h.app.postJson("/character/chat", h.body(session, message, { reading_position: 1 })));
        await h.app.settle();
        expect(events.at(-1)).toMatchObject({ done: true, full_response: `Echo: ${message}` });
        expect(requestsOfKind(h.gateway, "rewrite").filter((r) => lastUserContent(r).includes(message)).length).toBeLessThanOrEqual(2);
        expect(h.gateway.embeddingRequests().map((r) => (r.body as { input: unknown }).input).at(-1)).toEqual(["with the conversation"]);
        expect(JSON.parse((await h.kv.get(rewriteCacheKey(h.world.characterId, message, [{ content: "First." }, { content: "Echo: First." }])))!)).toEqual({
          [WHOLE_BOOK_REWRITE]: { narrative_query: "with the conversation", keyword_query: "lamp" },
        });
      });

      test("a message whose session has no cache entry reads the database only once it holds the lock, so it gets the previous reply", async () => {
        const session = await h.newSession();
        await exchange(h, session, "First.");
        let replyA!: () => void;
        const gate = new Promise<void>((resolve) => (replyA = resolve));
        let aStreaming!: () => void;
        const aStarted = new Promise<void>((resolve) => (aStreaming = resolve));
        scriptGateway(h.gateway, {
          chat: async (request) => (lastUserContent(request) === "A" ? (aStreaming(), await gate, { content: "Reply A." }) : { content: "Reply B." }),
        });
        // B arrives while A streams; its lock and reads reach the store only after A is done, when the
        // session's entry is gone: what B reads from the database then must hold A's exchange.
        let aDone!: () => void;
        const aFinished = new Promise<void>((resolve) => (aDone = resolve));
        let bArrived!: () => void;
        const bStarted = new Promise<void>((resolve) => (bArrived = resolve));
        const delayed: KeyValueStore = {
          ...h.deps.kv,
          async setIfAbsentThenMget(key, value, seconds, keys) {
            bArrived();
            await aFinished;
            return h.deps.kv.setIfAbsentThenMget(key, value, seconds, keys);
          },
          async mget(keys) {
            await aFinished;
            return h.deps.kv.mget(keys);
          },
        };
        const late = await h.appWith({ kv: delayed });

        const a = h.chat(session, "A").then(readSse);
        await aStarted;
        const b = late.postJson("/character/chat", h.body(session, "B")).then(readSse);
        await bStarted;
        replyA();
        expect(isDone((await a).events.at(-1)!)).toBe(true);
        await h.kv.del(sessionCacheKey(session));
        aDone();
        expect(isDone((await b).events.at(-1)!)).toBe(true);
        await late.settle();

        const chatB = requestsOfKind(h.gateway, "chat").find((r) => lastUserContent(r) === "B")!;
        expect(chatB.messages.slice(1).map((m) => m.content)).toEqual(["First.", "Echo: First.", "A", "Reply A.", "B"]);
        expect(JSON.parse((await h.kv.get(sessionCacheKey(session)))!).messages.map((m: { content: string }) => m.content)).toEqual([
          "First.",
          "Echo: First.",
          "A",
          "Reply A.",
          "B",
          "Reply B.",
        ]);
      });

      test("a failed fold keeps the previous summary", async () => {
        const session = await h.newSession({ summary: "Earlier, they spoke of the fog bell." });
        scriptGateway(h.gateway, { summary: { status: 500 } });
        for (let i = 1; i <= 6; i++) await exchange(h, session, `Line ${i}`);
        expect(requestsOfKind(h.gateway, "summary").length).toBe(1);
        expect((await sessionRow(h, session)).summary).toBe("Earlier, they spoke of the fog bell.");
        expect(JSON.parse((await h.kv.get(sessionCacheKey(session)))!).summary).toBe("Earlier, they spoke of the fog bell.");
        expect(await h.kv.get(lockKey(session))).toBeNull();
      });
    });
  });
}

describe("POST /character/chat when a store fails, as the cache expires, and in the metrics", () => {
  let chat: EmbeddedChat;
  let now = Date.now();
  let h: ChatHarness;

  beforeAll(async () => {
    chat = await startEmbeddedChat({ kv: { now: () => now } });
    ({ h } = chat);
  }, 60_000);
  afterAll(() => chat?.stop());
  beforeEach(() => h.resetUpstreams());

  /** Reads of a cached row; the reader's page (with the book's page count) is read every turn and not counted. */
  const reads = (statements: string[], table: string) =>
    statements.filter(
      (s) => s.startsWith("SELECT") && !s.includes("FROM user_library") && new RegExp(`FROM ${table}( [a-z])? WHERE`).test(s.replace(/\s+/g, " ")),
    ).length;

  test("cached entries live 3600 s: after that the next message reads the database again", async () => {
    const session = await h.newSession();
    await h.kv.del(characterCacheKey(h.world.characterId));
    await h.kv.del(bookCacheKey(h.world.bookId));
    await exchange(h, session, "First.");

    now += 3599_000;
    let before = h.db.statements.length;
    await exchange(h, session, "Second, an hour later.");
    let statements = h.db.statements.slice(before);
    expect([reads(statements, "characters"), reads(statements, "books"), reads(statements, "chat_sessions")]).toEqual([0, 0, 0]);

    // The character and book entries were written an hour and a second ago; the session's was refreshed by the second reply.
    now += 2_000;
    before = h.db.statements.length;
    await exchange(h, session, "Third.");
    statements = h.db.statements.slice(before);
    expect([reads(statements, "characters"), reads(statements, "books"), reads(statements, "chat_sessions")]).toEqual([1, 1, 0]);
  });

  test("with the key-value store down the reply comes from the database, without the lock, and the missing lock is counted", async () => {
    const down = new Proxy(h.deps.kv, {
      get: (target, property) =>
        property === "driver" ? target.driver : () => Promise.reject(new KvError("redis: connection refused")),
    });
    const app = await h.appWith({ kv: down });
    const session = await h.newSession();
    const before = await metric(h, "chat_lock_unavailable_total");
    const { events } = await readSse(await app.postJson("/character/chat", h.body(session, "Are you there?")));
    await app.settle();
    expect(events.at(-1)).toMatchObject({ done: true, full_response: "Echo: Are you there?" });
    expect(await metric(h, "chat_lock_unavailable_total")).toBe(before + 1);
    expect((await sessionRow(h, session)).message_count).toBe(1);
  });

  test("with the database down before the stream the request fails with 500 and no stream", async () => {
    const down: Database = { ...h.deps.db, query: () => Promise.reject(new DatabaseError("connection refused", "connection")) };
    const app = await h.appWith({ db: down });
    const res = await app.postJson("/character/chat", h.body(crypto.randomUUID(), "Hello"));
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: "database unavailable" });
    expect(h.gateway.requests).toEqual([]);
  });

  /**
   * The harness's database, whose saves of an exchange fail `times` times: refused outright, or
   * ("lose-reply") carried out and then failed as if the connection dropped before the answer.
   */
  function failingSaves(times: number, mode: "refuse" | "lose-reply" = "refuse", error = () => new DatabaseError("connection reset", "connection")) {
    const attempts = { count: 0 };
    const db: Database = {
      ...h.deps.db,
      query: async <R extends Row = Row>(text: string, params?: readonly unknown[]) => {
        if (!text.includes("INSERT INTO messages")) return h.deps.db.query<R>(text, params);
        if (attempts.count++ >= times) return h.deps.db.query<R>(text, params);
        if (mode === "lose-reply") await h.deps.db.query<R>(text, params);
        throw error();
      },
    };
    return { db, attempts };
  }

  test.each([["refused", "refuse"], ["carried out but its answer lost", "lose-reply"]] as const)(
    "a save %s twice is tried again: the reader gets done and the exchange is saved once",
    async (_, mode) => {
      const session = await h.newSession();
      await exchange(h, session, "Warm the cache.");
      const failing = failingSaves(2, mode);
      const app = await h.appWith({ db: failing.db });
      scriptGateway(h.gateway, { chat: { chunks: ["Saved? ", "Yes."] } });
      const { events } = await readSse(await app.postJson("/character/chat", h.body(session, "Will you remember this?")));
      await app.settle();
      expect(events).toEqual([{ token: "Saved? " }, { token: "Yes." }, { done: true, full_response: "Saved? Yes.", sources: expect.any(Array) }]);
      expect(failing.attempts.count).toBe(3);
      expect((await sessionRow(h, session)).message_count).toBe(2);
      expect((await messageRows(h, session)).map((m) => m.content)).toEqual(["Warm the cache.", "Echo: Warm the cache.", "Will you remember this?", "Saved? Yes."]);
      expect(await h.kv.get(lockKey(session))).toBeNull();
      // The next turn's history holds the exchange exactly once, whichever way the cache entry went.
      h.gateway.reset();
      scriptGateway(h.gateway);
      await exchange(h, session, "Do you?");
      expect(requestsOfKind(h.gateway, "chat")[0]!.messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual([
        "Warm the cache.",
        "Will you remember this?",
        "Do you?",
      ]);
    },
  );

  test("when the reader's page cannot be read the turn ends in the 502 event before any token, rather than use the whole book", async () => {
    const session = await h.newSession();
    const db: Database = {
      ...h.deps.db,
      query: <R extends Row = Row>(text: string, params?: readonly unknown[]) =>
        text.includes("FROM user_library") ? Promise.reject(new DatabaseError("connection reset", "connection")) : h.deps.db.query<R>(text, params),
    };
    const app = await h.appWith({ db });
    const { events } = await readSse(await app.postJson("/character/chat", h.body(session, "What happened in the storm?")));
    await app.settle();
    expect(events).toEqual([{ error: REPLY_FAILED, code: 502 }]);
    expect(h.gateway.requests).toEqual([]);
    // With the position in the body the failed read costs only the preferences: the turn goes on without them.
    const positioned = await readSse(await app.postJson("/character/chat", h.body(session, "And now?", { reading_position: 0.5 })));
    expect(positioned.events.at(-1)).toMatchObject({ done: true });
  });

  test("a save the database refuses for its data (SQLSTATE class 22) is not tried again: the reader gets the 502 event at once", async () => {
    const session = await h.newSession();
    const failing = failingSaves(Infinity, "refuse", () => new DatabaseError("invalid byte sequence for encoding \"UTF8\": 0x00", "other", "22021"));
    const app = await h.appWith({ db: failing.db });
    const { events } = await readSse(await app.postJson("/character/chat", h.body(session, "Hello?")));
    await app.settle();
    expect(events.at(-1)).toEqual({ error: SAVE_FAILED, code: 502 });
    expect(failing.attempts.count).toBe(1);
  });

  test("a reply that cannot be saved in SAVE_ATTEMPTS tries ends with a 502 event, leaves nothing behind and frees the session", async () => {
    const session = await h.newSession();
    await exchange(h, session, "Warm the cache.");
    const failing = failingSaves(Infinity);
    const app = await h.appWith({ db: failing.db });
    scriptGateway(h.gateway, { chat: { chunks: ["Saved? ", "No."] } });
    const { events } = await readSse(await app.postJson("/character/chat", h.body(session, "Will you remember this?")));
    await app.settle();
    expect(events).toEqual([{ token: "Saved? " }, { token: "No." }, { error: SAVE_FAILED, code: 502 }]);
    expect(failing.attempts.count).toBe(SAVE_ATTEMPTS);
    expect((await sessionRow(h, session)).message_count).toBe(1);
    expect(JSON.parse((await h.kv.get(sessionCacheKey(session)))!).message_count).toBe(1);
    expect(await h.kv.get(lockKey(session))).toBeNull();
  });

  test("a character whose persona prompt ingestion has not written yet answers as itself, from its name, book and description", async () => {
    await h.deps.db.query("UPDATE characters SET system_prompt = NULL WHERE id = $1", [h.world.otherCharacterId]);
    const session = await h.newSession({ characterId: h.world.otherCharacterId });
    const { events } = await readSse(await h.chat(session, "Why did you stop writing?", { character_id: h.world.otherCharacterId }));
    expect(isDone(events.at(-1)!)).toBe(true);
    expect(requestsOfKind(h.gateway, "chat")[0]!.messages[0]!.content).toStartWith(
      `You are Thomas Vance, a character in the book "${BOOK_TITLE}". Elinor's brother, gone to the city. Speak as Thomas Vance, in the first person, and stay in character.`,
    );
  });

  test("outcomes, time to first token and model tokens by purpose are counted", async () => {
    const series = [
      'chat_requests_total{outcome="ok"}',
      'chat_requests_total{outcome="404"}',
      'chat_requests_total{outcome="429"}',
      'chat_requests_total{outcome="502"}',
      'chat_requests_total{outcome="aborted"}',
      "chat_time_to_first_token_seconds_count",
      'llm_tokens_total{purpose="rewrite",type="prompt"}',
      'llm_tokens_total{purpose="rewrite",type="completion"}',
      'llm_tokens_total{purpose="chat",type="completion"}',
      'llm_tokens_total{purpose="embedding",type="prompt"}',
    ];
    const snapshot = async () => Object.fromEntries(await Promise.all(series.map(async (s) => [s, await metric(h, s)] as const)));
    const before = await snapshot();

    scriptGateway(h.gateway, { chat: { chunks: ["One ", "two ", "three."] } });
    await exchange(h, await h.newSession(), "Count with me.");
    await h.chat(crypto.randomUUID(), "Nobody's session.");
    const busy = await h.newSession();
    await h.kv.set(lockKey(busy), "held", { ex: 30 });
    await readSse(await h.chat(busy, "Busy?"));
    scriptGateway(h.gateway, { chat: { status: 500 } });
    await readSse(await h.chat(await h.newSession(), "Fail."));
    scriptGateway(h.gateway, { chat: { chunks: Array.from({ length: 200 }, () => "more "), tokenDelayMs: 5 } });
    const reader = (await h.chat(await h.newSession(), "Leave early.")).body!.getReader();
    await reader.read(); // the opening comment
    await reader.read(); // the first token
    await reader.cancel();

    const after = await snapshot();
    const delta = Object.fromEntries(series.map((s) => [s, after[s]! - before[s]!]));
    expect(delta).toMatchObject({
      'chat_requests_total{outcome="ok"}': 1,
      'chat_requests_total{outcome="404"}': 1,
      'chat_requests_total{outcome="429"}': 1,
      'chat_requests_total{outcome="502"}': 1,
      'chat_requests_total{outcome="aborted"}': 1,
      // The completed reply and the abandoned one both reached their first token.
      chat_time_to_first_token_seconds_count: 2,
      'llm_tokens_total{purpose="chat",type="completion"}': 3,
    });
    for (const s of ['llm_tokens_total{purpose="rewrite",type="prompt"}', 'llm_tokens_total{purpose="rewrite",type="completion"}', 'llm_tokens_total{purpose="embedding",type="prompt"}']) {
      expect({ series: s, grew: delta[s]! > 0 }).toEqual({ series: s, grew: true });
    }
  });
});

describe("previewOf", () => {
  test.each([
    ["a short reply keeps all its words", "Good evening.", "Good evening.…"],
    ["line breaks and runs of spaces become single spaces", "Good\n\n evening,   reader.", "Good evening, reader.…"],
    ["a long reply is cut at 100 characters", "a".repeat(150), `${"a".repeat(100)}…`],
    ["a cut never splits a character outside the basic plane", "😀".repeat(120), `${"😀".repeat(100)}…`],
    ["a character outside the basic plane astride the first 400 code units is kept whole", `${"a".repeat(99)}${"😀".repeat(300)}`, `${"a".repeat(99)}😀…`],
    ["whitespace runs longer than the start read first still count as one space each", `${"word\n".repeat(5)}${" ".repeat(5_000)}end ${"x".repeat(200)}`, `word word word word word end ${"x".repeat(71)}…`],
    ["a reply of only whitespace and a few words past it", `${" ".repeat(3_000)}late words`, "late words…"],
    ["a long reply's preview is its first 100 characters", "The lamp is lit. ".repeat(5_000), `${"The lamp is lit. ".repeat(6).slice(0, 100)}…`],
  ])("%s", (_, reply, preview) => {
    expect(previewOf(reply)).toBe(preview);
  });
});
