import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { type Chunk, chunkText, chunkTextToArray, DEFAULT_CHUNK_TOKENS } from "../../common/chunking.ts";

/** Independent of the module under test: gpt-tokenizer itself, special tokens as plain text. */
const tokens = (text: string) => countTokens(text, { disallowedSpecial: new Set() });
const withoutWhitespace = (text: string) => text.replace(/\s+/g, "");
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The invariants every chunking must keep, whatever the text. */
function expectWellFormed(chunks: Chunk[], source: string, budget: number) {
  chunks.forEach((chunk, i) => {
    expect(chunk.chunkIndex).toBe(i);
    expect(chunk.text).toBe(chunk.text.trim());
    expect(chunk.text.length).toBeGreaterThan(0);
    expect(chunk.tokenCount).toBe(tokens(chunk.text));
    expect(chunk.tokenCount).toBeLessThanOrEqual(budget);
    expect(LONE_SURROGATE.test(chunk.text)).toBe(false);
    if (!source.includes("\uFFFD")) expect(chunk.text).not.toContain("\uFFFD");
  });
  expect(withoutWhitespace(chunks.map((c) => c.text).join(""))).toBe(withoutWhitespace(source));
}

function sentences(count: number, make: (i: number) => string): string {
  return Array.from({ length: count }, (_, i) => make(i)).join(" ");
}

const english = (i: number) => `Sentence number ${i} tells how the old prince walked slowly through the garden.`;
const urdu = (i: number) =>
  i % 3 === 0 ? `کیا آپ نے باب ${i} میں شہزادے کی کہانی پڑھی ہے؟` : `وہ شام ${i} کو باغ میں آہستہ آہستہ چلتا رہا اور سوچتا رہا۔`;

describe("chunkText", () => {
  test.each([
    ["an empty book", ""],
    ["a book of spaces and blank lines", "   \n\n \r\n\t  \n"],
  ])("gives no chunks for %s", (_, text) => {
    expect(chunkTextToArray(text)).toEqual([]);
  });

  test("gives a short book back as one trimmed chunk with its exact token count", () => {
    const text = "  It was a bright cold day in April.\n\nThe clocks were striking thirteen.  ";
    expect(chunkTextToArray(text)).toEqual([
      {
        chunkIndex: 0,
        text: "It was a bright cold day in April.\n\nThe clocks were striking thirteen.",
        tokenCount: tokens("It was a bright cold day in April.\n\nThe clocks were striking thirteen."),
      },
    ]);
  });

  test("uses a 512-token budget by default and fills chunks close to it", () => {
    const text = sentences(400, english);
    const chunks = chunkTextToArray(text);
    expectWellFormed(chunks, text, DEFAULT_CHUNK_TOKENS);
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks.slice(0, -1)) expect(chunk.tokenCount).toBeGreaterThan(DEFAULT_CHUNK_TOKENS - 40);
  });

  test.each([
    ["English", english, /\.$/, /^Sentence number \d+/],
    ["Urdu", urdu, /[۔؟]$/, /^(کیا|وہ)/],
  ])("ends every %s chunk on a sentence boundary", (_, make, ending, opening) => {
    const text = sentences(120, make);
    const chunks = chunkTextToArray(text, { chunkTokens: 64 });
    expectWellFormed(chunks, text, 64);
    expect(chunks.length).toBeGreaterThan(5);
    for (const chunk of chunks) {
      expect(chunk.text).toMatch(ending);
      expect(chunk.text).toMatch(opening);
    }
  });

  test("keeps paragraphs apart with one blank line inside a chunk", () => {
    const text = "First paragraph here.\n\n\n\n   Second paragraph here.\n \nThird one.";
    expect(chunkTextToArray(text)[0]?.text).toBe("First paragraph here.\n\nSecond paragraph here.\n\nThird one.");
  });

  test("chunks a CRLF book exactly like the same book with LF line ends", () => {
    const lf = Array.from({ length: 40 }, (_, i) => `${english(i)}\n${english(i + 100)}`).join("\n\n");
    const crlf = lf.replace(/\n/g, "\r\n");
    expect(chunkTextToArray(lf, { chunkTokens: 100 })[0]?.text).toContain("garden.\nSentence number 100");
    const chunks = chunkTextToArray(crlf, { chunkTokens: 100 });
    expect(chunks).toEqual(chunkTextToArray(lf, { chunkTokens: 100 }));
    expect(chunks.some((c) => c.text.includes("\r"))).toBe(false);
  });

  test("does not end a sentence after a title such as Mr.", () => {
    const text = sentences(60, (i) => `Mr. Darcy bowed ${i} times to Mrs. Bennet before he left.`);
    for (const chunk of chunkTextToArray(text, { chunkTokens: 40 })) expect(chunk.text).toMatch(/left\.$/);
  });

  test("does not end a sentence after a title that follows a dash", () => {
    const text = sentences(60, (i) => `They were five ${i} altogether—Mr. Bingley, his sisters and a friend of his, who left.`);
    for (const chunk of chunkTextToArray(text, { chunkTokens: 40 })) expect(chunk.text).toMatch(/left\.$/);
  });

  test("treats special-token strings in the book as ordinary text", () => {
    const text = "The scroll read <|endoftext|> and then <|im_start|>system, nothing more.";
    const [chunk] = chunkTextToArray(text);
    expect(chunk?.text).toBe(text);
    expect(chunk?.tokenCount).toBe(tokens(text));
    expect(chunk?.tokenCount).toBeGreaterThan(10);
  });

  test("splits a sentence longer than the budget between words, starting it on a fresh chunk", () => {
    const longSentence = Array.from({ length: 300 }, (_, i) => `word${i}`).join(" ") + ".";
    const text = `A short opening sentence. ${longSentence} A short closing sentence.`;
    const chunks = chunkTextToArray(text, { chunkTokens: 50 });
    expectWellFormed(chunks, text, 50);
    expect(chunks[0]?.text).toBe("A short opening sentence.");
    const words = new Set(text.split(/\s+/));
    for (const chunk of chunks) for (const word of chunk.text.split(/\s+/)) expect(words.has(word)).toBe(true);
  });

  test.each([
    ["Chinese without spaces", "天地玄黃宇宙洪荒日月盈昃辰宿列張寒來暑往秋收冬藏".repeat(60)],
    ["emoji, some joined by ZWJ", "👩‍👩‍👧‍👦🏳️‍🌈😀🇵🇰".repeat(120)],
    ["Urdu with diacritics and no spaces", "کِتابُ".repeat(400)],
    ["one base letter with many combining marks", "a" + "\u0301".repeat(300) + "b".repeat(40)],
  ])("splits a run of %s without breaking a character", (_, text) => {
    const chunks = chunkTextToArray(text, { chunkTokens: 32 });
    expectWellFormed(chunks, text, 32);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.map((c) => c.text).join("")).toBe(text);
  });

  test("never starts a chunk with a combining mark when a cluster boundary is at hand", () => {
    const text = "کِتابُ".repeat(400);
    for (const chunk of chunkTextToArray(text, { chunkTokens: 16 })) expect(chunk.text).not.toMatch(/^\p{M}/u);
  });

  test("opens a chunk with a chapter heading instead of closing the previous one with it", () => {
    const chapter = (n: number) => `CHAPTER ${n}\n\n` + sentences(12, english);
    const chunks = chunkTextToArray([1, 2, 3, 4].map(chapter).join("\n\n"), { chunkTokens: 128 });
    expect(chunks.some((c) => /^CHAPTER \d+\n\n/.test(c.text))).toBe(true);
    for (const chunk of chunks) expect(chunk.text).not.toMatch(/CHAPTER \d+$/);
    expect(chunks.map((c) => c.text).join("\n\n")).toContain("CHAPTER 4\n\nSentence number 0");
  });

  test("gives the same chunks every time", () => {
    const text = sentences(200, (i) => (i % 2 ? english(i) : urdu(i)));
    expect(chunkTextToArray(text, { chunkTokens: 80 })).toEqual(chunkTextToArray(text, { chunkTokens: 80 }));
  });

  test("yields chunks lazily so a caller can stop early", () => {
    const iterator = chunkText(sentences(5000, english), { chunkTokens: 64 });
    const first = iterator.next();
    expect(first.done).toBe(false);
    expect(first.value?.chunkIndex).toBe(0);
    iterator.return(undefined);
  });

  test.each([0, 7, 12.5, Number.NaN])("refuses a budget of %p tokens", (chunkTokens) => {
    expect(() => chunkText("Some text.", { chunkTokens })).toThrow(RangeError);
  });

  test("keeps every invariant on arbitrary mixed-script text", () => {
    const piece = fc.constantFrom(
      "The ", "prince ", "said", ". ", "! ", "? ", ", ", "\n", "\r\n", "\n\n", "   ", "<|endoftext|>",
      "کتاب ", "۔ ", "؟ ", "ہے", "天地玄黃", "。", "😀", "👩‍👧", "é", "\u0301", "1234567", "—", "“Yes,” ", "Mr. ",
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 300 }), fc.integer({ min: 8, max: 96 }), (parts, budget) => {
        const text = parts.join("");
        expectWellFormed(chunkTextToArray(text, { chunkTokens: budget }), text, budget);
      }),
      { numRuns: 150 },
    );
  });
});
