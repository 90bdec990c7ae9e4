import { statSync } from "node:fs";
import { mkdir, open, readFile, rename, rm, truncate, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

/**
 * What the embedded vector and BM25 indexes share: files per book under a folder, loaded lazily,
 * every write to a book serialised, idle books evicted from memory, and two crash-safe ways to write.
 *
 * - An append-only log of checksummed frames, one frame per upsert batch, fsynced before the upsert
 *   resolves: a batch costs its own size, not the book's, and a crash mid-append leaves a torn last
 *   frame that loads skip and the next writer cuts off (so a batch is stored whole or not at all).
 * - Whole-file replacement (temp file, fsync, rename, fsync the folder) for compaction:
 *   a crash leaves the old file or the new one, never a mix.
 *
 * Several processes may share the folder (the API reads what a separate ingest worker writes). Every
 * write to a book replaces its stamp file `{bookId}.stamp` with a new random token, after the data;
 * a reader reads the stamp before the data, remembers it with what it loaded, and checks the stamp
 * before serving the book from memory: a different token means another process wrote the book since,
 * so it is loaded again. The check is a stat: a new stamp is always a new file renamed over the old
 * one, so while the file's identity (inode, size, change times) is the one last seen its token is
 * too, and the file is read only when that identity changed (reading it on every search cost more
 * than the search's own BM25 scoring).
 */

const STAMP_EXTENSION = ".stamp";

/**
 * Memory the books kept loaded by one index may take, by the index's own estimate. The book being
 * used stays loaded even when it alone is larger, so a search never loads a book it just evicted.
 */
export const DEFAULT_MAX_CACHED_BYTES = 256 * 2 ** 20;

/**
 * How long a search waits for its book to load before it answers without the book; the load goes on,
 * and the book serves the searches after it. A very large book takes seconds to load (tens on a busy
 * machine), which would otherwise be the first chat's wait and could outlast its first-token bound.
 */
export const DEFAULT_MAX_LOAD_WAIT_MS = 5_000;

/**
 * Lets the event loop run other work (requests, timers, I/O) in the middle of a long load. Counted
 * in units of work, not time, so a load takes the same steps on any machine.
 */
export function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Book ids are uuids in practice; anything that could climb out of the folder is refused. */
const SAFE_BOOK_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export class InvalidBookIdError extends Error {
  constructor(readonly bookId: string) {
    super(`invalid book id ${JSON.stringify(bookId.slice(0, 80))}: expected letters, digits, '-' or '_'`);
    this.name = "InvalidBookIdError";
  }
}

function assertSafeBookId(bookId: string): void {
  if (!SAFE_BOOK_ID.test(bookId)) throw new InvalidBookIdError(bookId);
}

function isMissing(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === "ENOENT";
}

function bytesOf(part: ArrayBufferView): Uint8Array {
  return new Uint8Array(part.buffer, part.byteOffset, part.byteLength);
}

async function fsyncFolder(path: string): Promise<void> {
  const folder = await open(dirname(path), "r");
  try {
    await folder.sync();
  } finally {
    await folder.close();
  }
}

async function writeParts(path: string, flags: "w" | "a", parts: readonly ArrayBufferView[]): Promise<void> {
  const file = await open(path, flags);
  try {
    const isNew = (await file.stat()).size === 0;
    for (const part of parts) {
      const bytes = bytesOf(part);
      // A write may be short; keep going until the whole part is on disk.
      for (let done = 0; done < bytes.byteLength; ) {
        const { bytesWritten } = await file.write(bytes, done, bytes.byteLength - done);
        done += bytesWritten;
      }
    }
    await file.sync();
    // A new file's directory entry must reach the disk too, or a power cut can lose the whole file.
    if (isNew && flags === "a") await fsyncFolder(path);
  } finally {
    await file.close();
  }
}

/** Replaces `path` with `parts` atomically (see the module comment). */
export async function writeFileAtomic(path: string, parts: readonly ArrayBufferView[]): Promise<void> {
  const tmp = `${path}.${process.pid}.${crypto.randomUUID()}.tmp`;
  try {
    await writeParts(tmp, "w", parts);
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await fsyncFolder(path);
}

/** Reads a whole file, or undefined when it does not exist. */
export async function readFileIfExists(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
}

// Frame: u32 magic · u32 payload length · u32 CRC-32 of payload · payload · zero padding to 4 bytes.
// The padding keeps every payload 4-byte aligned in the file, so readers can view it as 32-bit arrays.
const FRAME_MAGIC = 0x3146_4b42; // "BKF1" as little-endian bytes
const FRAME_HEADER_BYTES = 12;

/** The parts of one log frame holding `payload`, for appendFrame or writeFileAtomic. */
export function frame(payload: readonly ArrayBufferView[]): ArrayBufferView[] {
  const length = payload.reduce((sum, part) => sum + part.byteLength, 0);
  let crc = 0;
  for (const part of payload) crc = Bun.hash.crc32(bytesOf(part), crc);
  const header = new DataView(new ArrayBuffer(FRAME_HEADER_BYTES));
  header.setUint32(0, FRAME_MAGIC, true);
  header.setUint32(4, length, true);
  header.setUint32(8, crc, true);
  return [header, ...payload, new Uint8Array((4 - (length % 4)) % 4)];
}

/** Appends one frame and fsyncs: when this resolves the batch survives a crash. */
export async function appendFrame(path: string, payload: readonly ArrayBufferView[]): Promise<void> {
  await writeParts(path, "a", frame(payload));
}

export interface LogContents {
  /** Payloads of the whole frames, in order, each a 4-byte-aligned view. */
  payloads: Uint8Array[];
  /** Bytes of a torn or corrupt tail that were cut off (0 normally). */
  droppedBytes: number;
}

/**
 * Reads a log, or undefined when there is none. A torn or corrupt frame ends the log. With `repair`
 * (a writer, inside BookShelf.exclusive) it and anything after it are cut off the file, so later
 * appends follow the last good frame. A reader never cuts: another process may be appending the
 * frame it sees half-written.
 */
export async function readLog(path: string, repair: boolean): Promise<LogContents | undefined> {
  const file = await readFileIfExists(path);
  if (file === undefined) return undefined;
  const { payloads, end } = decodeFrames(file);
  // Cuts a torn tail, or restores the missing padding after a last frame whose payload is whole.
  if (repair && end !== file.byteLength) await truncate(path, end);
  return { payloads, droppedBytes: Math.max(0, file.byteLength - end) };
}

/** The payloads of the whole frames at the start of `file`, and where they end. */
export function decodeFrames(file: Uint8Array): { payloads: Uint8Array[]; end: number } {
  // A fresh, 0-aligned copy when the read buffer is a slice of a pool.
  const bytes = file.byteOffset % 4 === 0 ? file : new Uint8Array(file);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const payloads: Uint8Array[] = [];
  let at = 0;
  while (at + FRAME_HEADER_BYTES <= bytes.byteLength) {
    if (view.getUint32(at, true) !== FRAME_MAGIC) break;
    const length = view.getUint32(at + 4, true);
    const start = at + FRAME_HEADER_BYTES;
    if (start + length > bytes.byteLength) break;
    const payload = bytes.subarray(start, start + length);
    if (Bun.hash.crc32(payload) !== view.getUint32(at + 8, true)) break;
    payloads.push(payload);
    at = start + length + ((4 - (length % 4)) % 4);
  }
  return { payloads, end: at };
}

export interface BookShelfOptions<T> {
  /** Folder holding the books' files; created before the first write. */
  dir: string;
  /**
   * Builds a book's state from its files; undefined when the book has none. `forWrite` when the
   * state is loaded to be written to (see readLog's `repair`).
   */
  load(bookId: string, forWrite: boolean): Promise<T | undefined>;
  /** Estimated bytes of memory a loaded book takes. */
  sizeOf(state: T): number;
  /** DEFAULT_MAX_CACHED_BYTES when unset. */
  maxCachedBytes?: number;
  /** DEFAULT_MAX_LOAD_WAIT_MS when unset. */
  maxLoadWaitMs?: number;
  /** `get` stopped waiting for the book's load, which goes on. */
  onSlowLoad?: (bookId: string) => void;
}

export interface BookShelf<T> {
  /**
   * The book's state, loading it on first use; undefined when the book has none, or, unless
   * `waitForLoad`, when its load takes longer than maxLoadWaitMs (the load goes on, and a later call
   * gets the book).
   */
  get(bookId: string, waitForLoad?: boolean, onSlowLoad?: () => void): Promise<T | undefined>;
  /**
   * Runs `fn` with the book's current state while nothing else runs for the same book, so two
   * batches for one book never interleave. `fn` returns the state to keep in memory (undefined to
   * drop it); then the book gets a new stamp, which tells other processes it changed. If `fn` throws,
   * memory is dropped so the next use reloads what is on disk.
   */
  exclusive<R>(bookId: string, fn: (state: T | undefined) => Promise<{ state: T | undefined; result: R }>): Promise<R>;
  /** Drops the book from memory, then runs `removeFiles` and removes the stamp, without loading the book first. */
  remove(bookId: string, removeFiles: () => Promise<void>): Promise<void>;
  /** Lets pending work finish and forgets every loaded book. */
  close(): Promise<void>;
}

interface Loaded<T> {
  state: T;
  /** The book's stamp when `state` was read from disk or last written; undefined if it had none. */
  stamp: string | undefined;
  /** The identity of the stamp file `stamp` was last read from (stampFileIdentity); undefined when not known. */
  stampFile: string | undefined;
  /** sizeOf(state) when it was remembered. */
  bytes: number;
  /** Loaded by a writer, so its files were repaired (see readLog). */
  writable: boolean;
}

export function createBookShelf<T>(options: BookShelfOptions<T>): BookShelf<T> {
  const maxBytes = options.maxCachedBytes ?? DEFAULT_MAX_CACHED_BYTES;
  // Insertion order doubles as recency order: a hit is re-inserted at the end.
  const open = new Map<string, Loaded<T>>();
  let cachedBytes = 0;
  const queues = new Map<string, Promise<unknown>>();
  /**
   * Books whose load has already outlasted a search's wait: later searches do not wait again while it
   * goes on (each would otherwise spend maxLoadWaitMs, and every turn on a large book take as long).
   */
  const slowLoads = new Set<string>();
  let dirReady: Promise<unknown> | undefined;
  const stampPath = (bookId: string) => join(options.dir, bookId + STAMP_EXTENSION);

  async function readStamp(bookId: string): Promise<string | undefined> {
    return (await readFileIfExists(stampPath(bookId)))?.toString("utf8");
  }

  /** Which file holds the stamp now, "" when there is none; taken before the stamp is read, so it is never newer than the token. */
  function stampFileIdentity(bookId: string): string {
    // Synchronous: a stat costs a few microseconds, its promise ten times that.
    const stats = statSync(stampPath(bookId), { throwIfNoEntry: false });
    return stats === undefined ? "" : `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeMs}:${stats.ctimeMs}`;
  }

  /** Not fsynced: the stamp only tells readers to reload; the data's own writes make it durable. */
  async function writeStamp(bookId: string): Promise<string> {
    const stamp = crypto.randomUUID();
    const tmp = `${stampPath(bookId)}.${process.pid}.${stamp}.tmp`;
    await writeFile(tmp, stamp);
    await rename(tmp, stampPath(bookId));
    return stamp;
  }

  function forget(bookId: string): void {
    cachedBytes -= open.get(bookId)?.bytes ?? 0;
    open.delete(bookId);
  }

  function remember(bookId: string, state: T | undefined, stamp: string | undefined, writable: boolean, stampFile?: string): void {
    forget(bookId);
    if (state === undefined) return;
    const bytes = options.sizeOf(state);
    open.set(bookId, { state, stamp, stampFile, bytes, writable });
    cachedBytes += bytes;
    for (const id of open.keys()) {
      if (cachedBytes <= maxBytes) break;
      // A book with queued work is about to be touched again; evicting it would only force a reload.
      if (id !== bookId && !queues.has(id)) forget(id);
    }
  }

  /** Runs `task` after every earlier task for the same book has settled. */
  async function serialise<R>(bookId: string, task: () => Promise<R>): Promise<R> {
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

  /**
   * Loading inside the queue means a load never races a write or a delete of the same book in this
   * process. The stamp is read before the files, so what is remembered is never newer than its stamp.
   */
  async function current(bookId: string, forWrite: boolean): Promise<T | undefined> {
    const stampFile = stampFileIdentity(bookId);
    const stamp = await readStamp(bookId);
    const cached = open.get(bookId);
    if (cached !== undefined && cached.stamp === stamp && (cached.writable || !forWrite)) return cached.state;
    // The stale copy goes first, so the old and the new copy are never both held.
    forget(bookId);
    const state = await options.load(bookId, forWrite);
    remember(bookId, state, stamp, forWrite, stampFile);
    return state;
  }

  return {
    async get(bookId, waitForLoad = false, onSlowLoad) {
      assertSafeBookId(bookId);
      const cached = open.get(bookId);
      if (cached !== undefined) {
        const stampFile = stampFileIdentity(bookId);
        if (stampFile === cached.stampFile || cached.stamp === (await readStamp(bookId))) {
          remember(bookId, cached.state, cached.stamp, cached.writable, stampFile);
          return cached.state;
        }
      }
      const slow = () => {
        options.onSlowLoad?.(bookId);
        onSlowLoad?.();
        return undefined;
      };
      if (!waitForLoad && slowLoads.has(bookId)) return slow();
      const loading = serialise(bookId, () => current(bookId, false));
      if (waitForLoad) return loading;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const waited = new Promise<"slow">((resolve) => {
        timer = setTimeout(() => resolve("slow"), options.maxLoadWaitMs ?? DEFAULT_MAX_LOAD_WAIT_MS);
      });
      try {
        const outcome = await Promise.race([loading, waited]);
        if (outcome !== "slow") return outcome;
        // A load that fails after we stopped waiting is retried, and its error seen, by the next call.
        slowLoads.add(bookId);
        void loading.then(
          () => slowLoads.delete(bookId),
          () => slowLoads.delete(bookId),
        );
        return slow();
      } finally {
        clearTimeout(timer);
      }
    },

    exclusive: (bookId, fn) =>
      serialise(bookId, async () => {
        dirReady ??= mkdir(options.dir, { recursive: true }).catch((err: unknown) => {
          dirReady = undefined;
          throw err;
        });
        await dirReady;
        try {
          const outcome = await fn(await current(bookId, true));
          remember(bookId, outcome.state, await writeStamp(bookId), true);
          return outcome.result;
        } catch (err) {
          forget(bookId);
          throw err;
        }
      }),

    // No load first: deleting must work for a book whose files no longer decode.
    remove: (bookId, removeFiles) =>
      serialise(bookId, async () => {
        forget(bookId);
        await removeFiles();
        await rm(stampPath(bookId), { force: true });
      }),

    async close() {
      await Promise.all(queues.values());
      open.clear();
      cachedBytes = 0;
    },
  };
}
