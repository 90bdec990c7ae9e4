/**
 * Spoiler-safe chat: how far a reader has read, and the last passage a turn may use at that point.
 *
 * A position is a fraction of the book's text, counted in characters: 0 is the first character,
 * 1 the end. The frontend knows pages, so a reader on page `current_page` of `page_count` is at
 * `current_page / page_count` — pages are taken to hold equal shares of the text. `null` stands for
 * the whole book: no position known (no library row, no page count, page 0), or a reader at or past
 * the end.
 *
 * Pure: no I/O.
 */
import { partitionPoint } from "../sorted.ts";

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
  return partitionPoint(chunkEnds.length, (i) => chunkEnds[i]! <= position) - 1;
}
