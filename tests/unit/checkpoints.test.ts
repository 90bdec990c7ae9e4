import { describe, expect, test } from "bun:test";
import { chunkTextToArray } from "../../common/chunking.ts";
import { chunkEndLocator } from "../../common/chunk-ends.ts";
import {
  CHECKPOINT_POSITION_STEP,
  DEFAULT_FIRST_CHECKPOINT_MATERIAL,
  createTextLocator,
  firstMention,
  knownAt,
  materialAmounts,
  materialEnds,
  placeCharacter,
  placeCheckpoints,
  positionAfter,
} from "../../ingest/characters/checkpoints.ts";
import type { FoundCharacter } from "../../ingest/characters/character-selection.ts";

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

  test.each([
    ["a line joined across its tag, whose comma the tag ended became a full stop", "Friday is too soon. Glue does not hurry.", 1, 57],
    ["a line joined across a tag the sentence goes on after", "What does Mr. Crane mean, by bringing it here?", 61, 128],
    ["the first piece alone, its comma said as a full stop", "Friday is too soon.", 1, 20],
    ["words the tag stands between, which are no line", "soon, said Ottilie", null, null],
  ] as const)("%s", (_, fragment, start, end) => {
    const book = `"Friday is too soon," said Ottilie. "Glue does not hurry."\n\n“What does Mr. Crane mean,” said she to Jonah, “by bringing\nit here?”`;
    expect(createTextLocator(book)(fragment)).toEqual(start === null || end === null ? null : { start, end });
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

describe("where each character's checkpoints go", () => {
  test("a first checkpoint comes after two pieces of material", () => {
    expect(DEFAULT_FIRST_CHECKPOINT_MATERIAL).toBe(2);
  });

  test.each([
    ["no material: no checkpoint", 0, 2, []],
    ["one piece: after it", 1, 2, [1]],
    ["two pieces: after both", 2, 2, [2]],
    ["three pieces: after two, then all three", 3, 2, [2, 3]],
    ["doubling amounts, then all of it", 60, 2, [2, 4, 8, 16, 32, 60]],
    ["exactly a doubling: no amount twice", 16, 2, [2, 4, 8, 16]],
    ["a first amount of 1", 5, 1, [1, 2, 4, 5]],
    ["a first amount below 1 is taken as 1", 3, 0, [1, 2, 3]],
  ] as const)("amounts: %s", (_, total, first, expected) => {
    expect(materialAmounts(total, first)).toEqual([...expected]);
  });

  test.each([
    ["a piece ending on the first character: the first step", 1, 100_000, CHECKPOINT_POSITION_STEP],
    ["a piece ending exactly on a step", 500, 1000, 0.5],
    ["a piece ending between steps is kept by the rounded-up cutoff", 12_345, 100_000, 0.1235],
    ["a piece ending at the very end: the whole book's, no checkpoint", 1000, 1000, null],
    ["a piece ending within the last step: the whole book's", 99_995, 100_000, null],
    ["an empty book", 0, 0, null],
  ] as const)("positions: %s", (_, end, length, expected) => {
    const position = positionAfter(end, length);
    expect(position).toBe(expected);
    if (position !== null) expect(Math.floor(position * length)).toBeGreaterThanOrEqual(end);
  });

  test("every rounded position keeps its piece in a book of awkward length", () => {
    const length = 799_737;
    for (let end = 1; end < length; end += 7919) {
      const position = positionAfter(end, length)!;
      expect(Math.floor(position * length)).toBeGreaterThanOrEqual(end);
      expect(position - end / length).toBeLessThan(CHECKPOINT_POSITION_STEP);
    }
  });

  const L = 10_000;
  test.each([
    ["one character, budget to spare: after 2, 4 and all 5 pieces", [[100, 200, 300, 400, 500]], 9, [[0.02, 0.04, 0.05]]],
    ["pieces given in any order are counted in book order", [[500, 100, 300, 200, 400]], 9, [[0.02, 0.04, 0.05]]],
    ["every character's first before anyone's second", [[100, 200, 300, 400, 500], [1000, 2000, 3000]], 2, [[0.02], [0.2]]],
    ["the rest of the budget goes round by round, the first character first", [[100, 200, 300, 400, 500], [1000, 2000, 3000]], 3, [[0.02, 0.04], [0.2]]],
    ["a character without material takes none of the budget", [[], [1000, 2000, 3000]], 3, [[], [0.2, 0.3]]],
    ["a character met late gets their first checkpoint where their lines are", [[100, 200], [8000, 8500, 9000]], 2, [[0.02], [0.85]]],
    ["a lone piece at the very end: no checkpoint", [[L]], 3, [[]]],
    ["no budget: none", [[100, 200]], 0, [[]]],
  ] as const)("placement: %s", (_, ends, budget, expected) => {
    const placed = placeCheckpoints(ends, L, { budget });
    expect(placed).toEqual(expected.map((p) => [...p]));
    expect(placed.flat().length).toBeLessThanOrEqual(budget);
  });

  test("a placed character's material is where its located quotes and passages end", () => {
    const text = "Ann said \"hello there\" to Bo. Later Ann said \"goodbye now\" and left.";
    const ann: FoundCharacter = {
      name: "Ann",
      aliases: [],
      gender: "she",
      quotes: ["hello there", "goodbye now", "never said"],
      mentionCount: 2,
      quoteCount: 3,
      importance: 1,
      cooccurring: [],
      passages: ["Later Ann said"],
    };
    const placed = placeCharacter(ann, createTextLocator(text), text.length);
    expect(materialEnds(placed)).toEqual([text.indexOf("hello there") + 11, text.indexOf("goodbye now") + 11, text.indexOf("Later Ann said") + 14]);
  });

  test("a line spoken before the character is first named counts from just after the name", () => {
    const text = '"Have you heard?" asked a voice. It was Mrs. Bennet. "Netherfield is let at last."';
    const bennet: FoundCharacter = {
      name: "Mrs. Bennet",
      aliases: [],
      gender: "she",
      quotes: ["Have you heard?", "Netherfield is let at last."],
      mentionCount: 1,
      quoteCount: 2,
      importance: 1,
      cooccurring: [],
      passages: [],
    };
    const cast = [placeCharacter(bennet, createTextLocator(text), text.length)];
    const named = text.indexOf("Mrs. Bennet");
    expect(materialEnds(cast[0]!)).toEqual([named + 1, text.indexOf("Netherfield") + 27]);
    const [[first]] = placeCheckpoints([materialEnds(cast[0]!)], text.length, { budget: 1, firstAmount: 1 }) as [[number]];
    expect(knownAt(cast[0]!, Math.floor(first * text.length), text, cast)?.quotes).toEqual(["Have you heard?"]);
  });
});
