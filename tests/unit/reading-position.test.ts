import { describe, expect, test } from "bun:test";
import { buildChatSystemPrompt } from "../../common/prompt/chat.ts";
import { READING_POSITION_HEADING } from "../../common/llm/prompt-format.ts";
import { cachedRewrite, rewriteCacheKey, withCachedRewrite } from "../../common/prompt/rewrite.ts";
import { lastChunkWithin, positionFromPages, turnPosition } from "../../common/retrieval/reading-position.ts";
import { attemptedCheckpoints, checkpointBudget } from "../../ingest/characters/checkpoints.ts";
import { knowledgeAt, linesFor, RECENT_LINES, RELEVANT_LINES } from "../../api/chat/knowledge.ts";

describe("pages to a position", () => {
  test.each([
    ["page 40 of 100", 40, 100, 0.4],
    ["page 1 of 3", 1, 3, 1 / 3],
    ["page 0 (the column's default: the reader never moved the bookmark)", 0, 100, null],
    ["the last page: the whole book", 100, 100, null],
    ["a page past the end", 101, 100, null],
    ["no page count", 40, null, null],
    ["a page count of 0", 40, 0, null],
    ["no library row", null, 100, null],
    ["a negative page", -3, 100, null],
  ] as const)("%s", (_, page, count, expected) => {
    expect(positionFromPages(page, count)).toBe(expected);
  });
});

describe("the position a turn uses", () => {
  test.each([
    ["the body's, over the library's", 0.2, 0.7, 0.2],
    ["the library's when the body has none", undefined, 0.7, 0.7],
    ["the whole book when neither has one", undefined, null, null],
    ["the whole book for a body at 1", 1, 0.3, null],
    ["0 from the body: the reader has read nothing", 0, 0.7, 0],
  ] as const)("%s", (_, body, library, expected) => {
    expect(turnPosition(body, library)).toBe(expected);
  });
});

describe("pages → position → last chunk", () => {
  // Ten chunks of a book, the fifth one long.
  const ends = [0.05, 0.1, 0.15, 0.2, 0.5, 0.6, 0.7, 0.8, 0.9, 1];
  test.each([
    ["page 40 of 100 stops before the long chunk", 40, 100, 3],
    ["page 50 of 100 reaches its end exactly", 50, 100, 4],
    ["page 3 of 100 is inside the first chunk: none", 3, 100, -1],
    ["page 95 of 100", 95, 100, 8],
  ] as const)("%s", (_, page, count, expected) => {
    expect(lastChunkWithin(ends, positionFromPages(page, count)!)).toBe(expected);
  });
  test.each([
    ["no chunks", [], 0.5, -1],
    ["one chunk, read", [1], 1, 0],
    ["one chunk, not read", [1], 0.99, -1],
    ["equal ends (empty chunks)", [0.2, 0.2, 0.4], 0.2, 1],
  ] as const)("%s", (_, chunkEnds, position, expected) => {
    expect(lastChunkWithin(chunkEnds, position)).toBe(expected);
  });
});

describe("checkpoints", () => {
  test.each([
    ["the default, 2: one per character on average", 2, 12, 12],
    ["4: three per character on average", 4, 12, 36],
    ["1: the whole book only", 1, 12, 0],
    ["0 is taken as 1", 0, 12, 0],
    ["a book with no characters", 4, 0, 0],
  ] as const)("the checkpoint budget, %s", (_, setting, characters, expected) => {
    expect(checkpointBudget(setting, characters)).toBe(expected);
  });

  test.each([
    ["checkpoints off: none, so turns use the whole book", false, [], []],
    ["the positions placed, each once, in order", true, [0.5, 0.0123, 0.5, 0.3], [0.0123, 0.3, 0.5]],
    ["checkpoints on but none placed: [1], never the empty list that means the whole book", true, [], [1]],
  ] as const)("the book's attempted checkpoints: %s", (_, enabled, placed, expected) => {
    const attempted = attemptedCheckpoints(enabled, placed);
    expect(attempted).toEqual([...expected]);
    if (enabled) expect(knowledgeAt(0.99, attempted, []).kind).toBe("name-only");
  });

  const attempted = [0.25, 0.5, 0.75];
  const at = (...positions: number[]) => positions.map((position) => ({ position }));
  test.each([
    ["the latest at or before the position", 0.6, attempted, at(0.25, 0.5, 0.75), { kind: "checkpoint", checkpoint: { position: 0.5 } }],
    ["a checkpoint exactly at the position", 0.5, attempted, at(0.25, 0.5, 0.75), { kind: "checkpoint", checkpoint: { position: 0.5 } }],
    ["past the last checkpoint, before the end", 0.99, attempted, at(0.25, 0.5, 0.75), { kind: "checkpoint", checkpoint: { position: 0.75 } }],
    ["a failed checkpoint falls back to an earlier one", 0.6, attempted, at(0.25, 0.75), { kind: "checkpoint", checkpoint: { position: 0.25 } }],
    ["never to a later one: the name alone", 0.6, attempted, at(0.75), { kind: "name-only" }],
    ["before the first checkpoint: the name alone", 0.1, attempted, at(0.25), { kind: "name-only" }],
    ["a character met later: the name alone, never their later checkpoint", 0.3, attempted, at(0.5, 0.75), { kind: "name-only" }],
    ["a character met later with no checkpoint: the name alone", 0.3, attempted, [], { kind: "name-only" }],
    ["a book without checkpoints: the whole book, as before", 0.3, [], [], { kind: "whole-book" }],
  ] as const)("%s", (_, position, tried, checkpoints, expected) => {
    expect(knowledgeAt(position, tried, checkpoints)).toEqual(expected);
  });
});

describe("the lines a persona quotes at a position", () => {
  const said = (n: number, text = (i: number) => `line ${i}`) => Array.from({ length: n }, (_, i) => ({ position: (i + 1) / (n + 1), text: text(i) }));
  interface Case {
    name: string;
    lines: { position: number; text: string }[];
    position: number | null;
    question: string;
    expected: string[];
  }
  test.each<Case>([
    {
      name: "the whole book: only the lines the question asks about, wherever they are",
      lines: said(30, (i) => (i === 27 ? "The lighthouse keeper's ledger is mine" : `line ${i}`)),
      position: null,
      question: "Who keeps the ledger at the lighthouse?",
      expected: ["The lighthouse keeper's ledger is mine"],
    },
    { name: "nothing before the position: no line", lines: said(5), position: 0.1, question: "hello", expected: [] },
    { name: "a few lines before it: all of them", lines: said(5), position: 0.5, question: "hello", expected: ["line 0", "line 1", "line 2"] },
    { name: "a line exactly at the position counts as said", lines: [{ position: 0.5, text: "at half" }], position: 0.5, question: "", expected: ["at half"] },
    {
      name: "many lines: the latest ones, never one after the position",
      lines: said(30),
      position: 0.5,
      question: "hello",
      expected: Array.from({ length: RECENT_LINES }, (_, i) => `line ${15 - RECENT_LINES + i}`),
    },
    {
      name: "an earlier line sharing the question's words comes with them, in book order",
      lines: said(30, (i) => (i === 2 ? "The lighthouse keeper's ledger is mine" : `line ${i}`)),
      position: 0.5,
      question: "Who keeps the ledger at the lighthouse?",
      expected: ["The lighthouse keeper's ledger is mine", ...Array.from({ length: RECENT_LINES }, (_, i) => `line ${15 - RECENT_LINES + i}`)],
    },
    {
      name: "common words alone make no line relevant",
      lines: said(30, (i) => (i === 2 ? "What would you have them do about that?" : `line ${i}`)),
      position: 0.5,
      question: "What would you do about that?",
      expected: Array.from({ length: RECENT_LINES }, (_, i) => `line ${15 - RECENT_LINES + i}`),
    },
    {
      name: "at most RELEVANT_LINES earlier lines, the ones sharing the most words, the later of equals first",
      lines: said(40, (i) => (i < 10 ? (i % 2 === 0 ? `storm lamp harbour ${i}` : `storm ${i}`) : `line ${i}`)),
      position: 0.9,
      question: "the storm, the lamp and the harbour",
      expected: [...[2, 4, 6, 8].slice(-RELEVANT_LINES).map((i) => `storm lamp harbour ${i}`), ...Array.from({ length: RECENT_LINES }, (_, i) => `line ${36 - RECENT_LINES + i}`)],
    },
  ])("$name", ({ lines, position, question, expected }) => {
    expect(linesFor(lines, position, question)).toEqual(expected);
  });
});

describe("the prompt for a reader part-way through", () => {
  const base = { personaPrompt: "I am Mara.", passages: [] };
  test.each([
    [0.4, "about 40%"],
    [0, "about 0%"],
    [0.996, "about 99%"],
  ] as const)("at %p it says %s, after the persona and before the passages", (position, words) => {
    const prompt = buildChatSystemPrompt({ ...base, readingPosition: position });
    expect(prompt).toContain(`${READING_POSITION_HEADING}\nThe reader has read ${words} of the book so far.`);
    expect(prompt).toContain("Do not reveal, hint at or confirm anything that happens later in the book");
    expect(prompt.indexOf("I am Mara.")).toBeLessThan(prompt.indexOf(READING_POSITION_HEADING));
    expect(prompt.indexOf(READING_POSITION_HEADING)).toBeLessThan(prompt.indexOf("## Relevant Passages"));
  });
  test("with no position the prompt is the whole book's, without the section", () => {
    expect(buildChatSystemPrompt({ ...base, readingPosition: null })).toBe(buildChatSystemPrompt(base));
    expect(buildChatSystemPrompt(base)).not.toContain(READING_POSITION_HEADING);
  });
  test("a rewrite made from a checkpoint is cached apart from the whole book's, under the spec's key", () => {
    expect(rewriteCacheKey("c1", "Who are you?", [])).toMatch(/^chat:qr:c1:[0-9a-f]{16}$/);
    const whole = { narrativeQuery: "the whole story", keywordQuery: "whole" };
    const early = { narrativeQuery: "the first chapter", keywordQuery: "first" };
    const value = withCachedRewrite(withCachedRewrite(null, undefined, whole), "at0.25", early);
    expect(cachedRewrite(value, undefined, "Who are you?")).toEqual({ ...whole, fellBack: false });
    expect(cachedRewrite(value, "at0.25", "Who are you?")).toEqual({ ...early, fellBack: false });
    // Knowledge no rewrite was made from finds none, and so does a value in another shape.
    expect(cachedRewrite(value, "at0.5", "Who are you?")).toEqual({ narrativeQuery: "Who are you?", keywordQuery: "Who are you?", fellBack: true });
    expect(cachedRewrite('{"narrative_query":"a","keyword_query":"b"}', undefined, "Hi").fellBack).toBe(true);
    expect(JSON.parse(withCachedRewrite("not json", "at0.25", early))).toEqual({ "at0.25": { narrative_query: "the first chapter", keyword_query: "first" } });
  });
});
