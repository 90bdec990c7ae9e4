import { breaksSentence, keysOf, singulars, spelledKey, WORD_PATTERN, wordCase, type WordCase } from "../../common/text-normalise.ts";
import { SHINGLE_WORDS, shingleKey, type ShingleIndex } from "../../common/spoiler-guard/shingles.ts";
import { MOSTLY_ORDINARY, type GuardCharacter } from "../../common/spoiler-guard/people.ts";

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
 * MAX_FINGERPRINTS of them, common/spoiler-guard/shingles.ts), at most the index's window - 1 words later.
 *
 * What it checks against is built at ingestion: the book's people (common/spoiler-guard/people.ts) and its passages
 * (common/spoiler-guard/shingles.ts). Pure: no I/O.
 */

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

/** Where the reader meets each person by name, remembered like the terms' keys: it is asked every turn. */
const metAt = new WeakMap<GuardCharacter, number>();

/**
 * Whether the reader has met the person by a name that picks them out. A single word is the weak
 * kind of name: a given name is shared ("Catherine" is Kitty and Lady Catherine), and a book-NLP list
 * may give one person's bare name to another. So a person known by a name of several words ("Lady
 * Catherine") is met once one of those has been read; a person with one-word names only, once one of
 * them has.
 */
function metByName(c: GuardCharacter, position: number): boolean {
  let at = metAt.get(c);
  if (at === undefined) {
    const full = c.terms.filter((t) => termKeys(t).length > 1).map((t) => t.first);
    metAt.set(c, (at = full.length === 0 ? c.first : Math.max(c.first, Math.min(...full))));
  }
  return at <= position;
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
