import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { DEFAULT_CHAT_FIRST_TOKEN_TIMEOUT_MS } from "../../common/config-defaults.ts";
import { sessionCacheKey } from "../../common/contract/cache-keys.ts";
import type { Database } from "../../common/db/index.ts";
import { KvError, type KeyValueStore } from "../../common/kv/index.ts";
import { MODEL_FAILED, SESSION_BUSY } from "../../api/chat/turn.ts";
import { lastUserContent, readSse, requestsOfKind, scriptGateway, startEmbeddedChat, type ChatHarness, type EmbeddedChat } from "../support/chat.ts";

/**
 * What a chat turn leaves in the key-value store when the store fails at the worst moment, made
 * deterministic: a store that refuses chosen commands on chosen keys, or performs a write and then
 * loses the reply (what a Redis crash does to the command in flight). The restart tests in
 * faults-restarts.test.ts find the same through real crashes, by chance.
 */

type Command = "set" | "del" | "deleteIfEquals" | "mget" | "get";

interface Fault {
  command: Command;
  key: RegExp;
  /** "refuse": fail without doing it; "lose-reply": do it, then fail as if the connection dropped. */
  mode: "refuse" | "lose-reply";
  /** How many calls fail before the store behaves again. */
  times: number;
}

function flakyStore(kv: KeyValueStore) {
  const faults: Fault[] = [];
  const store = new Proxy(kv, {
    get(target, property) {
      const member = target[property as keyof KeyValueStore];
      if (typeof member !== "function") return member;
      return async (...args: unknown[]) => {
        const key = String(Array.isArray(args[0]) ? args[0][0] : args[0]);
        const fault = faults.find((f) => f.command === property && f.key.test(key) && f.times > 0);
        if (!fault) return (member as (...a: unknown[]) => unknown).apply(target, args);
        fault.times--;
        if (fault.mode === "lose-reply") await (member as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        throw new KvError(`redis ${String(property).toUpperCase()}: Connection closed`);
      };
    },
  });
  return { store, fail: (fault: Fault) => faults.push(fault), heal: () => (faults.length = 0) };
}

describe("a chat turn when the key-value store fails at the worst moment", () => {
  let chat: EmbeddedChat;
  let memory: KeyValueStore;
  let flaky: ReturnType<typeof flakyStore>;
  let h: ChatHarness;

  beforeAll(async () => {
    chat = await startEmbeddedChat({ wrapKv: (kv) => (flaky = flakyStore(kv)).store });
    ({ h, kv: memory } = chat);
  }, 60_000);
  afterAll(() => chat?.stop());
  beforeEach(() => {
    flaky.heal();
    h.gateway.reset();
    scriptGateway(h.gateway);
  });

  async function turn(session: string, message: string) {
    const { events } = await readSse(await h.chat(session, message));
    await h.app.settle();
    return events.at(-1);
  }

  test("a lock whose release failed is released once the store answers again, not left to lapse in 30 s", async () => {
    const session = await h.newSession();
    flaky.fail({ command: "deleteIfEquals", key: /^chat:lock:/, mode: "refuse", times: 2 });
    expect(await turn(session, "Are you there?")).toMatchObject({ done: true });
    expect(await memory.get(`chat:lock:${session}`)).toBeNull();
    expect(await turn(session, "And now?")).toMatchObject({ done: true });
  });

  test("a lock set whose reply was lost is undone at the end of the turn, not orphaned for 30 s", async () => {
    const session = await h.newSession();
    flaky.fail({ command: "set", key: /^chat:lock:/, mode: "lose-reply", times: 1 });
    expect(await turn(session, "Hello?")).toMatchObject({ done: true });
    expect(await memory.get(`chat:lock:${session}`)).toBeNull();
    expect(await turn(session, "Still there?")).toMatchObject({ done: true });
  });

  test("a fold key set whose reply was lost is undone after the fold, so the next message does not wait for a fold that is over", async () => {
    const session = await h.newSession();
    for (let i = 0; i < 5; i++) await turn(session, `Warm-up ${i}`);
    // The sixth exchange pushes the first out of the ten-message window: its fold takes the fold key.
    flaky.fail({ command: "set", key: /^chat:fold:/, mode: "lose-reply", times: 1 });
    expect(await turn(session, "The sixth")).toMatchObject({ done: true });
    expect(await memory.get(`chat:fold:${session}`)).toBeNull();
  });

  test("a session cache entry that could be neither replaced nor dropped is dropped once the store answers, so the next turn sees the whole history", async () => {
    const session = await h.newSession();
    await turn(session, "First");
    await turn(session, "Second");
    flaky.fail({ command: "set", key: /^chat:sess:/, mode: "refuse", times: 1 });
    flaky.fail({ command: "del", key: /^chat:sess:/, mode: "refuse", times: 1 });
    expect(await turn(session, "Third")).toMatchObject({ done: true });
    expect(await memory.get(sessionCacheKey(session))).toBeNull();

    h.gateway.reset();
    scriptGateway(h.gateway);
    await turn(session, "Fourth");
    const [chat] = requestsOfKind(h.gateway, "chat");
    expect(chat!.messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual(["First", "Second", "Third", "Fourth"]);
  });
});

describe("a reply that streams for longer than the session lock's expiry", () => {
  let chat: EmbeddedChat;
  let memory: KeyValueStore;
  let h: ChatHarness;
  let app: ChatHarness["app"];

  beforeAll(async () => {
    chat = await startEmbeddedChat();
    ({ h, kv: memory } = chat);
    // A one-second lock stands for SPEC's 30 s, so that a reply can outlive it within a test.
    app = await h.appWith({ config: { chatFirstTokenTimeoutMs: DEFAULT_CHAT_FIRST_TOKEN_TIMEOUT_MS, sessionLockTtlSeconds: 1 } });
  }, 60_000);
  afterAll(() => chat?.stop());

  /** The next chat call waits until released; every other call answers at once. */
  function holdNextReply() {
    const started = Promise.withResolvers<void>();
    const held = Promise.withResolvers<void>();
    let calls = 0;
    scriptGateway(h.gateway, {
      chat: async (request) => {
        if (calls++ === 0) {
          started.resolve();
          await held.promise;
        }
        return { chunks: ["Heard: ", lastUserContent(request)] };
      },
    });
    return { started: started.promise, release: () => held.resolve() };
  }

  test("keeps the session locked: a second message gets 429 for as long as the first reply runs", async () => {
    const session = await h.newSession();
    const hold = holdNextReply();
    const first = app.postJson("/character/chat", h.body(session, "First")).then(readSse);
    await hold.started;
    await Bun.sleep(2_500);
    const second = await readSse(await app.postJson("/character/chat", h.body(session, "Second")));
    expect(second.events).toEqual([{ error: SESSION_BUSY, code: 429 }]);
    hold.release();
    expect((await first).events.at(-1)).toMatchObject({ done: true });
    await app.settle();
    expect(await memory.get(`chat:lock:${session}`)).toBeNull();
  });

  test("an exchange saved while the first reply still streamed (its lock lost) stays in the model's history", async () => {
    const session = await h.newSession();
    const hold = holdNextReply();
    const first = app.postJson("/character/chat", h.body(session, "First")).then(readSse);
    await hold.started;
    // The holder stalled past its lease (a paused process): the lock is gone and another message gets it.
    await memory.del(`chat:lock:${session}`);
    const second = await readSse(await app.postJson("/character/chat", h.body(session, "Second")));
    expect(second.events.at(-1)).toMatchObject({ done: true });
    hold.release();
    expect((await first).events.at(-1)).toMatchObject({ done: true });
    await app.settle();

    h.gateway.reset();
    scriptGateway(h.gateway);
    expect((await readSse(await app.postJson("/character/chat", h.body(session, "Third")))).events.at(-1)).toMatchObject({ done: true });
    const [chat] = requestsOfKind(h.gateway, "chat");
    expect(chat!.messages.filter((m) => m.role === "user").map((m) => m.content).sort()).toEqual(["First", "Second", "Third"]);
  });
});

describe("a gateway that accepts the connection and never answers", () => {
  let chat: EmbeddedChat;
  let db: Database;
  let memory: KeyValueStore;
  let h: ChatHarness;

  beforeAll(async () => {
    chat = await startEmbeddedChat();
    ({ h, db, kv: memory } = chat);
  }, 60_000);
  afterAll(() => chat?.stop());

  test("gets the reader the 502 event once the first-token bound passes, asks once, saves nothing and frees the session", async () => {
    // Half a second stands for CHAT_FIRST_TOKEN_TIMEOUT_MS's 60 s.
    const app = await h.appWith({ config: { chatFirstTokenTimeoutMs: 500 } });
    scriptGateway(h.gateway, { chat: { hang: true } });
    const session = await h.newSession();
    const { events } = await readSse(await app.postJson("/character/chat", h.body(session, "Hello?")));
    expect(events).toEqual([{ error: MODEL_FAILED, code: 502 }]);
    await app.settle();
    // The gateway learns of the hang-up a moment after the client drops the connection.
    await h.gateway.waitForAbort(1);
    const streamed = h.gateway.chatRequests().filter((r) => (r.body as { stream?: boolean }).stream);
    expect(streamed).toHaveLength(1);
    expect(streamed[0]!.aborted).toBe(true);
    expect(await memory.get(`chat:lock:${session}`)).toBeNull();
    expect(await db.query("SELECT 1 FROM messages WHERE session_id = $1", [session])).toEqual([]);
  });
});
