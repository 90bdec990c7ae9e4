import { isWhitespace } from "../common/chunking.ts";
import type { FoundCharacter } from "./character-selection.ts";

/**
 * What a character is known by at a checkpoint of the book (spoiler-safe chat): the same material the
 * two LLM passes get for the whole book — quotes, aliases, passages, co-occurring characters — cut to
 * what comes before the checkpoint.
 *
 * Quotes and passages are the book's words with their whitespace collapsed (and a quote may be
 * clipped with "…"), so they are found in the book whitespace-insensitively. One that cannot be found
 * is left out at every checkpoint: material is only ever used where the book shows it comes first.
 *
 * Pure: no I/O.
 */

/** Where a fragment is in the book: its first character and the one after its last (UTF-16 offsets). */
export interface Span {
  start: number;
  end: number;
}

/** Finds a fragment of the book in it, whatever whitespace the book has between its words. */
export type TextLocator = (fragment: string, from?: number) => Span | null;

/** Words a search starts from; the rest of the fragment is compared at each hit. */
const HEAD_WORDS = 6;
const REGEX_SPECIAL = /[.*+?^${}()|[\]\\]/g;

export function createTextLocator(text: string): TextLocator {
  /** The end of the fragment's words when they are at `at`, else null. */
  const endIfAt = (at: number, words: readonly string[]): number | null => {
    let pos = at;
    for (let i = 0; i < words.length; i++) {
      if (i > 0) {
        const before = pos;
        while (pos < text.length && isWhitespace(text.charCodeAt(pos))) pos++;
        if (pos === before) return null;
      }
      if (!text.startsWith(words[i]!, pos)) return null;
      pos += words[i]!.length;
    }
    return pos;
  };
  return (fragment, from = 0) => {
    const words = fragment.replace(/…$/u, "").trim().split(/\s+/).filter(Boolean);
    if (words.length === 0) return null;
    const head = new RegExp(words.slice(0, HEAD_WORDS).map((w) => w.replace(REGEX_SPECIAL, "\\$&")).join("\\s+"), "g");
    head.lastIndex = Math.max(0, from);
    for (let m = head.exec(text); m; m = head.exec(text)) {
      const end = endIfAt(m.index, words);
      if (end !== null) return { start: m.index, end };
      head.lastIndex = m.index + 1;
    }
    return null;
  };
}

/** Where a character's material is in the book, in UTF-16 offsets; null where it cannot be found. */
export interface PlacedCharacter {
  character: FoundCharacter;
  /** The first occurrence of the name or an alias (text.length when none is found). */
  firstAppearance: number;
  quoteAt: (Span | null)[];
  passageAt: (Span | null)[];
  aliasAt: (Span | null)[];
}

/**
 * Quotes and passages come in book order, so each is looked for after the one before it (one pass
 * over the book per list) and, when not found there, from the start.
 */
function placeInOrder(locate: TextLocator, fragments: readonly string[]): (Span | null)[] {
  let cursor = 0;
  return fragments.map((fragment) => {
    const at = locate(fragment, cursor) ?? locate(fragment, 0);
    if (at !== null) cursor = at.start;
    return at;
  });
}

/** The first occurrence of the character's name or an alias; null when none is found. */
export function firstMention(character: Pick<FoundCharacter, "name" | "aliases">, locate: TextLocator): number | null {
  const found = [character.name, ...character.aliases].flatMap((form) => locate(form)?.start ?? []);
  return found.length > 0 ? Math.min(...found) : null;
}

export function placeCharacter(character: FoundCharacter, locate: TextLocator, textLength: number): PlacedCharacter {
  return {
    character,
    firstAppearance: firstMention(character, locate) ?? textLength,
    quoteAt: placeInOrder(locate, character.quotes),
    passageAt: placeInOrder(locate, character.passages),
    aliasAt: character.aliases.map((alias) => locate(alias)),
  };
}

/** Occurrences of needle that start before `end` (non-overlapping). */
function occurrencesBefore(text: string, needle: string, end: number): number {
  if (!needle) return 0;
  let n = 0;
  for (let at = text.indexOf(needle); at >= 0 && at < end; at = text.indexOf(needle, at + needle.length)) n++;
  return n;
}

/**
 * The character as known before `cutoff` (a UTF-16 offset), or null when the book has nothing of
 * them before it: not yet mentioned, or neither a quote nor a passage of theirs comes first.
 * `cast` is every placed character of the book, for co-occurrence.
 */
export function knownAt(placed: PlacedCharacter, cutoff: number, text: string, cast: readonly PlacedCharacter[]): FoundCharacter | null {
  const { character } = placed;
  if (placed.firstAppearance >= cutoff) return null;
  // A fragment counts only when it ends before the cutoff: one that straddles it would leak.
  const before = (at: Span | null) => at !== null && at.end <= cutoff;
  const quotes = character.quotes.filter((_, i) => before(placed.quoteAt[i]!));
  const passages = character.passages.filter((_, i) => before(placed.passageAt[i]!));
  if (quotes.length === 0 && passages.length === 0) return null;
  const met = new Set(cast.filter((c) => c.firstAppearance < cutoff).map((c) => c.character.name));
  return {
    ...character,
    aliases: character.aliases.filter((_, i) => before(placed.aliasAt[i]!)),
    quotes,
    passages,
    quoteCount: quotes.length,
    mentionCount: [character.name, ...character.aliases].reduce((n, form) => n + occurrencesBefore(text, form, cutoff), 0),
    cooccurring: character.cooccurring.filter((c) => met.has(c.name)),
  };
}
