import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { sessionCacheKey } from "../../common/contract/cache-keys.ts";
import type { Database } from "../../common/db/index.ts";
import { addToLibrary } from "../../common/db/frontend-rows.ts";
import { saveBookReadingPositions, saveCharacterKnowledge } from "../../common/db/reading-positions.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { OWN_LINES_HEADING, READING_POSITION_HEADING } from "../../common/llm/prompt-format.ts";
import { RECENT_LINES } from "../../api/chat/knowledge.ts";
import { CHARACTER_PROFILE, PASSAGES, PERSONA, readSse, requestsOfKind, scriptGateway, startEmbeddedChat, type ChatHarness, type EmbeddedChat } from "../support/chat.ts";

/**
 * Spoiler-safe chat on the chat side: the reader's position (from the body or the library) limits
 * the passages searched and the character's knowledge, and the prompt says how far the reader is.
 * The harness book has eight passages, one chunk each, so chunk i ends at (i + 1) / 8.
 * tests/integration/spoiler-safe.test.ts runs the whole path from ingestion on a story written for it.
 */

const CHUNK_ENDS = PASSAGES.map((_, i) => (i + 1) / PASSAGES.length);
const AT_QUARTER = {
  persona: "I am Elinor Vance, and I keep the lamp at Tidewater Point. My brother Thomas is away in the city.",
  profile: { voice: "plain", known_as_of: "the first quarter" },
};
const AT_HALF = { persona: "I am Elinor Vance; since the storm the whole harbour knows my name.", profile: { voice: "plain", known_as_of: "half" } };
const LATE_PASSAGES = PASSAGES.slice(3);
/** Elinor's lines through the book, one every twentieth of it: what she has said by any page. */
const ELINOR_LINES = Array.from({ length: 19 }, (_, i) => ({
  position: (i + 1) / 20,
  text: i === 3 ? "The oilskin packet stays in the lamp room until Thomas writes." : `Line ${i + 1} of Elinor's, said at ${(i + 1) * 5} percent.`,
}));

describe("a chat turn for a reader part-way through the book", () => {
  let chat: EmbeddedChat;
  let db: Database;
  let kv: KeyValueStore;
  let h: ChatHarness;

  beforeAll(async () => {
    chat = await startEmbeddedChat();
    ({ h, db, kv } = chat);
    await saveBookReadingPositions(db, h.world.bookId, { chunkEnds: CHUNK_ENDS, checkpoints: [0.25, 0.5, 0.75] });
    await saveCharacterKnowledge(db, [
      {
        characterId: h.world.characterId,
        firstAppearance: 0,
        checkpoints: [
          { position: 0.25, profileJson: AT_QUARTER.profile, systemPrompt: AT_QUARTER.persona },
          { position: 0.5, profileJson: AT_HALF.profile, systemPrompt: AT_HALF.persona },
        ],
        lines: ELINOR_LINES,
      },
    ]);
  }, 60_000);
  afterAll(() => chat?.stop());
  beforeEach(() => h.resetUpstreams());

  /** Everything the turn sent upstream: the model's requests, embeddings and rerank bodies. */
  function upstreamText(): string {
    return JSON.stringify([
      h.gateway.chatRequests().map((r) => r.body),
      h.gateway.embeddingRequests().map((r) => r.body),
      h.reranker.rerankRequests().map((r) => r.body),
    ]);
  }

  async function turn(session: string, message: string, extra: Record<string, unknown> = {}) {
    const { events } = await readSse(await h.chat(session, message, extra));
    await h.app.settle();
    const [chat] = requestsOfKind(h.gateway, "chat");
    return { events, system: chat?.messages[0]?.content ?? "", rewrite: requestsOfKind(h.gateway, "rewrite")[0] };
  }

  const sourcesOf = (events: Awaited<ReturnType<typeof turn>>["events"]) => {
    const done = events.at(-1);
    return done && "done" in done ? done.sources.map((s) => s.chunk_index) : [];
  };

  test("with no position known the turn is as before: whole-book persona and profile, any passage, no reading section", async () => {
    const session = await h.newSession();
    const { events, system, rewrite } = await turn(session, "Tell me about the oilskin packet and the last letter from Thomas.");
    expect(system).toStartWith(PERSONA);
    expect(system).not.toContain(READING_POSITION_HEADING);
    expect(JSON.stringify(rewrite)).toContain(CHARACTER_PROFILE.voice);
    expect(sourcesOf(events)).toContain(5);
  });

  test("at 40% only the chunks that end by 40% are searched, the quarter's persona and profile speak, and the prompt says how far", async () => {
    const session = await h.newSession();
    const { events, system, rewrite } = await turn(session, "Tell me about the oilskin packet and the last letter from Thomas.", { reading_position: 0.4 });
    expect(events.at(-1)).toMatchObject({ done: true });
    expect(system).toStartWith(AT_QUARTER.persona);
    expect(system).toContain(`${READING_POSITION_HEADING}\nThe reader has read about 40% of the book so far.`);
    expect(JSON.stringify(rewrite)).toContain(AT_QUARTER.profile.known_as_of);
    expect(JSON.stringify(rewrite)).not.toContain(CHARACTER_PROFILE.voice);
    expect(sourcesOf(events).every((i) => i <= 2)).toBe(true);
    const sent = upstreamText();
    for (const passage of LATE_PASSAGES) expect(sent).not.toContain(passage);
    expect(sent).not.toContain(PERSONA);
    expect(sent).not.toContain(AT_HALF.persona);
  });

  test.each([0.3, 0.6, 0.9])("at %p the persona carries her own latest lines before the position, a line of hers the question asks about, and none after it", async (position) => {
    const session = await h.newSession();
    const { system } = await turn(session, "What will you do with the oilskin packet?", { reading_position: position });
    const persona = system.slice(0, system.indexOf(READING_POSITION_HEADING));
    expect(persona).toContain(OWN_LINES_HEADING);
    const said = ELINOR_LINES.filter((l) => persona.includes(`"${l.text}"`));
    const before = ELINOR_LINES.filter((l) => l.position <= position + 1e-9);
    // The latest lines before the position, and the early line about the packet, whatever the position.
    const recent = before.slice(-RECENT_LINES);
    expect(said).toEqual(ELINOR_LINES.filter((l) => l === ELINOR_LINES[3] || recent.includes(l)));
    expect(upstreamText()).not.toContain(`said at ${Math.round(position * 100) + 5} percent`);
  });

  test("with no position the persona quotes only the lines the message asks about, from anywhere in the book", async () => {
    const session = await h.newSession();
    const { system } = await turn(session, "What will you do with the oilskin packet?");
    expect(system).toStartWith(PERSONA);
    expect(ELINOR_LINES.filter((l) => system.includes(`"${l.text}"`))).toEqual([ELINOR_LINES[3]!]);
    h.resetUpstreams();
    const other = await turn(await h.newSession(), "Good evening.");
    expect(other.system).not.toContain(OWN_LINES_HEADING);
  });

  test("the position comes from the reader's page in user_library, read with the session", async () => {
    const session = await h.newSession();
    await db.query("UPDATE books SET page_count = 200 WHERE id = $1", [h.world.bookId]);
    await addToLibrary(db, h.world.userId, h.world.bookId);
    try {
      await db.query("UPDATE user_library SET current_page = 110 WHERE user_id = $1 AND book_id = $2", [h.world.userId, h.world.bookId]);
      const { system, events } = await turn(session, "What happened in the storm?");
      expect(system).toStartWith(AT_HALF.persona);
      expect(system).toContain("The reader has read about 55% of the book so far.");
      expect(sourcesOf(events).every((i) => i <= 3)).toBe(true);
    } finally {
      await db.query("DELETE FROM user_library WHERE user_id = $1", [h.world.userId]);
      await db.query("UPDATE books SET page_count = NULL WHERE id = $1", [h.world.bookId]);
    }
  });

  /** Puts the reader on `page` of a 200-page book, as the frontend's reader moves the bookmark: straight in user_library. */
  async function bookmarkAt(page: number) {
    await db.query("UPDATE user_library SET current_page = $3 WHERE user_id = $1 AND book_id = $2", [h.world.userId, h.world.bookId, page]);
  }

  async function withLibraryRow(run: () => Promise<void>) {
    await db.query("UPDATE books SET page_count = 200 WHERE id = $1", [h.world.bookId]);
    await addToLibrary(db, h.world.userId, h.world.bookId);
    try {
      await run();
    } finally {
      await db.query("DELETE FROM user_library WHERE user_id = $1", [h.world.userId]);
      await db.query("UPDATE books SET page_count = NULL WHERE id = $1", [h.world.bookId]);
    }
  }

  /** What a turn sent upstream must hold no passage that ends after 10% (none does: the first ends at 12.5%). */
  function expectNothingPast10Percent(next: Awaited<ReturnType<typeof turn>>) {
    expect(next.events.at(-1)).toMatchObject({ done: true });
    expect(next.system).toContain("The reader has read about 10% of the book so far.");
    expect(sourcesOf(next.events)).toEqual([]);
    const sent = upstreamText();
    for (const passage of PASSAGES) expect(sent).not.toContain(passage);
  }

  test("a reader who moves the bookmark back from 90% to 10% gets nothing past 10% on the very next turn", async () => {
    await withLibraryRow(async () => {
      const session = await h.newSession();
      await bookmarkAt(180);
      const far = await turn(session, "Tell me about the inspector and the log.");
      expect(far.system).toContain("The reader has read about 90% of the book so far.");
      expect(sourcesOf(far.events).some((i) => i >= 5)).toBe(true);

      await bookmarkAt(20);
      h.resetUpstreams();
      expectNothingPast10Percent(await turn(session, "Tell me about the inspector and the log."));
    });
  });

  test("a summary fold that ends after the bookmark moved back (and the cache entry was dropped) does not bring the old position back", async () => {
    await withLibraryRow(async () => {
      const session = await h.newSession();
      await bookmarkAt(180);
      for (let i = 0; i < 5; i++) await turn(session, `Warm-up ${i}: the storm, the letter, the inspector.`);
      // The sixth exchange pushes the first two messages out of the window: a fold runs after it, held here.
      const started = Promise.withResolvers<void>();
      const held = Promise.withResolvers<void>();
      scriptGateway(h.gateway, { summary: async () => (started.resolve(), await held.promise, { content: "They spoke of the storm." }) });
      const { events } = await readSse(await h.chat(session, "The sixth: what did the inspector find?"));
      expect(events.at(-1)).toMatchObject({ done: true });
      await started.promise;
      await bookmarkAt(20);
      await kv.del(sessionCacheKey(session));
      held.resolve();
      await h.app.settle();
      expect(requestsOfKind(h.gateway, "summary")).toHaveLength(1);

      h.resetUpstreams();
      expectNothingPast10Percent(await turn(session, "Tell me about the inspector and the log."));
    });
  });

  test("a position in the body wins over the library's page; 1 is the whole book", async () => {
    const session = await h.newSession();
    await db.query("UPDATE books SET page_count = 100 WHERE id = $1", [h.world.bookId]);
    await addToLibrary(db, h.world.userId, h.world.bookId);
    try {
      await db.query("UPDATE user_library SET current_page = 30 WHERE user_id = $1 AND book_id = $2", [h.world.userId, h.world.bookId]);
      expect((await turn(session, "Hello", { reading_position: 0.6 })).system).toStartWith(AT_HALF.persona);
      h.gateway.reset();
      scriptGateway(h.gateway);
      const whole = await turn(session, "Hello again", { reading_position: 1 });
      expect(whole.system).toStartWith(PERSONA);
      expect(whole.system).not.toContain(READING_POSITION_HEADING);
    } finally {
      await db.query("DELETE FROM user_library WHERE user_id = $1", [h.world.userId]);
      await db.query("UPDATE books SET page_count = NULL WHERE id = $1", [h.world.bookId]);
    }
  });

  test("before the first chunk ends nothing is searched, and before the first checkpoint the character speaks from the name alone", async () => {
    const session = await h.newSession();
    const { system, events } = await turn(session, "Who are you?", { reading_position: 0.1 });
    expect(sourcesOf(events)).toEqual([]);
    expect(h.gateway.embeddingRequests()).toHaveLength(0);
    expect(h.reranker.rerankRequests()).toHaveLength(0);
    expect(system).toStartWith('You are Elinor Vance, a character in the book "The Tidewater Light". Speak as Elinor Vance');
    expect(upstreamText()).not.toContain(AT_QUARTER.persona);
  });

  test("a failed checkpoint is never replaced by a later one: at 80% the half-way persona speaks, not the whole book's", async () => {
    const session = await h.newSession();
    const { system } = await turn(session, "Where is Thomas now?", { reading_position: 0.8 });
    expect(system).toStartWith(AT_HALF.persona);
    expect(upstreamText()).not.toContain(PERSONA);
  });

  test("a character first seen after the position speaks from the name alone, never from their later checkpoint", async () => {
    const persona = "I am Thomas Vance, writing from the city to a sister I left behind.";
    await saveCharacterKnowledge(db, [
      { characterId: h.world.otherCharacterId, firstAppearance: 0.3, checkpoints: [{ position: 0.5, profileJson: { a: 1 }, systemPrompt: persona }], lines: [{ position: 0.6, text: "I never meant to leave her alone with the lamp." }] },
    ]);
    const session = await h.newSession({ characterId: h.world.otherCharacterId });
    const { system } = await turn(session, "Why did you leave?", { reading_position: 0.2, character_id: h.world.otherCharacterId });
    expect(system).toStartWith('You are Thomas Vance, a character in the book "The Tidewater Light".');
    expect(upstreamText()).not.toContain(persona);
  });

  test("a book ingested before positions were recorded gives a positioned reader no passages and the name alone", async () => {
    await db.query("DELETE FROM book_reading_positions WHERE book_id = $1", [h.world.bookId]);
    await kv.del(`chat:positions:${h.world.bookId}`);
    try {
      const session = await h.newSession();
      const { system, events } = await turn(session, "Tell me about the storm.", { reading_position: 0.9 });
      expect(events.at(-1)).toMatchObject({ done: true });
      expect(sourcesOf(events)).toEqual([]);
      expect(system).toStartWith('You are Elinor Vance, a character in the book "The Tidewater Light". Speak as Elinor Vance');
    } finally {
      await saveBookReadingPositions(db, h.world.bookId, { chunkEnds: CHUNK_ENDS, checkpoints: [0.25, 0.5, 0.75] });
    }
  });

  test.each([[-0.1], [1.5], ["half"], [null]])("reading_position %p is refused with 400 and nothing is asked of the model", async (value) => {
    const session = await h.newSession();
    const res = await h.chat(session, "Hello", { reading_position: value });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: expect.stringContaining("reading_position") });
    expect(h.gateway.chatRequests()).toHaveLength(0);
  });
});
