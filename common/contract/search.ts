/** Types shared by the vector index, the full-text index and hybrid retrieval. */

/** A chunk of a book as both indexes store it. */
export interface IndexedChunk {
  chunkIndex: number;
  text: string;
}

export interface ChunkHit extends IndexedChunk {
  /** The index's own score: cosine similarity for vectors, BM25 for text. Not comparable across indexes. */
  score: number;
}

export interface SearchOptions {
  /** Number of hits to return; 10 when unset. */
  limit?: number;
  /** Hard filter: only chunks with chunk_index <= this (spoiler-safe chat). */
  maxChunkIndex?: number;
  /** Called when the search went on without the book because its index is still loading (embedded indexes). */
  onLoading?: () => void;
}

export const DEFAULT_SEARCH_LIMIT = 10;
