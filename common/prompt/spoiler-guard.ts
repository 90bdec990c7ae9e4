import { z } from "zod";
import { eachWord, spelledKey, WORD_PATTERN, wordCase, wordsOf, type WordCase } from "../text-normalise.ts";
import { SHINGLE_WORDS, shingleKey, type ShingleIndex } from "./book-shingles.ts";

/**
 * The spoiler guard on the chat's way out. A model that knows a famous book can name the murderer
 * from its own memory even when nothing late reached its prompt; the guard reads the streamed reply
 * word by word and stops it at the first
 * - `name`: a name of a person the reader has not met (a character, anyone else the NLP step found,
 *   or someone the book names with a title, "Colonel Dacre", whose first appearance is after the
 *   reader's position), by a form the reader has met no one by (so a surname the reader knows from a met relative passes, and so does
 *   "Catherine" when the reader has met a Catherine, while "Lady Catherine" stops), or
 * - `passage`: a run of SHINGLE_WORDS words whose first occurrence in the book ends after the position.
 *
 * Words are compared by what they spell (common/text-normalise.ts): case, accents, invisible
 * characters and look-alike letters never hide a name or a passage, and a name's plural ("the
 * Ashbys") is the name. Case is evidence, not part of the key: a name word capitalised inside a
 * sentence is the name; where case says nothing (a sentence's first word, capitals, lower case) the
 * book's own usage of the word decides (writtenAsName), so "Crane flies gathered at the window"
 * passes in a book that only ever says "Silas Crane".
 *
 * It holds back only the word being written, and the words that could begin a late name ("Silas"
 * while "Silas Crane" is one): a name is never shown in part. A late passage is recognised on its
 * SHINGLE_WORDS-th word, so up to SHINGLE_WORDS - 1 words of it have gone out (holding them back
 * would delay every reply by as many words); in a book too long for every run to be held (more than
 * MAX_FINGERPRINTS of them, book-shingles.ts), at most the index's window - 1 words later.
 *
 * Pure: no I/O.
 */

/**
 * A person as the guard knows them: where they first appear, and each name and name word with its
 * own first occurrence for them (positions 0–1); per word, the share of the book's uses of that word
 * that are ordinary, lower-case ones (absent when none is); and for a one-word term, whether the book
 * uses it on its own as a name (absent in rows written before: taken as yes). `character_id` is "" for
 * a person the book names who is not one of the book's characters.
 */
export const GuardCharacter = z.object({
  character_id: z.string(),
  first: z.number(),
  terms: z.array(z.object({ text: z.string(), first: z.number(), ordinary: z.array(z.number()).optional(), alone: z.boolean().optional() })),
});
export type GuardCharacter = z.infer<typeof GuardCharacter>;

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
/** A name word used as an ordinary word at least this often (share of its uses) is not taken for a name where capitals say nothing. */
const MOSTLY_ORDINARY = 0.5;
/** What ends a sentence before a word, so that its capital says nothing. */
const SENTENCE_BREAKS = new Set([...".!?…:;\n\r\u2028\u2029\"“”«»"].map((c) => c.charCodeAt(0)));

/** Whether text[from, to) (the gap between two words) ends a sentence. */
function breaksSentence(text: string, from: number, to: number): boolean {
  for (let i = Math.max(0, from); i < to; i++) if (SENTENCE_BREAKS.has(text.charCodeAt(i))) return true;
  return false;
}

const keysOf = (text: string) => wordsOf(text).map((w) => w.key);

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

/** The keys a word may stand for: itself, and the singular of a plural ("ashbys", "vanes"). */
const singulars = (key: string) => [key, ...(key.endsWith("s") ? [key.slice(0, -1)] : []), ...(key.endsWith("es") ? [key.slice(0, -2)] : [])];

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

/**
 * A late name as the guard matches it: its words' keys, how often the book uses each as an ordinary
 * word (0–1), and, for one word, whether the book uses it on its own as a name.
 */
export interface LateName {
  words: string[];
  ordinary: number[];
  alone: boolean;
}

/**
 * A term's word keys, remembered per term: a book's terms are kept in the API's memory and read on
 * every turn (War and Peace's 900 would otherwise cost several milliseconds a turn).
 */
const keysOfTerm = new WeakMap<GuardCharacter["terms"][number], string[]>();
function termKeys(term: GuardCharacter["terms"][number]): string[] {
  let keys = keysOfTerm.get(term);
  if (!keys) keysOfTerm.set(term, (keys = keysOf(term.text)));
  return keys;
}

/**
 * Whether the reader has met the person by a name that picks them out. A single word is the weak
 * kind of name: a given name is shared ("Catherine" is Kitty and Lady Catherine), and a book-NLP list
 * may give one person's bare name to another. So a person known by a name of several words ("Lady
 * Catherine") is met once one of those has been read; a person with one-word names only, once one of
 * them has.
 */
function metByName(c: GuardCharacter, position: number): boolean {
  if (c.first > position) return false;
  const full = c.terms.filter((t) => termKeys(t).length > 1);
  return full.length === 0 || full.some((t) => t.first <= position);
}

/**
 * The names a reader at `position` has not met: the terms of people who first appear after it, less
 * those by which the reader has met anyone. The character being spoken to is left out (the reader
 * chose them by name), and so are the titled people who share a name word with them.
 */
export function lateNames(characters: readonly GuardCharacter[], position: number, speakerId: string): LateName[] {
  const met = new Set(characters.flatMap((c) => c.terms.filter((t) => t.first <= position).map((t) => termKeys(t).join(" "))));
  const speakerWords = new Set(characters.filter((c) => c.character_id === speakerId).flatMap((c) => c.terms.flatMap(termKeys)));
  const late = new Map<string, LateName>();
  for (const c of characters) {
    if (c.character_id === speakerId || metByName(c, position)) continue;
    for (const t of c.terms) {
      const words = termKeys(t);
      const key = words.join(" ");
      if (t.first <= position || met.has(key) || words.length === 0 || (c.character_id === "" && words.some((w) => speakerWords.has(w)))) continue;
      late.set(key, { words, ordinary: t.ordinary ?? words.map(() => 0), alone: t.alone ?? true });
    }
  }
  return [...late.values()];
}

export type SpoilerKind = "name" | "passage";

export interface GuardStep {
  /** The text that may go to the reader now (possibly empty). */
  forward: string;
  /** Set when the reply must stop here: nothing after `forward` may be sent. */
  stop?: SpoilerKind;
}

export interface SpoilerGuardOptions {
  position: number;
  /** From lateNames; a plain string is a name no word of which the book uses as an ordinary word. */
  lateNames: readonly (LateName | string)[];
  /** The book's shingles; without one only names are checked. */
  shingles?: ShingleIndex;
  shingleWords?: number;
}

export interface SpoilerGuard {
  /** Feeds the next piece of the reply. After a stop, nothing more is forwarded. */
  push(delta: string): GuardStep;
  /** The reply has ended: the rest is checked and forwarded. */
  end(): GuardStep;
}

interface Word {
  start: number;
  end: number;
  key: string;
  kase: WordCase;
  opening: boolean;
}

/**
 * Whether the reply's words `tail`, spelling `name`, are written as that name. Several words are,
 * unless all are in lower case and each is also an ordinary word of the book. One word is when the
 * book never uses it as an ordinary word, or when it is capitalised inside a sentence; where its
 * case says nothing (lower case, a sentence's first word, capitals), it is only if the book uses it
 * on its own as a name ("Crane said", not only "Silas Crane"), and, but in lower case, more often as
 * a name than as a word.
 */
function writtenAsName(tail: readonly Word[], name: LateName): boolean {
  if (tail.length > 1) return tail.some((w, i) => w.kase !== "lower" || (name.ordinary[i] ?? 0) === 0);
  const [word] = tail;
  const ordinary = name.ordinary[0] ?? 0;
  if (word!.kase === "capitalised" && !word!.opening) return true;
  if (!name.alone) return false;
  if (word!.kase === "lower") return ordinary === 0;
  return ordinary < MOSTLY_ORDINARY;
}

export function createSpoilerGuard(options: SpoilerGuardOptions): SpoilerGuard {
  const n = options.shingleWords ?? SHINGLE_WORDS;
  const names = options.lateNames
    .map((name): LateName => (typeof name === "string" ? { words: keysOf(name), ordinary: keysOf(name).map(() => 0), alone: true } : name))
    .filter((name) => name.words.length > 0);
  const byLast = new Map<string, LateName[]>();
  for (const name of names) byLast.set(name.words.at(-1)!, [...(byLast.get(name.words.at(-1)!) ?? []), name]);
  /** Names of several words by their first word: what a reply's tail may be the start of. */
  const byFirst = new Map<string, LateName[]>();
  for (const name of names) if (name.words.length > 1) byFirst.set(name.words[0]!, [...(byFirst.get(name.words[0]!) ?? []), name]);
  const keep = Math.max(n, ...names.map((name) => name.words.length));
  let text = "";
  let scanned = 0;
  let forwarded = 0;
  let stopped = false;
  let words: Word[] = [];
  /** Whether the text already sent after the last word ended a sentence. */
  let sentBreak = true;
  const pattern = new RegExp(WORD_PATTERN);

  /** The start of the earliest word of a late name ending at the last word (negative once sent), else null. */
  function nameEndingHere(): number | null {
    const last = words.at(-1)!;
    for (const key of singulars(last.key)) {
      for (const name of byLast.get(key) ?? []) {
        if (name.words.length > words.length) continue;
        const tail = words.slice(-name.words.length);
        if (!tail.every((w, i) => i === tail.length - 1 || w.key === name.words[i])) continue;
        if (writtenAsName(tail, name)) return tail[0]!.start;
      }
    }
    return null;
  }

  /** The start of a late run of n words ending at the last word (negative once sent), else null. */
  function passageEndingHere(): number | null {
    if (!options.shingles || words.length < n) return null;
    const tail = words.slice(-n);
    const first = options.shingles.firstEnd(shingleKey(tail.map((w) => w.key)));
    return first !== null && first > options.position ? tail[0]!.start : null;
  }

  /** Where the held-back words start: the first of the longest tail that begins a late name. */
  function heldFrom(): number {
    for (let m = Math.min(words.length, keep); m > 0; m--) {
      const first = words[words.length - m]!;
      const begun = byFirst.get(first.key);
      if (!begun) continue;
      const tail = words.slice(-m);
      if (begun.some((name) => name.words.length > m && tail.every((w, i) => w.key === name.words[i]))) return first.start;
    }
    return text.length;
  }

  function take(until: number, stop?: SpoilerKind): GuardStep {
    const cut = Math.max(forwarded, until);
    const forward = text.slice(forwarded, cut);
    const lastEnd = words.at(-1)?.end ?? 0;
    if (cut > lastEnd) sentBreak ||= breaksSentence(text, lastEnd, cut);
    // Only what is held back is kept: a reply's whole text, grown piece by piece, would be re-read by
    // every search of it.
    text = text.slice(cut);
    scanned -= cut;
    for (const w of words) {
      w.start -= cut;
      w.end -= cut;
    }
    forwarded = 0;
    if (stop) stopped = true;
    return stop ? { forward, stop } : { forward };
  }

  function step(final: boolean): GuardStep {
    if (stopped) return { forward: "" };
    pattern.lastIndex = scanned;
    let partial = text.length;
    for (let m = pattern.exec(text); m; m = pattern.exec(text)) {
      const end = m.index + m[0].length;
      // A word that reaches the end of what has come so far may go on in the next piece.
      if (end === text.length && !final) {
        partial = m.index;
        break;
      }
      scanned = end;
      const key = spelledKey(m[0]);
      if (!key) continue;
      const lastEnd = words.at(-1)?.end ?? 0;
      const opening = sentBreak || words.length === 0 || breaksSentence(text, lastEnd, m.index);
      sentBreak = false;
      words.push({ start: m.index, end, key, kase: wordCase(m[0]), opening });
      if (words.length > keep * 2) words = words.slice(-keep);
      const name = nameEndingHere();
      if (name !== null) return take(name, "name");
      const passage = passageEndingHere();
      if (passage !== null) return take(passage, "passage");
    }
    return take(final ? text.length : Math.min(partial, heldFrom()));
  }

  return {
    push(delta) {
      if (stopped) return { forward: "" };
      text += delta;
      return step(false);
    },
    end() {
      return step(true);
    },
  };
}

/** How a stopped reply ends, in the character's voice (English whatever the book's language). */
export const SPOILER_CLOSING = "… but that is a story for the pages you have yet to read.";

/** The closing to send after `sent`, the text forwarded so far. */
export function closingAfter(sent: string): string {
  if (sent.trim() === "") return "That is a story for the pages you have yet to read.";
  return (/\s$/.test(sent) ? "" : " ") + SPOILER_CLOSING;
}
