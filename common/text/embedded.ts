import MiniSearch, { type AsPlainObject, type Options, type SearchResult } from "minisearch";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { appendFrame, createBookShelf, readFileIfExists, readLog, writeFileAtomic } from "../embedded-store.ts";
import { silentLogger, type Logger } from "../log.ts";
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
 * Two files per book (see embedded-store.ts for the crash-safety of each):
 * - `{bookId}.bm25.log`: one frame per upsert batch (UTF-8 JSON `[[chunk_index, text], …]`),
 *   appended and fsynced before the upsert resolves. This is what makes a batch durable.
 * - `{bookId}.bm25.json`: `{format, tokenizer, index}` with MiniSearch's own JSON, written
 *   atomically once a book has been quiet for `snapshotDelayMs` (and on close), after which the log
 *   is removed. Loading a snapshot is about twice as fast as re-indexing the texts, and writing it
 *   once instead of after every batch keeps indexing linear in the book's size.
 * Loading = snapshot, then the log replayed on top (replaying a batch twice changes nothing). A
 * snapshot written by another tokenizer version is re-indexed from its stored texts.
 */

export const SNAPSHOT_EXTENSION = ".bm25.json";
export const LOG_EXTENSION = ".bm25.log";
export const DEFAULT_SNAPSHOT_DELAY_MS = 2_000;
const FILE_FORMAT = 1;

export interface EmbeddedTextIndexOptions {
  /** Folder holding the books' files; created on first write. */
  dir: string;
  /** Books kept in memory at once; the least recently used idle one is dropped beyond this. */
  maxOpenBooks?: number;
  /** Quiet time after the last upsert of a book before its snapshot is written. */
  snapshotDelayMs?: number;
  logger?: Logger;
}

interface TextDocument {
  id: string;
  chunkIndex: number;
  text: string;
}

interface TextSnapshot {
  format: number;
  tokenizer: number;
  index: AsPlainObject;
}

interface BookText {
  index: MiniSearch<TextDocument>;
  /** Documents in the log, i.e. written since the snapshot. */
  loggedDocuments: number;
}

type LoggedChunk = [chunkIndex: number, text: string];

const MINISEARCH_OPTIONS: Options<TextDocument> = {
  idField: "id",
  fields: ["text"],
  storeFields: ["text", "chunkIndex"],
  tokenize,
  // tokenize already returns final terms.
  processTerm: (term) => term,
  // Vacuuming happens before a snapshot, so the snapshot never carries discarded documents.
  autoVacuum: false,
  searchOptions: { prefix: false, fuzzy: false, combineWith: "OR" },
};

function storedChunk(result: SearchResult): IndexedChunk {
  return { chunkIndex: result.chunkIndex as number, text: result.text as string };
}

function addChunks(index: MiniSearch<TextDocument>, bookId: string, chunks: Iterable<IndexedChunk>): void {
  for (const { chunkIndex, text } of chunks) {
    const id = `${bookId}:${chunkIndex}`;
    if (index.has(id)) index.discard(id);
    index.add({ id, chunkIndex, text });
  }
}

function decodeSnapshot(bytes: Buffer, bookId: string): MiniSearch<TextDocument> {
  const snapshot = JSON.parse(bytes.toString("utf8")) as TextSnapshot;
  if (snapshot.format !== FILE_FORMAT) throw new Error(`text index of book ${bookId} has unknown format ${String(snapshot.format)}`);
  const index = MiniSearch.loadJS<TextDocument>(snapshot.index, MINISEARCH_OPTIONS);
  if (snapshot.tokenizer === TOKENIZER_VERSION) return index;
  const rebuilt = new MiniSearch<TextDocument>(MINISEARCH_OPTIONS);
  addChunks(rebuilt, bookId, index.search(MiniSearch.wildcard).map(storedChunk));
  return rebuilt;
}

function encodeSnapshot(index: MiniSearch<TextDocument>): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ format: FILE_FORMAT, tokenizer: TOKENIZER_VERSION, index }));
}

export function createEmbeddedTextIndex(options: EmbeddedTextIndexOptions): TextIndex {
  const logger = options.logger ?? silentLogger;
  const snapshotDelayMs = options.snapshotDelayMs ?? DEFAULT_SNAPSHOT_DELAY_MS;
  const snapshotPath = (bookId: string) => join(options.dir, bookId + SNAPSHOT_EXTENSION);
  const logPath = (bookId: string) => join(options.dir, bookId + LOG_EXTENSION);
  const timers = new Map<string, ReturnType<typeof setTimeout>>();

  const shelf = createBookShelf<BookText>({
    dir: options.dir,
    maxOpenBooks: options.maxOpenBooks,
    async load(bookId) {
      const [snapshot, log] = await Promise.all([readFileIfExists(snapshotPath(bookId)), readLog(logPath(bookId))]);
      if (snapshot === undefined && log === undefined) return undefined;
      const index = snapshot === undefined ? new MiniSearch<TextDocument>(MINISEARCH_OPTIONS) : decodeSnapshot(snapshot, bookId);
      if (log === undefined) return { index, loggedDocuments: 0 };
      if (log.droppedBytes > 0) logger.warn("text index: dropped a torn or corrupt tail", { book_id: bookId, bytes: log.droppedBytes });
      let loggedDocuments = 0;
      for (const payload of log.payloads) {
        const chunks = JSON.parse(new TextDecoder().decode(payload)) as LoggedChunk[];
        addChunks(index, bookId, chunks.map(([chunkIndex, text]) => ({ chunkIndex, text })));
        loggedDocuments += chunks.length;
      }
      if (loggedDocuments > 0) scheduleSnapshot(bookId);
      return { index, loggedDocuments };
    },
  });

  function snapshot(bookId: string): Promise<void> {
    clearTimeout(timers.get(bookId));
    timers.delete(bookId);
    return shelf.exclusive(bookId, async (book) => {
      if (book === undefined || book.loggedDocuments === 0) return { state: book, result: undefined };
      if (book.index.dirtCount > 0) await book.index.vacuum({ batchSize: Number.MAX_SAFE_INTEGER, batchWait: 0 });
      await writeFileAtomic(snapshotPath(bookId), [encodeSnapshot(book.index)]);
      // A crash before this line only means the log is replayed over a snapshot that already holds it.
      await rm(logPath(bookId), { force: true });
      book.loggedDocuments = 0;
      return { state: book, result: undefined };
    });
  }

  function scheduleSnapshot(bookId: string): void {
    clearTimeout(timers.get(bookId));
    const timer = setTimeout(() => {
      snapshot(bookId).catch((err: unknown) => logger.warn("text index: snapshot failed, the log still holds every batch", { book_id: bookId, err }));
    }, snapshotDelayMs);
    // A pending snapshot must not keep a finished process alive: the log already made the data durable.
    timer.unref();
    timers.set(bookId, timer);
  }

  return {
    adapter: "embedded",

    async upsert(bookId, chunks) {
      if (chunks.length === 0) return;
      for (const { chunkIndex } of chunks) {
        if (!Number.isInteger(chunkIndex) || chunkIndex < 0) throw new RangeError(`chunk index must be a whole number, got ${chunkIndex}`);
      }
      await shelf.exclusive(bookId, async (existing) => {
        const book = existing ?? { index: new MiniSearch<TextDocument>(MINISEARCH_OPTIONS), loggedDocuments: 0 };
        addChunks(book.index, bookId, chunks);
        const logged: LoggedChunk[] = chunks.map(({ chunkIndex, text }) => [chunkIndex, text]);
        await appendFrame(logPath(bookId), [new TextEncoder().encode(JSON.stringify(logged))]);
        book.loggedDocuments += chunks.length;
        return { state: book, result: undefined };
      });
      scheduleSnapshot(bookId);
    },

    async search(bookId, query, searchOptions: SearchOptions = {}): Promise<ChunkHit[]> {
      const book = await shelf.get(bookId);
      const limit = Math.floor(searchOptions.limit ?? DEFAULT_SEARCH_LIMIT);
      if (book === undefined || limit <= 0) return [];
      const { maxChunkIndex } = searchOptions;
      const results = book.index.search(query, maxChunkIndex === undefined ? {} : { filter: (r) => (r.chunkIndex as number) <= maxChunkIndex });
      return results.slice(0, limit).map((r) => ({ ...storedChunk(r), score: r.score }));
    },

    async count(bookId) {
      return (await shelf.get(bookId))?.index.documentCount ?? 0;
    },

    async deleteBook(bookId) {
      clearTimeout(timers.get(bookId));
      timers.delete(bookId);
      await shelf.remove(bookId, async () => {
        await Promise.all([rm(snapshotPath(bookId), { force: true }), rm(logPath(bookId), { force: true })]);
      });
    },

    async close() {
      await Promise.all([...timers.keys()].map(snapshot));
      await shelf.close();
    },
  };
}
