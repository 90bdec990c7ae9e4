import type { Book, BookRow } from "../contract/rows.ts";
import type { Queryable } from "./index.ts";
import { camelize, findById } from "./row-lookup.ts";

/**
 * Books (the frontend's table: the backend writes processing_status only, in ingestions.ts) and
 * book_sources (ours): which file a book was ingested from.
 */

const BOOK_COLUMNS = "id, title, author, description, language, file_path, processing_status";

export function getBook(db: Queryable, id: string): Promise<Book | null> {
  return findById<BookRow>(db, "books", BOOK_COLUMNS, id);
}

/** Records the SHA-256 of the file a book was ingested from (book_sources), so the same file finds it again. */
export async function recordBookSource(db: Queryable, bookId: string, contentHash: string): Promise<void> {
  await db.query(
    `INSERT INTO book_sources (book_id, content_hash) VALUES ($1, $2)
     ON CONFLICT (book_id) DO UPDATE SET content_hash = EXCLUDED.content_hash`,
    [bookId, contentHash],
  );
}

/** The newest book ingested from a file with this SHA-256, or null. */
export async function findBookBySource(db: Queryable, contentHash: string): Promise<Book | null> {
  const [row] = await db.query<BookRow>(
    `SELECT ${BOOK_COLUMNS.split(", ").map((c) => `b.${c}`).join(", ")}
     FROM book_sources s JOIN books b ON b.id = s.book_id WHERE s.content_hash = $1 ORDER BY s.created_at DESC LIMIT 1`,
    [contentHash],
  );
  return row ? camelize(row) : null;
}
