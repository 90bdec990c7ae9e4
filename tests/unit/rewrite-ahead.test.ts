import { describe, expect, test } from "bun:test";
import type { CachedEntries, ChatCharacter, ChatSessionState } from "../../api/chat/chat-cache.ts";
import type { Knowledge } from "../../api/chat/knowledge.ts";
import { AHEAD_WASTE_LIMIT, AHEAD_WASTE_WINDOW_MS, createRewriteAhead, lastPageKey, type AheadFound } from "../../api/chat/rewrite-ahead.ts";
import type { createRewriter, Rewrite } from "../../api/chat/rewrite.ts";
import type { ChatRequest } from "../../common/contract/schemas.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { silentLogger } from "../../common/log.ts";

const ids = { user_id: "u", character_id: "c", book_id: "b", session_id: "s" };
const request = (extra: Partial<ChatRequest> = {}): ChatRequest => ({ ...ids, user_message: "Where is the lamp?", ...extra });
const character: ChatCharacter = { id: "c", name: "Ada", system_prompt: null, profile_json: null, description: null, book_id: "b", lines: [] };
const book = { id: "b", title: "The Light", author: null, description: null };
const session = (extra: Partial<ChatSessionState> = {}): ChatSessionState => ({
  id: "s",
  user_id: "u",
  character_id: "c",
  book_id: "b",
  message_count: 1,
  messages: [
    { role: "user", content: "Hello." },
    { role: "assistant", content: "Good evening." },
  ],
  summary: null,
  ...extra,
});
/** What the turn's first command found: by default a cached session and the reader last at 40 %. */
const found = (entries: Partial<CachedEntries> = {}, more: Partial<Pick<AheadFound, "folding" | "lastPage">> = {}): AheadFound => ({
  entries: { character, book, session: session(), positioned: [null, null], alsoRead: [], ...entries },
  folding: null,
  early: { first: null, unsaved: null },
  lastPage: "0.4",
  ...more,
});
/** Knowledge tagged by the position it was asked for, as checkpoints at 0.5 would give. */
const knowledgeAt = (position: number | null): Knowledge => ({
  position,
  maxChunkIndex: undefined,
  persona: "",
  profile: null,
  description: null,
  tag: position === null ? undefined : position < 0.5 ? "name" : "at0.5",
  ownLines: [],
});

function harness() {
  let clock = 0;
  const asked: { position: number | null; history: number }[] = [];
  const aborted: boolean[] = [];
  const rewriter = {
    earlyKeys: () => [],
    lookup: (_c: string, _m: string, _h: unknown) => ({ key: "k", value: Promise.resolve(null) }),
    rewrite: async (_c: unknown, _m: string, s: Pick<ChatSessionState, "messages">, k: { tag: string | undefined }, signal: AbortSignal): Promise<Rewrite> => {
      const index = aborted.push(false) - 1;
      signal.addEventListener("abort", () => (aborted[index] = true));
      asked.push({ position: k.tag === undefined ? null : k.tag === "name" ? 0 : 0.5, history: s.messages.length });
      return { queries: { narrativeQuery: "n", keywordQuery: "k", fellBack: false } };
    },
  } as unknown as ReturnType<typeof createRewriter>;
  const kv = createMemoryKeyValueStore();
  const ahead = createRewriteAhead({ kv, track: () => {}, rewriter, knowledgeFor: async (_c, _b, position) => knowledgeAt(position), log: silentLogger, now: () => clock });
  return { ahead, rewriter, asked, aborted, advance: (ms: number) => (clock += ms) };
}

describe("the rewrite made ahead of the database", () => {
  test.each<[string, ChatRequest, AheadFound, boolean]>([
    ["a cached session: on the reader's last page in the book → started", request(), found(), true],
    ["a cached session and the body's position → started", request({ reading_position: 0.7 }), found(), true],
    ["no cached session, the body's position: on an empty history → started", request({ reading_position: 0.7 }), found({ session: null }), true],
    ["no cached session, the reader's last page (another session of theirs): on an empty history → started", request(), found({ session: null }), true],
    ["the whole book as the last page → started", request(), found({}, { lastPage: "1" }), true],
    ["no position in the body and no last page: nothing to guess the page from → not started", request(), found({}, { lastPage: null }), false],
    ["a last page that is not a position → not started", request(), found({}, { lastPage: "1.5" }), false],
    ["the store failed to say the last page → not started", request(), found({}, { lastPage: undefined }), false],
    ["another reader's session: refused whatever the database says → not started", request(), found({ session: session({ user_id: "other" }) }), false],
    ["a character of another book → not started", request(), found({ character: { ...character, book_id: "other" } }), false],
    ["no cached character → not started", request(), found({ character: null }), false],
    ["no cached book → not started", request(), found({ book: null }), false],
    ["a summary fold in progress: the history may change → not started", request(), found({}, { folding: "folding" }), false],
  ])("%s", async (_, req, at, started) => {
    const { ahead, asked } = harness();
    const made = ahead.start(req, at);
    expect(made !== null).toBe(started);
    await made?.rewrite;
    expect(asked.length).toBe(started ? 1 : 0);
  });

  test.each<[string, number | null, ChatSessionState["messages"], boolean]>([
    ["the same knowledge and history: used", 0.45, session().messages, true],
    ["the page moved within the same knowledge: used", 0.1, session().messages, true],
    ["the page passed a checkpoint: made again", 0.6, session().messages, false],
    ["another history: made again", 0.4, [...session().messages, { role: "user", content: "More?" }, { role: "assistant", content: "Yes." }], false],
  ])("%s", async (_, position, history, used) => {
    const { ahead, aborted } = harness();
    const made = ahead.start(request(), found());
    const rewrite = await ahead.use(made, knowledgeAt(position), history);
    expect(rewrite !== null).toBe(used);
    expect(aborted).toEqual([!used]);
  });

  test(`once ${AHEAD_WASTE_LIMIT} were thrown away within a minute nothing is started until the minute has passed`, () => {
    const { ahead, advance } = harness();
    const unknownSession = () => ahead.start(request({ reading_position: 0.7 }), found({ session: null }));
    for (let i = 0; i < AHEAD_WASTE_LIMIT; i++) {
      const made = unknownSession();
      expect(made).not.toBeNull();
      made!.abandon("the request is refused");
      advance(1_000);
    }
    expect(unknownSession()).toBeNull();
    // The first was thrown away AHEAD_WASTE_LIMIT seconds ago: the window moves past it.
    advance(AHEAD_WASTE_WINDOW_MS - AHEAD_WASTE_LIMIT * 1_000 + 1);
    expect(unknownSession()).not.toBeNull();
  });

  test.each<[string, number | null, string]>([
    ["a reader at 40 %", 0.4, "0.4"],
    ["a reader of the whole book", null, "1"],
  ])("%s is remembered for the next turn's guess", async (_, position, stored) => {
    const kv = createMemoryKeyValueStore();
    const writes: Promise<unknown>[] = [];
    const ahead = createRewriteAhead({ kv, track: (w) => writes.push(w), rewriter: harness().rewriter, knowledgeFor: async (_c, _b, p) => knowledgeAt(p), log: silentLogger });
    ahead.rememberPage(ids, position);
    await Promise.all(writes);
    expect(await kv.get(lastPageKey(ids.user_id, ids.book_id))).toBe(stored);
  });

  test("a rewrite thrown away twice counts once", () => {
    const { ahead } = harness();
    const made = ahead.start(request(), found())!;
    made.abandon("the reader left");
    made.abandon("the reader left");
    for (let i = 0; i < AHEAD_WASTE_LIMIT - 2; i++) ahead.start(request(), found())!.abandon("the request is refused");
    const last = ahead.start(request(), found());
    expect(last).not.toBeNull();
    last!.abandon("the request is refused");
    expect(ahead.start(request(), found())).toBeNull();
  });
});
