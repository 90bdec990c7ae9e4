import type { ChunkHit, IndexedChunk, SearchOptions } from "../contract/search.ts";

/** Chunks one `get` may ask for: the passages a chat reply can cite. */
export const MAX_CHUNKS_PER_GET = 10;

/** Checks a `get`'s indexes (whole, non-negative, at most MAX_CHUNKS_PER_GET) and drops repeats. */
export function chunkIndexesToGet(chunkIndexes: readonly number[]): number[] {
  const unique = [...new Set(chunkIndexes)];
  if (unique.length > MAX_CHUNKS_PER_GET) throw new RangeError(`at most ${MAX_CHUNKS_PER_GET} chunks per look-up, got ${unique.length}`);
  for (const i of unique) if (!Number.isSafeInteger(i) || i < 0) throw new RangeError(`chunk index must be a whole number, got ${i}`);
  return unique;
}

/**
 * Full-text (BM25) index port: one collection per book, created on first upsert.
 * Document id "{book_id}:{chunk_index}", fields chunk_index, text, book_id.
 */
export interface TextIndex {
  readonly adapter: "typesense" | "embedded";
  /** Inserts or replaces documents (same chunk_index = same document). */
  upsert(bookId: string, chunks: readonly IndexedChunk[]): Promise<void>;
  /** Best-matching chunks for a keyword query, best first; [] when the book has no collection. */
  search(bookId: string, query: string, options?: SearchOptions): Promise<ChunkHit[]>;
  /**
   * The stored chunks with these indexes, in the order asked, skipping those the index does not hold;
   * [] when the book has no collection. At most MAX_CHUNKS_PER_GET indexes (a RangeError beyond):
   * this is a look-up of a reply's passages, not a way to read a book out.
   */
  get(bookId: string, chunkIndexes: readonly number[]): Promise<IndexedChunk[]>;
  count(bookId: string): Promise<number>;
  deleteBook(bookId: string): Promise<void>;
  close?(): Promise<void>;
}
