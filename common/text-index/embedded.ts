import MiniSearch, { type AsPlainObject, type Options, type SearchResult } from "minisearch";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { appendFrame, createBookShelf, readFileIfExists, readLog, yieldToLoop } from "../embedded-store.ts";
import { silentLogger, type Logger } from "../log.ts";
import { DEFAULT_SEARCH_LIMIT, type ChunkHit, type IndexedChunk, type SearchOptions } from "../contract/search.ts";
import { chunkIndexesToGet, type TextIndex } from "./index.ts";
import { TOKENIZER_VERSION, tokenize } from "./tokenize.ts";

/**
 * Embedded BM25 index: one MiniSearch index per book (MiniSearch scores with BM25+, k 1.2, b 0.7).
 *
 * Queries match whole terms only (no prefix, no typo tolerance): queries come from the query
 * rewriter as keywords, exact terms keep precision high and search cheap, and tokenize.ts already
 * folds case, accents, Urdu spelling variants and plurals. Terms are OR-ed, so a chunk matching
 * more of them ranks higher.
 *
 * A book is the log `{bookId}.bm25.log`: one frame per upsert batch (UTF-8 JSON
 * `[[chunk_index, text], …]`, see embedded-store.ts), appended and fsynced before the upsert
 * resolves. Writing never builds the index: an ingestion's memory is one batch, not the book's index
 * (about 12 bytes per character of text: 560 MiB for a 48 MB book). A search loads the book by
 * indexing the log's batches in order (a later chunk replaces an earlier one), letting the event loop
 * run after every LOAD_SLICE_CHUNKS chunks, so a large book loads while other requests are served.
 *
 * `{bookId}.bm25.json`, a whole-index snapshot that earlier versions wrote (and removed the log
 * after), is still read first; one written by another tokenizer version is re-indexed from its
 * stored texts.
 */

const LEGACY_SNAPSHOT_EXTENSION = ".bm25.json";
export const LOG_EXTENSION = ".bm25.log";
const LEGACY_FILE_FORMAT = 1;
/**
 * Chunks indexed between two turns of the event loop while a book loads (about 9 KB of text, a few
 * milliseconds): indexing costs about 0.5 µs per character (25 s for a 51 MB book), and a chat turn
 * waits behind every slice at each of its steps, so a batch of 64 chunks at a time made every turn
 * on the API take seconds while a large book loaded.
 */
export const LOAD_SLICE_CHUNKS = 4;
/** Memory of a loaded book per character of its text, measured on a 48 MB book (23,790 chunks). */
const BYTES_PER_TEXT_CHAR = 12;

export interface EmbeddedTextIndexOptions {
  /** Folder holding the books' files; created on first write. */
  dir: string;
  /** Estimated memory of the books kept loaded; the least recently used idle ones are dropped beyond it. */
  maxCachedBytes?: number;
  /** How long a search waits for its book to load (DEFAULT_MAX_LOAD_WAIT_MS). */
  maxLoadWaitMs?: number;
  logger?: Logger;
}

interface TextDocument {
  id: string;
  chunkIndex: number;
  text: string;
}

interface LegacySnapshot {
  format: number;
  tokenizer: number;
  index: AsPlainObject;
}

interface BookText {
  index: MiniSearch<TextDocument>;
  /** Characters of text indexed, for the memory estimate. */
  textChars: number;
}

type LoggedChunk = [chunkIndex: number, text: string];

const MINISEARCH_OPTIONS: Options<TextDocument> = {
  idField: "id",
  fields: ["text"],
  storeFields: ["text", "chunkIndex"],
  tokenize,
  // tokenize already returns final terms.
  processTerm: (term) => term,
  searchOptions: { prefix: false, fuzzy: false, combineWith: "OR" },
};

function storedChunk(result: SearchResult): IndexedChunk {
  return { chunkIndex: result.chunkIndex as number, text: result.text as string };
}

/** Returns the characters of text added. */
function addChunks(index: MiniSearch<TextDocument>, bookId: string, chunks: Iterable<IndexedChunk>): number {
  let chars = 0;
  for (const { chunkIndex, text } of chunks) {
    const id = `${bookId}:${chunkIndex}`;
    if (index.has(id)) index.discard(id);
    index.add({ id, chunkIndex, text });
    chars += text.length;
  }
  return chars;
}

const parseJson = (bytes: Uint8Array): unknown => JSON.parse(new TextDecoder().decode(bytes));

function decodeLegacySnapshot(bytes: Buffer, bookId: string): BookText {
  const snapshot = parseJson(bytes) as LegacySnapshot;
  if (snapshot.format !== LEGACY_FILE_FORMAT) throw new Error(`text index of book ${bookId} has unknown format ${String(snapshot.format)}`);
  const index = MiniSearch.loadJS<TextDocument>(snapshot.index, MINISEARCH_OPTIONS);
  const chunks = index.search(MiniSearch.wildcard).map(storedChunk);
  const textChars = chunks.reduce((n, c) => n + c.text.length, 0);
  if (snapshot.tokenizer === TOKENIZER_VERSION) return { index, textChars };
  const rebuilt = new MiniSearch<TextDocument>(MINISEARCH_OPTIONS);
  addChunks(rebuilt, bookId, chunks);
  return { index: rebuilt, textChars };
}

export function createEmbeddedTextIndex(options: EmbeddedTextIndexOptions): TextIndex {
  const logger = options.logger ?? silentLogger;
  const snapshotPath = (bookId: string) => join(options.dir, bookId + LEGACY_SNAPSHOT_EXTENSION);
  const logPath = (bookId: string) => join(options.dir, bookId + LOG_EXTENSION);

  // Two shelves on one folder, as in the vector index: searches load indexes, writes only append.
  const loaded = createBookShelf<BookText>({
    dir: options.dir,
    ...(options.maxCachedBytes === undefined ? {} : { maxCachedBytes: options.maxCachedBytes }),
    ...(options.maxLoadWaitMs === undefined ? {} : { maxLoadWaitMs: options.maxLoadWaitMs }),
    onSlowLoad: (bookId) => logger.warn("text index: the book is still loading; searching without it meanwhile", { book_id: bookId }),
    sizeOf: (book) => BYTES_PER_TEXT_CHAR * book.textChars,
    async load(bookId) {
      const [snapshot, log] = await Promise.all([readFileIfExists(snapshotPath(bookId)), readLog(logPath(bookId), false)]);
      if (snapshot === undefined && log === undefined) return undefined;
      const book = snapshot === undefined ? { index: new MiniSearch<TextDocument>(MINISEARCH_OPTIONS), textChars: 0 } : decodeLegacySnapshot(snapshot, bookId);
      if (log === undefined) return book;
      if (log.droppedBytes > 0) logger.warn("text index: dropped a torn or corrupt tail", { book_id: bookId, bytes: log.droppedBytes });
      for (const payload of log.payloads) {
        const chunks = parseJson(payload) as LoggedChunk[];
        for (let i = 0; i < chunks.length; i += LOAD_SLICE_CHUNKS) {
          book.textChars += addChunks(book.index, bookId, chunks.slice(i, i + LOAD_SLICE_CHUNKS).map(([chunkIndex, text]) => ({ chunkIndex, text })));
          await yieldToLoop();
        }
      }
      return book;
    },
  });
  /** A writer only needs the log repaired (see readLog) before its first append. */
  const writers = createBookShelf<true>({
    dir: options.dir,
    sizeOf: () => 0,
    load: async (bookId) => {
      await readLog(logPath(bookId), true);
      return true;
    },
  });

  return {
    adapter: "embedded",

    async upsert(bookId, chunks) {
      if (chunks.length === 0) return;
      for (const { chunkIndex } of chunks) {
        if (!Number.isInteger(chunkIndex) || chunkIndex < 0) throw new RangeError(`chunk index must be a whole number, got ${chunkIndex}`);
      }
      await writers.exclusive(bookId, async () => {
        const logged: LoggedChunk[] = chunks.map(({ chunkIndex, text }) => [chunkIndex, text]);
        await appendFrame(logPath(bookId), [new TextEncoder().encode(JSON.stringify(logged))]);
        return { state: true, result: undefined };
      });
    },

    async search(bookId, query, searchOptions: SearchOptions = {}): Promise<ChunkHit[]> {
      const book = await loaded.get(bookId, false, searchOptions.onLoading);
      const limit = Math.floor(searchOptions.limit ?? DEFAULT_SEARCH_LIMIT);
      if (book === undefined || limit <= 0) return [];
      const { maxChunkIndex } = searchOptions;
      const results = book.index.search(query, maxChunkIndex === undefined ? {} : { filter: (r) => (r.chunkIndex as number) <= maxChunkIndex });
      return results.slice(0, limit).map((r) => ({ ...storedChunk(r), score: r.score }));
    },

    async get(bookId, chunkIndexes) {
      const wanted = chunkIndexesToGet(chunkIndexes);
      const book = wanted.length === 0 ? undefined : await loaded.get(bookId, true);
      if (book === undefined) return [];
      return wanted.flatMap((chunkIndex) => {
        const stored = book.index.getStoredFields(`${bookId}:${chunkIndex}`);
        return stored === undefined ? [] : [{ chunkIndex, text: stored.text as string }];
      });
    },

    async count(bookId) {
      return (await loaded.get(bookId, true))?.index.documentCount ?? 0;
    },

    async deleteBook(bookId) {
      await writers.remove(bookId, async () => {
        await Promise.all([rm(snapshotPath(bookId), { force: true }), rm(logPath(bookId), { force: true })]);
      });
    },

    async close() {
      await Promise.all([loaded.close(), writers.close()]);
    },
  };
}
