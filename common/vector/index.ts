import type { ChunkHit, IndexedChunk, SearchOptions } from "../contract/search.ts";

export interface VectorPoint extends IndexedChunk {
  vector: readonly number[];
}

/**
 * Vector index port: one collection per book, created on first upsert with the dimension of the
 * first vector and cosine distance. Point id = chunk_index; payload {chunk_index, text, book_id}.
 */
export interface VectorIndex {
  readonly adapter: "qdrant" | "embedded";
  /** Inserts or replaces points (same chunk_index = same point). */
  upsert(bookId: string, points: readonly VectorPoint[]): Promise<void>;
  /** Nearest chunks by cosine similarity, best first; [] when the book has no collection. */
  search(bookId: string, vector: readonly number[], options?: SearchOptions): Promise<ChunkHit[]>;
  /** Number of points stored for the book (0 when it has no collection). */
  count(bookId: string): Promise<number>;
  /** Drops the book's collection; a no-op when there is none. */
  deleteBook(bookId: string): Promise<void>;
  close?(): Promise<void>;
}
