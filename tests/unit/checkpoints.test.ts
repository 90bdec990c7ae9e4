import { describe, expect, test } from "bun:test";
import { chunkEndLocator, chunkTextToArray } from "../../common/chunking.ts";
import { createTextLocator, firstMention, knownAt, placeCharacter } from "../../ingest/checkpoints.ts";
import type { FoundCharacter } from "../../ingest/character-selection.ts";

describe("where each chunk ends in the book", () => {
  test.each([
    ["one paragraph", "Alpha beta gamma.", ["Alpha beta gamma."], [1]],
    ["CRLF and blank lines between paragraphs", "One two.\r\n\r\n\r\nThree four.", ["One two.", "Three four."], [8 / 25, 1]],
    ["leading and trailing whitespace", "  One two.\n\nThree.  \n", ["One two.", "Three."], [10 / 21, 18 / 21]],
    ["no chunks of an empty book", "", [], []],
  ] as const)("%s", (_, text, chunks, ends) => {
    const end = chunkEndLocator(text);
    expect(chunks.map((chunk) => end(chunk))).toEqual([...ends]);
  });

  test("the chunker's own chunks end where their last word is in the book, the last at its last character", () => {
    const text = Array.from({ length: 120 }, (_, i) => `Paragraph ${i} has a sentence.\r\n\r\nAnd a second line ${i}.`).join("\n\n\n");
    const chunks = chunkTextToArray(text, { chunkTokens: 64 });
    const end = chunkEndLocator(text);
    const ends = chunks.map((c) => end(c.text));
    expect(ends.length).toBeGreaterThan(5);
    for (let i = 0; i < chunks.length; i++) {
      const lastWord = chunks[i]!.text.trim().split(/\s+/).at(-1)!;
      const at = Math.round(ends[i]! * text.length);
      expect(text.slice(at - lastWord.length, at)).toBe(lastWord);
    }
    expect(ends.at(-1)).toBe(1);
  });
});

describe("finding the book's fragments in it", () => {
  const text = "Mara lit the lamp.\n\nThe stranger  said nothing,\nthen spoke: \"Who are you?\" Mara lit the lamp again.";
  const locate = createTextLocator(text);
  test.each([
    ["a fragment as written", "Mara lit the lamp.", 0, 18],
    ["a fragment whose line break the book has as two spaces and a newline", "The stranger said nothing, then spoke:", 20, 59],
    ["a clipped quote", "\"Who are you?\" Mara lit…", 60, 83],
    ["a fragment with regex characters", "\"Who are you?\"", 60, 74],
    ["a fragment not in the book", "Mara doused the lamp.", null, null],
    ["an empty fragment", "  ", null, null],
  ] as const)("%s", (_, fragment, start, end) => {
    expect(locate(fragment)).toEqual(start === null || end === null ? null : { start, end });
  });

  test("a later occurrence is found from a given offset", () => {
    expect(locate("Mara lit the lamp", 1)).toEqual({ start: 75, end: 92 });
  });

  test("a first mention is the earliest of the name and the aliases", () => {
    expect(firstMention({ name: "Mara", aliases: ["The stranger"] }, locate)).toBe(0);
    expect(firstMention({ name: "Silas", aliases: ["The stranger"] }, locate)).toBe(20);
    expect(firstMention({ name: "Silas", aliases: [] }, locate)).toBeNull();
  });
});

describe("a character as known before a cutoff", () => {
  // 0: Mara speaks; 40: the stranger arrives; 80: he is named Silas; 120: the reveal.
  const text = [
    '"The lamp is lit," said Mara Hale. Then...',
    "A stranger came out of the sea that night.",
    '"My name is Silas," said he, to Mara Hale.',
    '"I am Jonah," said Silas. "Your brother."',
  ].join("");
  const mara: FoundCharacter = {
    name: "Mara Hale",
    aliases: ["Mara"],
    gender: "she",
    quotes: ["The lamp is lit,"],
    mentionCount: 3,
    quoteCount: 1,
    importance: 3,
    cooccurring: [{ name: "Silas", count: 2 }],
    passages: ['"The lamp is lit," said Mara Hale.', '"My name is Silas," said he, to Mara Hale.'],
  };
  const silas: FoundCharacter = {
    name: "Silas",
    aliases: ["Jonah"],
    gender: "he",
    quotes: ["My name is Silas,", "I am Jonah,", "Your brother."],
    mentionCount: 3,
    quoteCount: 3,
    importance: 2,
    cooccurring: [{ name: "Mara Hale", count: 2 }],
    passages: ['"I am Jonah," said Silas. "Your brother."'],
  };
  const locate = createTextLocator(text);
  const cast = [mara, silas].map((c) => placeCharacter(c, locate, text.length));

  test.each([
    ["before anything of her: nothing", 0, 0, null],
    ["after her first line only: that line, no later passage, nobody met yet", 0, 42, { quotes: ["The lamp is lit,"], passages: ['"The lamp is lit," said Mara Hale.'], cooccurring: [], mentionCount: 2, aliases: ["Mara"] }],
    ["a passage that straddles the cutoff is left out", 0, 100, { quotes: ["The lamp is lit,"], passages: ['"The lamp is lit," said Mara Hale.'], cooccurring: [{ name: "Silas", count: 2 }], mentionCount: 2, aliases: ["Mara"] }],
    ["before he is named: nothing", 1, 84, null],
    ["named but not yet revealed: his first line, not the alias from the reveal", 1, 126, { quotes: ["My name is Silas,"], passages: [], aliases: [], cooccurring: [{ name: "Mara Hale", count: 2 }], mentionCount: 1 }],
    ["the whole book: everything", 1, text.length, { quotes: silas.quotes, passages: silas.passages, aliases: ["Jonah"], mentionCount: 3 }],
  ] as const)("%s", (_, who, cutoff, expected) => {
    const known = knownAt(cast[who]!, cutoff, text, cast);
    if (expected === null) expect(known).toBeNull();
    else expect(known).toMatchObject({ ...expected, quoteCount: expected.quotes.length });
  });
});
