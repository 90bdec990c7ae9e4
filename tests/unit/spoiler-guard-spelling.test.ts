import { describe, expect, test } from "bun:test";
import { buildShingleIndex } from "../../ingest/spoiler-guard/shingles.ts";
import { guardCharacters } from "../../ingest/spoiler-guard/people.ts";
import { createSpoilerGuard, lateNames, type SpoilerKind } from "../../api/chat/spoiler-filter.ts";

/**
 * Spellings a model that knows the book might write (issue: the guard against spelling), run against
 * a small synthetic book by a reader at 30 %: late names (a shared alias, plurals, capitals, a named
 * person who is not a selected character) and a late sentence, spelled with accents, invisible
 * characters and look-alike letters; and innocent replies that must pass whole.
 */

const filler = (i: number) => `On day ${i} the boats came back one by one, the nets were mended, and the harbour slept until the bell.`;
const EARLY = [
  "Anne Marlowe kept the lamp at Gull Point through the long winter, trimming the wick each evening at dusk.",
  "Her sister Catherine, whom everyone called Kitty, sang in the kitchen while the kettle boiled.",
  "A crane stood in the shallows most mornings, and the cranes came back to the marsh each spring.",
  "Kitty laughed at the crane, and Anne watched a crane lift over the reeds.",
];
const LATE = [
  "In March Mr Ashby came to the point, and Roland Ashby was a tall man with a careful smile.",
  "Colonel Dacre rode in from the garrison with news of the war, and Colonel Dacre stayed the night.",
  "Lady Catherine Vane arrived in a black carriage, and Lady Catherine would speak to no one at the inn.",
  "Silas Crane left on the morning tide, and Crane said nothing to anyone of the boathouse.",
  "The stranger said at last that he was Jonah, her brother, who had set the fire in the boathouse himself.",
];
const LATE_SENTENCE = LATE[4]!;
/** EARLY fills the first fifth; LATE begins after 40 %. */
const BOOK = [...EARLY, ...Array.from({ length: 12 }, (_, i) => filler(i)), ...LATE].join("\n\n");
const CHARACTERS = [
  { id: "anne", name: "Anne Marlowe", aliases: ["Anne"] },
  { id: "kitty", name: "Kitty Marlowe", aliases: ["Kitty", "Catherine"] },
  { id: "ashby", name: "Roland Ashby", aliases: ["Mr Ashby", "Ashby"] },
  { id: "vane", name: "Lady Catherine Vane", aliases: ["Lady Catherine", "Catherine"] },
  { id: "crane", name: "Silas Crane", aliases: ["Crane"] },
];
/** The NLP step's list of people: the selected characters among them, others, and a description that is no name. */
const PEOPLE = [
  { name: "Anne Marlowe", aliases: ["Anne"] },
  { name: "Jonah", aliases: [] },
  { name: "The stranger", aliases: [] },
];
const POSITION = 0.3;
const guarded = guardCharacters(BOOK, CHARACTERS, PEOPLE);
const shingles = buildShingleIndex(BOOK);

const zw = (s: string, mark: string) => s.replace(/(\p{L})(?=\p{L})/gu, `$1${mark}`);
const CYRILLIC: Record<string, string> = { a: "а", e: "е", o: "о", p: "р", c: "с", y: "у", x: "х", A: "А", B: "В", C: "С", E: "Е", H: "Н", K: "К", M: "М", O: "О", P: "Р", T: "Т", X: "Х", S: "Ѕ", i: "і" };
const cyrillic = (s: string) => [...s].map((c) => CYRILLIC[c] ?? c).join("");
const fullWidth = (s: string) => s.replace(/[!-~]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0));

/** `stop`: the reply must be stopped (a late name or passage); otherwise it must pass whole. */
export const ATTEMPTS: { category: string; reply: string; stop: boolean }[] = [
  // An alias shared with an early character: the reader met Kitty as Catherine, not Lady Catherine.
  { category: "shared alias", reply: "Lady Catherine will never approve of it.", stop: true },
  { category: "shared alias", reply: "You should fear Catherine Vane, my dear.", stop: true },
  { category: "shared alias", reply: "Even Lady Catherine Vane bows to the sea.", stop: true },
  { category: "shared alias", reply: "I hear that Vane will arrive soon enough.", stop: true },
  // Plurals.
  { category: "plural", reply: "The Ashbys will dine with us in spring.", stop: true },
  { category: "plural", reply: "Beware of the Vanes and their carriage.", stop: true },
  { category: "plural", reply: "I have never liked the Dacres.", stop: true },
  // Capitals and case.
  { category: "capitals", reply: "Beware of ASHBY, my dear.", stop: true },
  { category: "capitals", reply: "He is SILAS CRANE, the one you fear.", stop: true },
  { category: "capitals", reply: "LADY CATHERINE will come.", stop: true },
  { category: "capitals", reply: "and then roland ashby smiled at me.", stop: true },
  // A person named in the book who is not a selected character.
  { category: "named person", reply: "Colonel Dacre will bring the news.", stop: true },
  { category: "named person", reply: "It was Dacre who rode in that night.", stop: true },
  { category: "named person (the NLP step's list)", reply: "It was Jonah who set the fire.", stop: true },
  // Accents and combining marks.
  { category: "accents", reply: "Beware of Ashbý, my dear.", stop: true },
  { category: "accents", reply: "Beware of Ásh\u0301by and Sílas Crâne.", stop: true },
  { category: "accents", reply: "Beware of Ashb\u0308y.", stop: true },
  // Invisible characters inside the name.
  { category: "zero-width joiner", reply: `Beware of ${zw("Ashby", "\u200d")}.`, stop: true },
  { category: "zero-width non-joiner", reply: `Beware of ${zw("Silas Crane", "\u200c")}.`, stop: true },
  { category: "soft hyphen", reply: `Beware of ${zw("Ashby", "\u00ad")}.`, stop: true },
  { category: "word joiner", reply: `Beware of ${zw("Lady Catherine", "\u2060")}.`, stop: true },
  { category: "Hangul filler", reply: `Beware of Ash\u3164by.`, stop: true },
  { category: "variation selector", reply: `Beware of A\ufe0fshby.`, stop: true },
  // Look-alike letters.
  { category: "Cyrillic", reply: `Beware of ${cyrillic("Ashby")}.`, stop: true },
  { category: "Cyrillic", reply: `Beware of ${cyrillic("Silas Crane")}.`, stop: true },
  { category: "full-width", reply: `Beware of ${fullWidth("Ashby")}.`, stop: true },
  { category: "full-width", reply: `Beware of ${fullWidth("DACRE")}.`, stop: true },
  { category: "Greek and small capitals", reply: "Beware of Αshby and ᴀsʜʙʏ.", stop: true },
  // The late sentence, spelled.
  { category: "late sentence, zero-width spaces", reply: zw(LATE_SENTENCE, "\u200b"), stop: true },
  { category: "late sentence, soft hyphens", reply: zw(LATE_SENTENCE, "\u00ad"), stop: true },
  { category: "late sentence, Cyrillic", reply: cyrillic(LATE_SENTENCE), stop: true },
  { category: "late sentence, full-width", reply: fullWidth(LATE_SENTENCE), stop: true },
  // Innocent replies: nothing late in them.
  { category: "innocent", reply: "Crane flies gathered at the window.", stop: false },
  { category: "innocent", reply: "The stranger smiled at the harbour.", stop: false },
  { category: "innocent", reply: "A crane stood in the shallows, and the cranes came back.", stop: false },
  { category: "innocent", reply: "Catherine, my sister, sings too loudly in the kitchen.", stop: false },
  { category: "innocent", reply: zw("Anne Marlowe kept the lamp at Gull Point through the long winter.", "\u200b"), stop: false },
  { category: "innocent", reply: "ᴋɪᴛᴛʏ and ＡＮＮＥ trimmed the wick at dusk.", stop: false },
];

function outcome(reply: string): { stop: SpoilerKind | undefined; sent: string } {
  const guard = createSpoilerGuard({ position: POSITION, lateNames: lateNames(guarded, POSITION, "anne"), shingles });
  let sent = "";
  // Streamed a character at a time, as the hardest split for the guard.
  for (const piece of reply) {
    const step = guard.push(piece);
    sent += step.forward;
    if (step.stop) return { stop: step.stop, sent };
  }
  const last = guard.end();
  return { stop: last.stop, sent: sent + last.forward };
}

describe("the spoiler guard against spelling (38 attempts, a reader at 30 %)", () => {
  test.each(ATTEMPTS)("$category: $reply", ({ reply, stop }) => {
    const result = outcome(reply);
    if (stop) expect(result.stop).toBeDefined();
    else expect(result).toEqual({ stop: undefined, sent: reply });
  });

  test("the corpus: no leak, no false stop", () => {
    const leaks = ATTEMPTS.filter((a) => a.stop && outcome(a.reply).stop === undefined).map((a) => a.reply);
    const falseStops = ATTEMPTS.filter((a) => !a.stop && outcome(a.reply).stop !== undefined).map((a) => a.reply);
    expect({ attempts: ATTEMPTS.length, leaks, falseStops }).toEqual({ attempts: 38, leaks: [], falseStops: [] });
  });
});
