import { mkdir, open, readFile, rename, rm } from "node:fs/promises";
import { dirname, join } from "node:path";

/**
 * What the embedded vector and BM25 indexes share: one file per book under a folder, loaded lazily,
 * written atomically, with every write to a book serialised and idle books evicted from memory.
 */

export const DEFAULT_MAX_OPEN_BOOKS = 64;

/** Book ids are uuids in practice; anything that could climb out of the folder is refused. */
const SAFE_BOOK_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export class InvalidBookIdError extends Error {
  constructor(readonly bookId: string) {
    super(`invalid book id ${JSON.stringify(bookId.slice(0, 80))}: expected letters, digits, '-' or '_'`);
    this.name = "InvalidBookIdError";
  }
}

export function assertSafeBookId(bookId: string): void {
  if (!SAFE_BOOK_ID.test(bookId)) throw new InvalidBookIdError(bookId);
}

/**
 * Replaces `path` with `parts` so that a crash leaves either the old file or the new one, never a
 * torn mix: write a sibling temp file, fsync it, rename over the target, fsync the folder so the
 * rename itself survives a power cut.
 */
export async function writeFileAtomic(path: string, parts: readonly ArrayBufferView[]): Promise<void> {
  const tmp = `${path}.${process.pid}.${crypto.randomUUID()}.tmp`;
  try {
    const file = await open(tmp, "w");
    try {
      for (const part of parts) {
        const bytes = new Uint8Array(part.buffer, part.byteOffset, part.byteLength);
        // A write may be short; keep going until the whole part is on disk.
        for (let done = 0; done < bytes.byteLength; ) {
          const { bytesWritten } = await file.write(bytes, done, bytes.byteLength - done);
          done += bytesWritten;
        }
      }
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  const folder = await open(dirname(path), "r");
  try {
    await folder.sync();
  } finally {
    await folder.close();
  }
}

export interface BookShelfOptions<T> {
  dir: string;
  /** File name suffix, e.g. ".vec". */
  extension: string;
  decode(bytes: Buffer, bookId: string): T;
  maxOpenBooks?: number;
}

export interface BookShelf<T> {
  /** The book's state, loading it from disk on first use; undefined when the book has none. */
  get(bookId: string): Promise<T | undefined>;
  /**
   * Runs `fn` with the book's current state while no other `exclusive` call for the same book runs,
   * so two batches for one book never interleave. `fn` returns the state to keep in memory (or
   * undefined to drop it); if it throws, memory is dropped too so the next use reloads what is on disk.
   */
  exclusive<R>(bookId: string, fn: (state: T | undefined, path: string) => Promise<{ state: T | undefined; result: R }>): Promise<R>;
  /** Removes the book's file and memory. */
  remove(bookId: string): Promise<void>;
  /** Lets pending writes finish and forgets every loaded book. */
  close(): Promise<void>;
}

function isMissing(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === "ENOENT";
}

export function createBookShelf<T>(options: BookShelfOptions<T>): BookShelf<T> {
  const maxOpen = options.maxOpenBooks ?? DEFAULT_MAX_OPEN_BOOKS;
  // Insertion order doubles as recency order: a hit is re-inserted at the end.
  const open = new Map<string, T>();
  const queues = new Map<string, Promise<unknown>>();
  let dirReady: Promise<unknown> | undefined;

  const pathOf = (bookId: string) => join(options.dir, bookId + options.extension);

  function remember(bookId: string, state: T | undefined): void {
    open.delete(bookId);
    if (state === undefined) return;
    open.set(bookId, state);
    for (const id of open.keys()) {
      if (open.size <= maxOpen) break;
      // A book with queued work is about to be touched again; evicting it would only force a reload.
      if (!queues.has(id)) open.delete(id);
    }
  }

  async function load(bookId: string): Promise<T | undefined> {
    const cached = open.get(bookId);
    if (cached !== undefined) return cached;
    let bytes: Buffer;
    try {
      bytes = await readFile(pathOf(bookId));
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    const state = options.decode(bytes, bookId);
    remember(bookId, state);
    return state;
  }

  /** Runs `task` after every earlier task for the same book has settled. */
  function serialise<R>(bookId: string, task: () => Promise<R>): Promise<R> {
    assertSafeBookId(bookId);
    const run = (queues.get(bookId) ?? Promise.resolve()).then(task);
    const settled = run.then(
      () => {},
      () => {},
    );
    queues.set(bookId, settled);
    void settled.then(() => {
      if (queues.get(bookId) === settled) queues.delete(bookId);
    });
    return run;
  }

  function exclusive<R>(bookId: string, fn: (state: T | undefined, path: string) => Promise<{ state: T | undefined; result: R }>): Promise<R> {
    return serialise(bookId, async () => {
      const state = await load(bookId);
      try {
        const outcome = await fn(state, pathOf(bookId));
        remember(bookId, outcome.state);
        return outcome.result;
      } catch (err) {
        open.delete(bookId);
        throw err;
      }
    });
  }

  return {
    async get(bookId) {
      assertSafeBookId(bookId);
      const cached = open.get(bookId);
      if (cached !== undefined) {
        open.delete(bookId);
        open.set(bookId, cached);
        return cached;
      }
      // Loading inside the queue means a load never races a write or a delete of the same book.
      return exclusive(bookId, async (state) => ({ state, result: state }));
    },
    exclusive: async (bookId, fn) =>
      exclusive(bookId, async (state, path) => {
        dirReady ??= mkdir(options.dir, { recursive: true }).catch((err: unknown) => {
          dirReady = undefined;
          throw err;
        });
        await dirReady;
        return fn(state, path);
      }),
    // No load first: deleting must work for a book whose file no longer decodes.
    remove: async (bookId) =>
      serialise(bookId, async () => {
        open.delete(bookId);
        await rm(pathOf(bookId), { force: true });
      }),
    async close() {
      await Promise.all(queues.values());
      open.clear();
    },
  };
}
