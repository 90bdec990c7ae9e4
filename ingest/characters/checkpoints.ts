import { isWhitespace } from "../../common/whitespace.ts";
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

/**
 * Finds a fragment of the book in it, whatever whitespace the book has between its words, and across
 * the dialogue tag between the pieces of a line joined without it (“Friday is too soon,” said
 * Ottilie. “Glue…” is the line "Friday is too soon. Glue…", see character-lines.ts).
 */
export type TextLocator = (fragment: string, from?: number) => Span | null;

/** Words a search starts from; the rest of the fragment is compared at each hit. */
const HEAD_WORDS = 6;
const REGEX_SPECIAL = /[.*+?^${}()|[\]\\]/g;
/** The dialogue tag between two pieces of one line: its closing mark, the tag, the opening mark. */
const TAG_BETWEEN = /^["”’]\s+[^"“”‘]{1,200}?[“"‘]/u;

export function createTextLocator(text: string): TextLocator {
  /** Where `word` ends when it is at `pos`; a full stop the line put for the comma before a tag matches that comma. */
  const wordEnd = (word: string, pos: number): number | null => {
    if (text.startsWith(word, pos)) return pos + word.length;
    const comma = word.endsWith(".") ? `${word.slice(0, -1)},` : undefined;
    return comma !== undefined && text.startsWith(comma, pos) && /["”’]/u.test(text[pos + comma.length] ?? "") ? pos + comma.length : null;
  };
  /** The end of the fragment's words when they are at `at`, else null. */
  const endIfAt = (at: number, words: readonly string[]): number | null => {
    let pos = at;
    for (let i = 0; i < words.length; i++) {
      if (i > 0) {
        const before = pos;
        const tag = TAG_BETWEEN.exec(text.slice(pos, pos + 240));
        if (tag) pos += tag[0].length;
        else while (pos < text.length && isWhitespace(text.charCodeAt(pos))) pos++;
        if (pos === before) return null;
      }
      const end = wordEnd(words[i]!, pos);
      if (end === null) return null;
      pos = end;
    }
    return pos;
  };
  return (fragment, from = 0) => {
    const words = fragment.replace(/…$/u, "").trim().split(/\s+/).filter(Boolean);
    if (words.length === 0) return null;
    // The head stops at the first word with punctuation after it: a tag may stand there, and a full stop for its comma.
    const cut = words.findIndex((w) => /\p{P}$/u.test(w));
    const head = words.slice(0, Math.min(HEAD_WORDS, cut === -1 ? HEAD_WORDS : cut + 1)).map((w, i, all) =>
      i === all.length - 1 ? w.replace(/[.,;:!?]+$/u, "").replace(REGEX_SPECIAL, "\\$&") : w.replace(REGEX_SPECIAL, "\\$&"),
    );
    const pattern = new RegExp(head.filter(Boolean).join("\\s+"), "g");
    pattern.lastIndex = Math.max(0, from);
    for (let m = pattern.exec(text); m; m = pattern.exec(text)) {
      const end = endIfAt(m.index, words);
      if (end !== null) return { start: m.index, end };
      pattern.lastIndex = m.index + 1;
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

/**
 * The character's lines where the book has them, each with the position (0–1) at which it ends, in
 * book order; a line that cannot be found is left out: it is never used without the book showing
 * where it comes.
 */
export function placedLines(character: FoundCharacter, locate: TextLocator, textLength: number): { position: number; text: string }[] {
  const lines = character.lines ?? character.quotes;
  return placeInOrder(locate, lines)
    .flatMap((at, i) => (at === null ? [] : [{ position: at.end / Math.max(1, textLength), text: lines[i]! }]))
    .sort((a, b) => a.position - b.position);
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

/**
 * Where each character's checkpoints go (spoiler-safe chat): where their material accumulates, not at
 * fixed fractions of the book. A character's first checkpoint comes once the book has shown
 * `firstAmount` pieces of their material (quotes and passages), or all of it when they have fewer;
 * each later one once it has shown double the amount of the one before; the last, if the budget
 * allows, once it has shown all of it. So a reader meets no one mute for longer than it takes the book
 * to show a couple of their lines, and the knowledge grows as the character does.
 *
 * A book gets at most `budget` checkpoints in all: the model calls grow with it, not with where the
 * characters are. They are handed out in rounds, every character's first before anyone's second, and
 * within a round in the order given (the caller passes the characters most important first).
 */
export const DEFAULT_FIRST_CHECKPOINT_MATERIAL = 2;
/** Positions are rounded up to this step: the checkpoint's tag stays short and still follows the piece it was placed after. */
export const CHECKPOINT_POSITION_STEP = 1e-4;

export interface CheckpointPlacementOptions {
  /** The most checkpoints the book gets, all characters together. */
  budget: number;
  firstAmount?: number;
}

/** The amounts of material (1-based counts) a character's checkpoints are placed after, earliest first. */
export function materialAmounts(total: number, firstAmount: number = DEFAULT_FIRST_CHECKPOINT_MATERIAL): number[] {
  if (total <= 0) return [];
  const amounts: number[] = [];
  for (let n = Math.max(1, Math.floor(firstAmount)); n < total; n *= 2) amounts.push(n);
  amounts.push(total);
  return amounts;
}

/**
 * The earliest position (a multiple of the step) whose cutoff, `floor(position * textLength)`, keeps
 * the piece ending at `end`; null when that is the end of the book (the whole-book persona is for it).
 */
export function positionAfter(end: number, textLength: number): number | null {
  if (textLength <= 0) return null;
  let steps = Math.ceil(end / textLength / CHECKPOINT_POSITION_STEP);
  // Float rounding may leave the cutoff a character short of the piece: step on until it is not.
  while (Math.floor(((steps * CHECKPOINT_POSITION_STEP) * textLength)) < end) steps++;
  const position = Number((steps * CHECKPOINT_POSITION_STEP).toFixed(4));
  return position < 1 ? position : null;
}

/**
 * Per character (in the order given), the positions of their checkpoints, ascending. `materialEnds`
 * holds, per character, where each located piece of their material ends (UTF-16 offsets, any order).
 */
export function placeCheckpoints(materialEnds: readonly (readonly number[])[], textLength: number, options: CheckpointPlacementOptions): number[][] {
  const candidates = materialEnds.map((ends) => {
    const sorted = [...ends].sort((a, b) => a - b);
    const positions = materialAmounts(sorted.length, options.firstAmount).flatMap((n) => positionAfter(sorted[n - 1]!, textLength) ?? []);
    return [...new Set(positions)];
  });
  const placed: number[][] = candidates.map(() => []);
  let left = Math.max(0, Math.floor(options.budget));
  for (let round = 0; left > 0 && candidates.some((c) => c.length > round); round++) {
    for (let i = 0; i < candidates.length && left > 0; i++) {
      const position = candidates[i]![round];
      if (position === undefined) continue;
      placed[i]!.push(position);
      left--;
    }
  }
  return placed;
}

/**
 * Where each piece of a placed character's material ends in the book (the pieces that were found),
 * counted from just after their first mention: a line spoken before the name is given (Mrs. Bennet's
 * opening words) is no use to a reader who has not met her, and knownAt keeps nothing before it.
 */
export function materialEnds(placed: PlacedCharacter): number[] {
  return [...placed.quoteAt, ...placed.passageAt].flatMap((at) => (at === null ? [] : [Math.max(at.end, placed.firstAppearance + 1)]));
}

/** How many checkpoints a book of `characters` characters gets in all: 1 → none (the whole book only). */
export function checkpointBudget(setting: number, characters: number): number {
  return Math.max(0, Math.floor(setting) - 1) * Math.max(0, characters);
}

/**
 * What a book records as its attempted checkpoints: the positions placed, or, with checkpoints on and
 * none placed (no character has material that can be located), [1], a checkpoint no reader part-way
 * reaches, so that a turn never takes the empty list for "the whole book".
 */
export function attemptedCheckpoints(enabled: boolean, placed: readonly number[]): number[] {
  if (!enabled) return [];
  const positions = [...new Set(placed)].sort((a, b) => a - b);
  return positions.length > 0 ? positions : [1];
}
