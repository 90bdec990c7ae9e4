import type { ChunkHit, IndexedChunk, SearchOptions } from "../search.ts";

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
  count(bookId: string): Promise<number>;
  deleteBook(bookId: string): Promise<void>;
  close?(): Promise<void>;
}
