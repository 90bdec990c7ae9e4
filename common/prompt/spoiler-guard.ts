import { z } from "zod";
import { passageWord, SHINGLE_WORDS, shingleKey, WORD_PATTERN, type ShingleIndex } from "./book-shingles.ts";

/**
 * The spoiler guard on the chat's way out. A model that knows a famous book can name the murderer
 * from its own memory even when nothing late reached its prompt; the guard reads the streamed reply
 * word by word and stops it at the first
 * - `name`: a name of a character the reader has not met (the character's first appearance is after
 *   the reader's position, and this form of the name or word of it first occurs after it too, so a
 *   surname the reader knows from a met relative passes), or
 * - `passage`: a run of SHINGLE_WORDS words whose first occurrence in the book ends after the position.
 *
 * It holds back only the word being written, and the words that could begin a late name ("Silas"
 * while "Silas Crane" is one): a name is never shown in part. A late passage is recognised on its
 * SHINGLE_WORDS-th word, so up to SHINGLE_WORDS - 1 words of it have gone out (holding them back
 * would delay every reply by as many words); in a book too long for every run to be held (more than
 * MAX_FINGERPRINTS of them, book-shingles.ts), at most the index's window - 1 words later.
 *
 * Pure: no I/O.
 */

/** A character as the guard knows them: where they first appear, and each name and name word with its own first occurrence (positions 0–1). */
export const GuardCharacter = z.object({
  character_id: z.string(),
  first: z.number(),
  terms: z.array(z.object({ text: z.string(), first: z.number() })),
});
export type GuardCharacter = z.infer<typeof GuardCharacter>;

/** Words of a name that name no one on their own. */
const TITLES = new Set(["Mr", "Mrs", "Miss", "Ms", "Mx", "Dr", "Sir", "Lady", "Lord", "Madam", "Madame", "Captain", "Colonel", "Major", "Lieutenant", "General", "Uncle", "Aunt", "The"]);
/** Shorter name words are left out: "Al", "Jo" are words or parts of words too often. */
const MIN_TERM_CHARS = 3;

const wordsOf = (text: string) => [...text.matchAll(WORD_PATTERN)].map((m) => m[0]);
const isCapitalised = (word: string) => word[0] !== word[0]!.toLowerCase();

/** Where `term` first occurs as whole words (case-sensitive), as a position; null when it does not. */
function firstOccurrence(text: string, term: string): number | null {
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])${wordsOf(term).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("[^\\p{L}\\p{N}]+")}(?![\\p{L}\\p{N}])`, "u");
  const at = pattern.exec(text)?.index;
  return at === undefined ? null : at / Math.max(1, text.length);
}

/**
 * What the guard knows of a book's characters, written at ingestion. A character none of whose names
 * is found counts as met from the start (first 0), as their first appearance does elsewhere.
 */
export function guardCharacters(text: string, characters: readonly { id: string; name: string; aliases: readonly string[] }[]): GuardCharacter[] {
  return characters.map((character) => {
    const forms = [...new Set([character.name, ...character.aliases].map((f) => f.trim()).filter((f) => wordsOf(f).length > 0))];
    const formFirsts = forms.map((f) => firstOccurrence(text, f)).filter((at): at is number => at !== null);
    const words = forms.flatMap((f) => (wordsOf(f).length > 1 ? wordsOf(f) : [])).filter((w) => isCapitalised(w) && !TITLES.has(w));
    const terms = [...new Set([...forms, ...words])]
      .filter((t) => t.length >= MIN_TERM_CHARS && !TITLES.has(t))
      .flatMap((t) => {
        const first = firstOccurrence(text, t);
        return first === null ? [] : [{ text: t, first }];
      });
    return { character_id: character.id, first: formFirsts.length > 0 ? Math.min(...formFirsts) : 0, terms };
  });
}

/**
 * The names a reader at `position` has not met. The character being spoken to is left out: the reader
 * chose them by name.
 */
export function lateNames(characters: readonly GuardCharacter[], position: number, speakerId: string): string[] {
  return characters
    .filter((c) => c.character_id !== speakerId && c.first > position)
    .flatMap((c) => c.terms.filter((t) => t.first > position).map((t) => t.text));
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
  lateNames: readonly string[];
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
  text: string;
}

export function createSpoilerGuard(options: SpoilerGuardOptions): SpoilerGuard {
  const n = options.shingleWords ?? SHINGLE_WORDS;
  const names = [...new Set(options.lateNames)].map(wordsOf).filter((w) => w.length > 0);
  const keep = Math.max(n, ...names.map((w) => w.length));
  let text = "";
  let scanned = 0;
  let forwarded = 0;
  let stopped = false;
  let words: Word[] = [];
  const pattern = new RegExp(WORD_PATTERN);

  /** The start of the earliest word of a late name ending at the last word (negative once sent), else null. */
  function nameEndingHere(): number | null {
    for (const name of names) {
      if (name.length > words.length) continue;
      const tail = words.slice(-name.length);
      if (tail.every((w, i) => w.text === name[i])) return tail[0]!.start;
    }
    return null;
  }

  /** The start of a late run of n words ending at the last word (negative once sent), else null. */
  function passageEndingHere(): number | null {
    if (!options.shingles || words.length < n) return null;
    const tail = words.slice(-n);
    const first = options.shingles.firstEnd(shingleKey(tail.map((w) => passageWord(w.text))));
    return first !== null && first > options.position ? tail[0]!.start : null;
  }

  /** Where the held-back words start: the first of the longest tail that begins a late name. */
  function heldFrom(): number {
    for (let m = Math.min(words.length, keep); m > 0; m--) {
      const tail = words.slice(-m);
      if (names.some((name) => name.length > m && tail.every((w, i) => w.text === name[i]))) return tail[0]!.start;
    }
    return text.length;
  }

  function take(until: number, stop?: SpoilerKind): GuardStep {
    const cut = Math.max(forwarded, until);
    const forward = text.slice(forwarded, cut);
    // Only what is held back is kept: a reply's whole text, grown piece by piece, would be re-read by
    // every search of it.
    text = text.slice(cut);
    scanned -= cut;
    for (const w of words) w.start -= cut;
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
      words.push({ start: m.index, text: m[0] });
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
