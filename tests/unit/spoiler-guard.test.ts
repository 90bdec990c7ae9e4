import { describe, expect, test } from "bun:test";
import { Buffer } from "node:buffer";
import { decodeShingleIndex, MAX_FINGERPRINTS, SHINGLE_WORDS, shingleKey } from "../../common/spoiler-guard/shingles.ts";
import { buildShingleIndex } from "../../ingest/spoiler-guard/shingles.ts";
import { WORD_PATTERN } from "../../common/text-normalise.ts";
import { seededRandom } from "../support/seeded-random.ts";
import { guardCharacters } from "../../ingest/spoiler-guard/people.ts";
import { closingAfter, createSpoilerGuard, lateNames, type LateName, type SpoilerKind } from "../../api/chat/spoiler-filter.ts";

const EARLY = "Mara Quill kept the lamp on Gull Rock through the long winter, trimming the wick each evening at dusk.";
const MIDDLE = "The boats came back one by one, and the harbour slept. ".repeat(6);
const LATE = "The stranger said at last that he was Jonah, her brother, who had set the fire in the boathouse himself.";
/** EARLY ends well before 40 %, LATE starts well after it. */
const BOOK = `${EARLY} ${MIDDLE}${LATE} Silas Crane left on the morning tide.`;
const shingles = buildShingleIndex(BOOK);

const splitters: [string, (s: string) => string[]][] = [
  ["whole", (s) => [s]],
  ["by word", (s) => s.match(/\S+\s*/g) ?? []],
  ["by character", (s) => [...s]],
  ["by three", (s) => s.match(/[\s\S]{1,3}/g) ?? []],
];

function run(reply: string, pieces: (s: string) => string[], names: readonly (string | LateName)[], position = 0.4) {
  const guard = createSpoilerGuard({ position, lateNames: names, shingles });
  let sent = "";
  let received = "";
  let stop: SpoilerKind | undefined;
  let mostHeldWords = 0;
  for (const piece of pieces(reply)) {
    received += piece;
    const step = guard.push(piece);
    sent += step.forward;
    if (step.stop) {
      stop = step.stop;
      break;
    }
    mostHeldWords = Math.max(mostHeldWords, received.slice(sent.length).match(WORD_PATTERN)?.length ?? 0);
  }
  if (!stop) {
    const last = guard.end();
    sent += last.forward;
    stop = last.stop;
  }
  return { sent, stop, mostHeldWords };
}

const NAMES = ["Silas Crane", "Crane", "Silas"];
/** The same names as ingestion gives them, with how the book uses them: "Crane" only in "Silas Crane". */
const BOOK_NAMES = lateNames(guardCharacters(BOOK, [{ id: "silas", name: "Silas Crane", aliases: ["Crane"] }]), 0.4, "mara");

describe("the spoiler guard on a streamed reply", () => {
  /**
   * `sent`: what the reader gets. A passage is recognised on its eighth word: streamed word by word,
   * its first seven words have gone out by then (`sent`); when more arrives at once, less does
   * (`sentAtLeast`: the text before the passage).
   */
  const cases: { name: string; reply: string; stop: SpoilerKind | undefined; sent: string; sentAtLeast?: string; names?: readonly (string | LateName)[] }[] = [
    { name: "an early quotation passes whole", reply: `As I always say: ${EARLY}`, stop: undefined, sent: `As I always say: ${EARLY}` },
    { name: "a reply of the reader's own words passes whole", reply: "I trim the lamp, and I wait for the boats.", stop: undefined, sent: "I trim the lamp, and I wait for the boats." },
    { name: "a late two-word name stops before its first word", reply: "The man you mean is Silas Crane, of course.", stop: "name", sent: "The man you mean is " },
    { name: "a late surname alone stops before it", reply: "Ask Crane about it.", stop: "name", sent: "Ask " },
    { name: "a word that begins a late name but goes elsewhere passes", reply: "Silas is not a name I know.", stop: undefined, sent: "Silas is not a name I know.", names: ["Silas Crane"] },
    { name: "a name word in lower case (another word) passes", reply: "A crane stood in the shallows.", stop: undefined, sent: "A crane stood in the shallows.", names: BOOK_NAMES },
    { name: "a late surname alone inside a sentence stops, as the book gives it", reply: "Ask Crane about it.", stop: "name", sent: "Ask ", names: BOOK_NAMES },
    { name: "a late name in capitals stops", reply: "Ask CRANE about it.", stop: "name", sent: "Ask " },
    { name: "a late passage stops on its eighth word", reply: `Listen: ${LATE}`, stop: "passage", sent: "Listen: The stranger said at last that he ", sentAtLeast: "Listen: " },
    { name: "a late passage in other case and punctuation still stops", reply: "the STRANGER said, at last, that he was JONAH — her brother!", stop: "passage", sent: "the STRANGER said, at last, that he ", sentAtLeast: "" },
    { name: "seven late words pass", reply: "The stranger said at last that he.", stop: undefined, sent: "The stranger said at last that he." },
    { name: "a name at the very end is checked when the reply ends", reply: "It was Crane", stop: "name", sent: "It was " },
  ];
  for (const [how, pieces] of splitters) {
    test.each(cases)(`${how}: $name`, ({ reply, stop, sent, sentAtLeast, names }) => {
      const result = run(reply, pieces, names ?? NAMES);
      expect(result.stop).toBe(stop);
      if (sentAtLeast === undefined || how === "by word" || how === "by character") expect(result.sent).toBe(sent);
      else expect(sent.startsWith(result.sent) && result.sent.startsWith(sentAtLeast)).toBe(true);
    });
  }

  test("no more than the word being written and one word of a two-word name is ever held back", () => {
    for (const [, pieces] of splitters) {
      expect(run("Silas Marner was a weaver, and Silas Crane a sailor.", pieces, NAMES).mostHeldWords).toBeLessThanOrEqual(2);
      expect(run(`${EARLY} ${EARLY}`, pieces, NAMES).mostHeldWords).toBeLessThanOrEqual(1);
    }
  });

  test("at the end of the book nothing is late", () => {
    expect(run(`Listen: ${LATE}`, (s) => [s], [], 1).stop).toBeUndefined();
  });

  test("after a stop nothing more is forwarded", () => {
    const guard = createSpoilerGuard({ position: 0.4, lateNames: ["Crane"], shingles });
    expect(guard.push("Crane ")).toEqual({ forward: "", stop: "name" });
    expect(guard.push("and more")).toEqual({ forward: "" });
    expect(guard.end()).toEqual({ forward: "" });
  });
});

describe("the book's shingle index", () => {
  test("knows where each 8-word run first ends, and survives its stored form", () => {
    const decoded = decodeShingleIndex(shingles.encode());
    const key = shingleKey("the stranger said at last that he was".split(" "));
    expect(decoded.size).toBe(shingles.size);
    expect(decoded.firstEnd(key)).toBeGreaterThan(0.4);
    expect(decoded.firstEnd(shingleKey("mara quill kept the lamp on gull rock".split(" ")))!).toBeLessThan(0.1);
    expect(decoded.firstEnd(shingleKey("mara quill kept the lamp on gull island".split(" ")))).toBeNull();
  });

  test("a run that occurs early and late counts as early", () => {
    const index = buildShingleIndex(`${EARLY} ${MIDDLE} ${EARLY}`);
    expect(index.firstEnd(shingleKey("through the long winter trimming the wick each".split(" ")))!).toBeLessThan(0.2);
  });

  test("a stored index of another size is refused", () => {
    expect(() => decodeShingleIndex(shingles.encode().slice(0, -8))).toThrow();
  });
});

describe("the characters' names as the guard knows them", () => {
  const spelled = (names: readonly LateName[]) => names.map((n) => n.words.join(" ")).sort();
  const characters = guardCharacters(BOOK, [
    { id: "mara", name: "Mara Quill", aliases: ["Mara"] },
    { id: "silas", name: "Silas Crane", aliases: ["Mr. Crane"] },
    { id: "jonah", name: "Jonah", aliases: [] },
    { id: "ghost", name: "Nobody Here", aliases: [] },
  ]);

  test.each([
    ["a reader at 40 % has not met Silas Crane or Jonah", 0.4, "mara", ["silas crane", "silas", "crane", "jonah"]],
    ["the character spoken to is never a late name", 0.4, "silas", ["jonah"]],
    ["at the end of the book no one is late", 1, "mara", []],
  ])("%s", (_, position, speaker, expected) => {
    expect(spelled(lateNames(characters, position as number, speaker as string))).toEqual((expected as string[]).sort());
  });

  test("a character whose names the book never shows counts as met from the start", () => {
    expect(characters.find((c) => c.character_id === "ghost")).toEqual({ character_id: "ghost", first: 0, terms: [] });
  });

  test("the NLP step's people: a selected character among them is left to the character, a description is no name, one the book never names guards nothing", () => {
    const people = [
      { name: "Silas Crane", aliases: ["Crane"] },
      { name: "Jonah", aliases: [] },
      { name: "The stranger", aliases: [] },
      { name: "Nobody Here", aliases: [] },
    ];
    const guarded = guardCharacters(BOOK, [{ id: "silas", name: "Silas Crane", aliases: [] }], people);
    expect(guarded.map((p) => [p.character_id, p.terms.map((t) => t.text)])).toEqual([
      ["silas", ["Silas Crane", "Silas", "Crane"]],
      ["", ["Jonah"]],
    ]);
  });

  test("a person the NLP list gave another's bare given name is met only by a name of several words: Lady Catherine is late though a Catherine came early", () => {
    const book = `Catherine and Lydia laughed at the window. ${MIDDLE} Lady Catherine de Bourgh arrived at the door.`;
    const people = [{ name: "Lady Catherine", aliases: ["Catherine", "Lady Catherine de Bourgh"] }];
    const guarded = guardCharacters(book, [{ id: "mara", name: "Mara Quill", aliases: [] }], people);
    expect(spelled(lateNames(guarded, 0.5, "mara"))).toEqual(["bourgh", "lady catherine", "lady catherine de bourgh"]);
    expect(spelled(lateNames(guarded, 1, "mara"))).toEqual([]);
  });

  test("a name word the reader has met elsewhere is not late", () => {
    const book = `Old Tom Crane mended nets. ${MIDDLE} Silas Crane came ashore.`;
    const [silas] = guardCharacters(book, [{ id: "silas", name: "Silas Crane", aliases: [] }]);
    expect(spelled(lateNames([silas!], 0.5, "mara"))).toEqual(["silas", "silas crane"]);
  });
});

test.each([
  ["", "That is a story for the pages you have yet to read."],
  ["The man you mean is ", "… but that is a story for the pages you have yet to read."],
  ["Listen", " … but that is a story for the pages you have yet to read."],
])("the closing after %p", (sent, closing) => {
  expect(closingAfter(sent)).toBe(closing);
});

describe("the shingle index of a long book, within its bound", () => {
  // A text that does not repeat itself (seeded words from a vocabulary of 3 000), with a passage of
  // 40 words that occurs early and again late.
  const random = seededRandom(7);
  const vocabulary = Array.from({ length: 3000 }, (_, i) => `w${i.toString(36)}`);
  const words = Array.from({ length: 30_000 }, () => vocabulary[Math.floor(random() * vocabulary.length)]!);
  const passage = words.slice(1000, 1040);
  words.splice(25_000, 0, ...passage);
  const text = words.join(" ");
  const cap = 2000;
  const index = buildShingleIndex(text, { maxFingerprints: cap });

  /** Every key of the text with the end of its first occurrence, the slow way. */
  const firstEnds = new Map<string, number>();
  let end = 0;
  const ends = words.map((w) => (end += w.length + 1) - 1);
  for (let i = SHINGLE_WORDS - 1; i < words.length; i++) {
    const key = shingleKey(words.slice(i - SHINGLE_WORDS + 1, i + 1)).join(":");
    if (!firstEnds.has(key)) firstEnds.set(key, ends[i]! / text.length);
  }

  test("holds at most its bound of keys, 8 bytes each", () => {
    expect(index.size).toBeLessThanOrEqual(cap);
    expect(index.size).toBeGreaterThan(cap / 2);
    expect(index.window).toBeGreaterThan(1);
    expect(index.bytes).toBe(index.size * 8);
    expect(decodeShingleIndex(index.encode()).size).toBe(index.size);
  });

  test("finds every copied run of SHINGLE_WORDS + window - 1 words, wherever it starts", () => {
    const span = SHINGLE_WORDS + index.window - 1;
    let missed = 0;
    for (let start = 0; start + span <= words.length; start += 7) {
      const run = words.slice(start, start + span);
      const found = run.some((_, i) => i + SHINGLE_WORDS <= run.length && index.firstEnd(shingleKey(run.slice(i, i + SHINGLE_WORDS))) !== null);
      if (!found) missed++;
    }
    expect(missed).toBe(0);
  });

  test("gives each key held the end of its first occurrence in the book, held there or not", () => {
    let held = 0;
    for (const [key, first] of firstEnds) {
      const [hi, lo] = key.split(":").map(Number) as [number, number];
      const at = index.firstEnd([hi, lo]);
      if (at === null) continue;
      held++;
      // Rounded down to 1/65535 of the book.
      expect(at).toBeLessThanOrEqual(first);
      expect(first - at).toBeLessThan(1 / 65535 + 1e-9);
    }
    expect(held).toBe(index.size);
    // The passage's copy late in the book counts where the passage was first read.
    const anyHeld = passage.some((_, i) => i + SHINGLE_WORDS <= passage.length && index.firstEnd(shingleKey(passage.slice(i, i + SHINGLE_WORDS))) !== null);
    expect(anyHeld).toBe(true);
    for (let i = 0; i + SHINGLE_WORDS <= passage.length; i++) {
      const at = index.firstEnd(shingleKey(passage.slice(i, i + SHINGLE_WORDS)));
      if (at !== null) expect(at).toBeLessThan(0.1);
    }
  });

  test("a book within the bound keeps every run", () => {
    const small = buildShingleIndex(words.slice(0, 1500).join(" "), { maxFingerprints: cap });
    expect(small.window).toBe(1);
    expect(small.size).toBe(1500 - SHINGLE_WORDS + 1);
  });

  test("an index stored before the bound (every run, a 32-bit second hash) is still read", () => {
    const keys = [shingleKey("a b c d e f g h".split(" ")), shingleKey("b c d e f g h i".split(" "))].sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    const bytes = new Uint8Array(8 + keys.length * 10);
    const view = new DataView(bytes.buffer);
    view.setUint32(0, 1, true);
    view.setUint32(4, keys.length, true);
    keys.forEach(([hi, lo], i) => {
      view.setUint32(8 + i * 4, hi, true);
      view.setUint32(8 + keys.length * 4 + i * 4, lo, true);
      view.setUint16(8 + keys.length * 8 + i * 2, 32767, true);
    });
    const old = decodeShingleIndex(Buffer.from(bytes).toString("base64"));
    expect(old.firstEnd(keys[1]!)).toBeCloseTo(0.5, 3);
    expect(old.firstEnd(shingleKey("c d e f g h i j".split(" ")))).toBeNull();
  });

  test("an index of more keys than the bound is refused before it is read", () => {
    const bytes = new Uint8Array(8);
    new DataView(bytes.buffer).setUint32(0, 2, true);
    new DataView(bytes.buffer).setUint32(4, MAX_FINGERPRINTS + 1, true);
    expect(() => decodeShingleIndex(Buffer.from(bytes).toString("base64"))).toThrow(/beyond the bound/);
  });
});
