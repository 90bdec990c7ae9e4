import type { Queryable } from "./index.ts";
import { isUuid } from "./row-lookup.ts";

/**
 * The backend's table for the spoiler guard on chat replies (migration 0005): one row per book, its
 * characters' first appearances and names (JSON) and its shingle index (base64), both opaque here
 * (common/spoiler-guard/: the format; ingest/spoiler-guard/ builds it, api/chat/ reads it).
 */

export type SpoilerGuardRow = {
  characters: unknown;
  /** null when longer than the reader's bound: not read at all. */
  shingles: string | null;
  shingles_chars: number;
};

export async function saveSpoilerGuard(db: Queryable, bookId: string, row: { characters: readonly unknown[]; shingles: string }): Promise<void> {
  await db.query(
    `INSERT INTO book_spoiler_guards (book_id, characters, shingles) VALUES ($1, $2::jsonb, $3)
     ON CONFLICT (book_id) DO UPDATE SET characters = EXCLUDED.characters, shingles = EXCLUDED.shingles, updated_at = now()`,
    [bookId, row.characters, row.shingles],
  );
}

/**
 * null when the book has no row (ingested before the guard, or not at all). A shingle index longer
 * than `maxShingleChars` stays in the database: a row written before the index was bounded can hold
 * 120 MB, which the reader would hold in memory several times over while decoding it.
 */
export async function getSpoilerGuard(db: Queryable, bookId: string, maxShingleChars: number): Promise<SpoilerGuardRow | null> {
  if (!isUuid(bookId)) return null;
  const [row] = await db.query<{ characters: unknown; shingles: string | null; shingles_chars: number | string }>(
    "SELECT characters, CASE WHEN length(shingles) <= $2 THEN shingles END AS shingles, length(shingles) AS shingles_chars FROM book_spoiler_guards WHERE book_id = $1",
    [bookId, maxShingleChars],
  );
  return row ? { characters: row.characters, shingles: row.shingles, shingles_chars: Number(row.shingles_chars) } : null;
}
