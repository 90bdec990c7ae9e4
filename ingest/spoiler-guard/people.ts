import { breaksSentence, eachWord, keysOf, singulars, spelledKey, wordsOf, type WordCase } from "../../common/text-normalise.ts";
import { MOSTLY_ORDINARY, type GuardCharacter } from "../../common/spoiler-guard/people.ts";

// Builds what the spoiler guard knows of a book's people (the format: common/spoiler-guard/people.ts)
// in one pass over the book's text at ingestion. Pure: no I/O.

/** Words of a name that name no one on their own (spelled keys). */
const TITLES = new Set(
  ["Mr", "Mrs", "Miss", "Ms", "Mx", "Dr", "Sir", "Lady", "Lord", "Madam", "Madame", "Captain", "Colonel", "Major", "Lieutenant", "General", "Uncle", "Aunt", "The"].map(spelledKey),
);
/** Shorter name words are left out: "Al", "Jo" are words or parts of words too often. */
const MIN_TERM_CHARS = 3;
/** People the book names with a title, beyond its characters, that the guard keeps (the most often named). */
const MAX_NAMED_PEOPLE = 500;
/**
 * Distinct words (and titled names) whose use the pass over a book records. A book's vocabulary is far
 * smaller; text that is not language would otherwise grow the record with its length. A word first met
 * past the bound has no record: it counts as never used as an ordinary word, which errs towards stopping.
 */
const MAX_TRACKED_WORDS = 250_000;
interface Entry {
  id: string;
  forms: string[];
  terms: Map<string, string>;
}

/** The terms a form gives: the form, its capitalised name words, and a leading title with the word after it ("Lady Catherine"). */
function termsOf(form: string): [key: string, text: string][] {
  const words = wordsOf(form);
  const out: [string, string][] = [[words.map((w) => w.key).join(" "), form.trim()]];
  if (words.length > 1) {
    for (const w of words) if (w.kase !== "lower" && !TITLES.has(w.key)) out.push([w.key, w.word]);
    if (TITLES.has(words[0]!.key) && !TITLES.has(words[1]!.key)) out.push([`${words[0]!.key} ${words[1]!.key}`, `${words[0]!.word} ${words[1]!.word}`]);
  }
  return out.filter(([key]) => !TITLES.has(key) && (key.includes(" ") || key.length >= MIN_TERM_CHARS));
}

interface WordUse {
  /** Lower-case uses: the word as an ordinary word. */
  ordinary: number;
  /** Capitalised uses inside a sentence. */
  named: number;
  /** Of those, uses on their own: not right after another capitalised word ("Crane said", "Mr Crane"; not "Silas Crane"). */
  alone: number;
  /** The first use with a capital, as a position (Infinity when none). */
  first: number;
}

/** The share of a word's uses that are ordinary, to two places. */
const ordinaryShare = (use: WordUse) => (use.ordinary > 0 ? Math.round((use.ordinary / (use.ordinary + use.named)) * 100) / 100 : 0);

/**
 * One pass over the book: where each known term (the characters' and the NLP step's people's)
 * occurs as a name (a use with a capital), how every word is used, and the people it names after a
 * title ("Colonel Dacre") with how often and where first.
 */
function readBook(text: string, terms: ReadonlySet<string>) {
  const byLast = new Map<string, string[][]>();
  let longest = 2;
  for (const term of terms) {
    const parts = term.split(" ");
    longest = Math.max(longest, parts.length);
    byLast.set(parts.at(-1)!, [...(byLast.get(parts.at(-1)!) ?? []), parts]);
  }
  const length = Math.max(1, text.length);
  const at = new Map<string, number[]>();
  const uses = new Map<string, WordUse>();
  const titled = new Map<string, { count: number; first: number }>();
  // The last `longest` words, in a ring: a term ending at a word is read back from it.
  const keys: string[] = new Array<string>(longest).fill("");
  const starts: number[] = new Array<number>(longest).fill(0);
  let count = 0;
  // The word before, as fields: a book's pass makes no object per word.
  let beforeKey = "";
  let beforeKase: WordCase | undefined;
  let beforeStart = 0;
  let beforeEnd = -1;
  eachWord(text, (key, kase, start, end) => {
    const opening = beforeEnd < 0 || breaksSentence(text, beforeEnd, start);
    const previousKey = beforeKey;
    const previousKase = beforeKase;
    const previousStart = beforeStart;
    const previousEnd = beforeEnd;
    beforeKey = key;
    beforeKase = kase;
    beforeStart = start;
    beforeEnd = end;
    keys[count % longest] = key;
    starts[count % longest] = start;
    count++;
    let use = uses.get(key);
    if (!use && uses.size < MAX_TRACKED_WORDS) uses.set(key, (use = { ordinary: 0, named: 0, alone: 0, first: Infinity }));
    if (kase === "lower") {
      if (use) use.ordinary++;
      return;
    }
    const afterTitle = previousKase !== undefined && previousKase !== "lower" && TITLES.has(previousKey);
    if (use) {
      if (use.first === Infinity) use.first = start / length;
      if (!opening) {
        use.named++;
        const afterName = previousKase !== undefined && previousKase !== "lower" && !afterTitle && /^\s+$/.test(text.slice(previousEnd, start));
        if (!afterName) use.alone++;
      }
    }
    if (afterTitle && previousKey !== "the" && kase === "capitalised" && !TITLES.has(key) && key.length >= MIN_TERM_CHARS) {
      const form = `${previousKey} ${key}`;
      const seen = titled.get(form);
      if (seen) seen.count++;
      else if (titled.size < MAX_TRACKED_WORDS) titled.set(form, { count: 1, first: previousStart / length });
    }
    for (const last of key.endsWith("s") ? singulars(key) : [key]) {
      for (const parts of byLast.get(last) ?? []) {
        if (parts.length > count) continue;
        const back = (i: number) => (count - parts.length + i) % longest;
        if (!parts.every((p, i) => i === parts.length - 1 || keys[back(i)] === p)) continue;
        const term = parts.join(" ");
        const positions = at.get(term) ?? [];
        positions.push(starts[back(0)]! / length);
        at.set(term, positions);
      }
    }
  });
  /** How the book uses a word, its plurals counted with it. */
  const useOf = (key: string): WordUse => {
    const all = [key, `${key}s`, `${key}es`].flatMap((k) => uses.get(k) ?? []);
    return {
      ordinary: all.reduce((n, u) => n + u.ordinary, 0),
      named: all.reduce((n, u) => n + u.named, 0),
      alone: all.reduce((n, u) => n + u.alone, 0),
      first: Math.min(Infinity, ...all.map((u) => u.first)),
    };
  };
  return { at, useOf, titled };
}

/** Whether a form is a proper name: it has a capitalised word that is not a title ("Rostóv", not "The officer"). */
const isProperName = (form: string) => wordsOf(form).some((w) => w.kase !== "lower" && !TITLES.has(w.key));

/**
 * What the guard knows of a book's people, written at ingestion: its characters, the other people the
 * NLP step found (`people`, by their proper names), and the people the book names with a title who
 * are none of those. A person's first appearance is the first of their forms that no one else shares
 * (Lady Catherine is not met where Kitty is called Catherine); a term shared with others is the
 * first-appearing owner's from its first occurrence, and each other owner's from their own first
 * appearance on. A character none of whose names is found counts as met from the
 * start (first 0), as their first appearance does elsewhere.
 */
export function guardCharacters(
  text: string,
  characters: readonly { id: string; name: string; aliases: readonly string[] }[],
  people: readonly { name: string; aliases: readonly string[] }[] = [],
): GuardCharacter[] {
  const formsOf = (names: readonly string[]) => [...new Set(names.map((f) => f.trim()).filter((f) => keysOf(f).length > 0))];
  const entries: Entry[] = characters.map((c) => {
    const forms = formsOf([c.name, ...c.aliases]);
    return { id: c.id, forms: forms.map((f) => keysOf(f).join(" ")), terms: new Map(forms.flatMap(termsOf)) };
  });
  const characterForms = new Set(entries.flatMap((e) => e.forms));
  const characterTerms = new Set(entries.flatMap((e) => [...e.forms, ...e.terms.keys()]));
  for (const person of people) {
    const forms = formsOf([person.name, ...person.aliases]);
    // The NLP step's list holds the selected characters too: a person by one of their names is them.
    if (forms.some((f) => characterForms.has(keysOf(f).join(" ")))) continue;
    const proper = forms.filter(isProperName);
    const terms = new Map(proper.flatMap(termsOf).filter(([key]) => !characterTerms.has(key)));
    if (terms.size > 0) entries.push({ id: "", forms: proper.map((f) => keysOf(f).join(" ")), terms });
  }
  const known = new Set(entries.flatMap((e) => [...e.forms, ...e.terms.keys()]));
  const { at, useOf, titled } = readBook(text, known);
  // A title before what is mostly an ordinary word ("Mr Right", "Lady Luck") names no one in particular.
  const titledPeople = [...titled].filter(([form]) => !known.has(form) && ordinaryShare(useOf(form.split(" ")[1]!)) < MOSTLY_ORDINARY);
  for (const [form] of titledPeople.sort((a, b) => b[1].count - a[1].count).slice(0, MAX_NAMED_PEOPLE)) {
    const name = form.split(" ")[1]!;
    entries.push({ id: "", forms: [form], terms: new Map([[form, form], ...(known.has(name) ? [] : [[name, name] as [string, string]])]) });
  }
  const owners = new Map<string, Entry[]>();
  for (const e of entries) for (const key of new Set([...e.forms, ...e.terms.keys()])) owners.set(key, [...(owners.get(key) ?? []), e]);
  /**
   * The first occurrence of a term at or after `from`, or null. The known terms have every
   * occurrence; a titled person's ("colonel dacre", "dacre") only the first, and one at or after
   * `from` is taken to be at `from`, which errs towards the reader having met them.
   */
  const firstOf = (key: string, from = 0): number | null => {
    const positions = at.get(key);
    if (positions) return positions.find((p) => p >= from) ?? null;
    if (known.has(key)) return null;
    const first = titled.get(key)?.first ?? useOf(key).first;
    return Number.isFinite(first) ? Math.max(first, from) : null;
  };

  const firsts = new Map<Entry, number | null>();
  for (const e of entries) {
    const own = e.forms.filter((f) => owners.get(f)!.length === 1);
    const found = (own.length > 0 ? own : e.forms).map((f) => firstOf(f)).filter((p): p is number => p !== null);
    firsts.set(e, found.length > 0 ? Math.min(...found) : null);
  }
  const appearance = (e: Entry) => firsts.get(e) ?? 0;

  return entries.map((e) => {
    const first = appearance(e);
    const terms = [...e.terms].flatMap(([key, text]) => {
      const earliest = owners.get(key)!.every((other) => appearance(other) >= first);
      const termFirst = firstOf(key, earliest ? 0 : first);
      if (termFirst === null) return [];
      const uses = key.split(" ").map(useOf);
      const ordinary = uses.map(ordinaryShare);
      return [{ text, first: termFirst, ...(ordinary.some((o) => o > 0) ? { ordinary } : {}), ...(uses.length === 1 ? { alone: uses[0]!.alone > 0 } : {}) }];
    });
    return { character_id: e.id, first, terms };
  })
    // A person the book never names as the NLP step wrote them guards nothing; a character is kept (it is met from the start).
    .filter((person) => person.character_id !== "" || person.terms.length > 0);
}
