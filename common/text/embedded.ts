import MiniSearch, { type AsPlainObject, type Options, type SearchResult } from "minisearch";
import { createBookShelf, writeFileAtomic } from "../embedded-store.ts";
import { DEFAULT_SEARCH_LIMIT, type ChunkHit, type IndexedChunk, type SearchOptions } from "../search.ts";
import type { TextIndex } from "./index.ts";
import { TOKENIZER_VERSION, tokenize } from "./tokenize.ts";

/**
 * Embedded BM25 index: one MiniSearch index per book (MiniSearch scores with BM25+, k 1.2, b 0.7).
 *
 * Queries match whole terms only (no prefix, no typo tolerance): queries come from the query
 * rewriter as keywords, exact terms keep precision high and search cheap, and tokenize.ts already
 * folds case, accents, Urdu spelling variants and plurals. Terms are OR-ed, so a chunk matching
 * more of them ranks higher.
 *
 * File `{dir}/{bookId}.bm25.json`: `{format, tokenizer, index}` with MiniSearch's own JSON,
 * rewritten whole (temp file, fsync, rename) before each upsert resolves. An index written by an
 * older tokenizer is rebuilt from its stored texts when loaded.
 */

export const TEXT_FILE_EXTENSION = ".bm25.json";
const FILE_FORMAT = 1;

export interface EmbeddedTextIndexOptions {
  /** Folder holding one file per book; created on first write. */
  dir: string;
  /** Books kept in memory at once; the least recently used idle one is dropped beyond this. */
  maxOpenBooks?: number;
}

interface TextDocument {
  id: string;
  chunkIndex: number;
  text: string;
}

interface TextFile {
  format: number;
  tokenizer: number;
  index: AsPlainObject;
}

const MINISEARCH_OPTIONS: Options<TextDocument> = {
  idField: "id",
  fields: ["text"],
  storeFields: ["text", "chunkIndex"],
  tokenize,
  // tokenize already returns final terms.
  processTerm: (term) => term,
  // Upsert vacuums itself before writing, so the file never carries discarded documents.
  autoVacuum: false,
  searchOptions: { prefix: false, fuzzy: false, combineWith: "OR" },
};

function storedChunk(result: SearchResult): IndexedChunk {
  return { chunkIndex: result.chunkIndex as number, text: result.text as string };
}

function decode(bytes: Buffer, bookId: string): MiniSearch<TextDocument> {
  const file = JSON.parse(bytes.toString("utf8")) as TextFile;
  if (file.format !== FILE_FORMAT) throw new Error(`text index file of book ${bookId} has unknown format ${String(file.format)}`);
  const index = MiniSearch.loadJS<TextDocument>(file.index, MINISEARCH_OPTIONS);
  if (file.tokenizer === TOKENIZER_VERSION) return index;
  const rebuilt = new MiniSearch<TextDocument>(MINISEARCH_OPTIONS);
  rebuilt.addAll(index.search(MiniSearch.wildcard).map((r) => ({ id: r.id as string, ...storedChunk(r) })));
  return rebuilt;
}

function encode(index: MiniSearch<TextDocument>): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ format: FILE_FORMAT, tokenizer: TOKENIZER_VERSION, index }));
}

export function createEmbeddedTextIndex(options: EmbeddedTextIndexOptions): TextIndex {
  const shelf = createBookShelf({ dir: options.dir, extension: TEXT_FILE_EXTENSION, decode, maxOpenBooks: options.maxOpenBooks });

  return {
    adapter: "embedded",

    async upsert(bookId, chunks) {
      if (chunks.length === 0) return;
      for (const { chunkIndex } of chunks) {
        if (!Number.isInteger(chunkIndex) || chunkIndex < 0) throw new RangeError(`chunk index must be a whole number, got ${chunkIndex}`);
      }
      await shelf.exclusive(bookId, async (existing, path) => {
        const index = existing ?? new MiniSearch<TextDocument>(MINISEARCH_OPTIONS);
        for (const { chunkIndex, text } of chunks) {
          const id = `${bookId}:${chunkIndex}`;
          if (index.has(id)) index.discard(id);
          index.add({ id, chunkIndex, text });
        }
        if (index.dirtCount > 0) await index.vacuum({ batchSize: Number.MAX_SAFE_INTEGER, batchWait: 0 });
        await writeFileAtomic(path, [encode(index)]);
        return { state: index, result: undefined };
      });
    },

    async search(bookId, query, searchOptions: SearchOptions = {}): Promise<ChunkHit[]> {
      const index = await shelf.get(bookId);
      const limit = Math.floor(searchOptions.limit ?? DEFAULT_SEARCH_LIMIT);
      if (index === undefined || limit <= 0) return [];
      const { maxChunkIndex } = searchOptions;
      const results = index.search(query, maxChunkIndex === undefined ? {} : { filter: (r) => (r.chunkIndex as number) <= maxChunkIndex });
      return results.slice(0, limit).map((r) => ({ ...storedChunk(r), score: r.score }));
    },

    async count(bookId) {
      return (await shelf.get(bookId))?.documentCount ?? 0;
    },

    deleteBook: (bookId) => shelf.remove(bookId),

    close: () => shelf.close(),
  };
}
