/**
 * Spoiler-safe chat: how far a reader has read, and what a character may know at that point.
 *
 * A position is a fraction of the book's text, counted in characters: 0 is the first character,
 * 1 the end. The frontend knows pages, so a reader on page `current_page` of `page_count` is at
 * `current_page / page_count` — pages are taken to hold equal shares of the text. `null` stands for
 * the whole book: no position known (no library row, no page count, page 0), or a reader at or past
 * the end.
 *
 * Pure: no I/O.
 */

/**
 * CHARACTER_CHECKPOINTS = n lets a book's character passes cost up to n times the whole book's: up to
 * (n - 1) checkpoints per character on average, placed where each character's material accumulates
 * (ingest/checkpoints.ts). 2 keeps a book within twice the model calls of the whole book alone.
 */
export const DEFAULT_CHARACTER_CHECKPOINTS = 2;

/** The reader's position from the library row; null (the whole book) when it cannot be told. */
export function positionFromPages(currentPage: number | null | undefined, pageCount: number | null | undefined): number | null {
  if (currentPage == null || pageCount == null) return null;
  // Page 0 is the column's default, what a reader who never moved their bookmark has: not a position.
  if (!Number.isFinite(currentPage) || !Number.isFinite(pageCount) || pageCount <= 0 || currentPage <= 0) return null;
  if (currentPage > pageCount) return null;
  return wholeBookAsNull(currentPage / pageCount);
}

/** The position a turn uses: the one in the request body when given, else the library's. */
export function turnPosition(requested: number | undefined, fromLibrary: number | null): number | null {
  return requested === undefined ? fromLibrary : wholeBookAsNull(requested);
}

function wholeBookAsNull(position: number): number | null {
  return position >= 1 ? null : Math.max(0, position);
}

/**
 * The last chunk that ends at or before the position, or -1 when none does (the reader has not
 * finished the first chunk: no passage may be used). `chunkEnds` is ascending.
 */
export function lastChunkWithin(chunkEnds: readonly number[], position: number): number {
  let low = 0;
  let high = chunkEnds.length - 1;
  let found = -1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    if (chunkEnds[mid]! <= position) {
      found = mid;
      low = mid + 1;
    } else {
      high = mid - 1;
    }
  }
  return found;
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

export interface Checkpoint {
  /** The position the knowledge is written as of. */
  position: number;
}

/**
 * Which of a character's knowledge a turn at `position` uses:
 * - `whole-book`: the characters row (the book has no checkpoints, as before this feature);
 * - `checkpoint`: the latest checkpoint at or before the position;
 * - `name-only`: none fits without looking past the position, so the persona is built from the name
 *   alone: the reader has not reached the character's first checkpoint (placed where the book has
 *   shown a couple of their lines), or the passes for the earlier ones failed. Never a later checkpoint, not even for a character the reader has yet to meet: it is
 *   written from what comes after the position, all of it a spoiler (the passages, cut at the
 *   position, still show what the reader has read of them).
 * `checkpoints` are the ones written for the character (failed ones are absent), `attempted` the
 * book's checkpoint positions.
 */
export type Knowledge<T extends Checkpoint> = { kind: "whole-book" } | { kind: "checkpoint"; checkpoint: T } | { kind: "name-only" };

export function knowledgeAt<T extends Checkpoint>(
  position: number,
  attempted: readonly number[],
  checkpoints: readonly T[],
): Knowledge<T> {
  if (attempted.length === 0) return { kind: "whole-book" };
  const before = [...checkpoints].sort((a, b) => a.position - b.position).filter((c) => c.position <= position).at(-1);
  return before ? { kind: "checkpoint", checkpoint: before } : { kind: "name-only" };
}
