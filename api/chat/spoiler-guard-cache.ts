import { z } from "zod";
import { DEFAULT_SPOILER_GUARD_CACHE_MB } from "../../common/config-defaults.ts";
import type { Database } from "../../common/db/index.ts";
import { getSpoilerGuard } from "../../common/db/spoiler-guards.ts";
import type { Logger } from "../../common/log.ts";
import { decodeShingleIndex, MAX_STORED_CHARS, type ShingleIndex } from "../../common/spoiler-guard/shingles.ts";
import { GuardCharacter } from "../../common/spoiler-guard/people.ts";
import { createSpoilerGuard, lateNames, type SpoilerGuard } from "./spoiler-filter.ts";

/**
 * The spoiler guard of a turn (api/chat/spoiler-filter.ts), from the book's row in
 * book_spoiler_guards, kept in memory per book: the shingle index is read on the hot path for every
 * word of every reply, so it is loaded once (8 bytes per shingle of the book, at most 8 MiB whatever
 * its size: 1 MB for Pride and Prejudice, 4.6 MB for War and Peace) and kept, least recently used out
 * first, within a byte bound. An entry is read again after its time to live, so a book ingested again
 * is guarded by its new row within that time. A stored index beyond the bound (written before there
 * was one) is not read: the book's replies are checked for names only, and the log says to ingest it again.
 */

export const DEFAULT_SPOILER_GUARD_TTL_MS = 10 * 60_000;

interface BookGuard {
  characters: GuardCharacter[];
  shingles: ShingleIndex | undefined;
}

interface Entry {
  guard: Promise<BookGuard | null>;
  loadedAt: number;
  bytes: number;
}

export interface SpoilerGuardsOptions {
  db: Database;
  log: Logger;
  /** MiB the books' guards may take in this process (SPOILER_GUARD_CACHE_MB). */
  cacheMb?: number;
  /** The longest stored shingle index read (MAX_STORED_CHARS: the bound of common/spoiler-guard/shingles.ts). */
  maxStoredChars?: number;
  ttlMs?: number;
  now?: () => number;
}

export function createSpoilerGuards(options: SpoilerGuardsOptions) {
  const { db, log } = options;
  const maxBytes = (options.cacheMb ?? DEFAULT_SPOILER_GUARD_CACHE_MB) * 2 ** 20;
  const ttlMs = options.ttlMs ?? DEFAULT_SPOILER_GUARD_TTL_MS;
  const maxStoredChars = options.maxStoredChars ?? MAX_STORED_CHARS;
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  /** Books already reported as having no guard data: said once per process, not on every turn. */
  const reported = new Set<string>();

  function evict() {
    let total = [...entries.values()].reduce((n, e) => n + e.bytes, 0);
    for (const [bookId, entry] of entries) {
      if (total <= maxBytes || entries.size === 1) break;
      entries.delete(bookId);
      total -= entry.bytes;
    }
  }

  async function load(bookId: string, entry: Entry): Promise<BookGuard | null> {
    const row = await getSpoilerGuard(db, bookId, maxStoredChars);
    if (!row) {
      if (!reported.has(bookId)) {
        reported.add(bookId);
        log.warn("book has no spoiler-guard data; its replies are not checked for late names or passages until it is ingested again", { book_id: bookId });
      }
      return null;
    }
    const characters = z.array(GuardCharacter).safeParse(row.characters);
    let shingles: ShingleIndex | undefined;
    try {
      if (!characters.success) throw characters.error;
      if (row.shingles !== null) shingles = decodeShingleIndex(row.shingles);
    } catch (error) {
      log.error("book's spoiler-guard data cannot be read; its replies are not checked", { book_id: bookId, error });
      return null;
    }
    if (row.shingles === null) {
      log.error("book's spoiler-guard passages are beyond the bound and are not loaded; its replies are checked for late names only until it is ingested again", {
        book_id: bookId,
        stored_chars: row.shingles_chars,
        max_chars: maxStoredChars,
      });
    }
    entry.bytes = shingles?.bytes ?? 0;
    evict();
    return { characters: characters.data, shingles };
  }

  async function bookGuard(bookId: string): Promise<BookGuard | null> {
    const cached = entries.get(bookId);
    if (cached && now() - cached.loadedAt < ttlMs) {
      entries.delete(bookId);
      entries.set(bookId, cached);
      return cached.guard;
    }
    const entry: Entry = { guard: Promise.resolve(null), loadedAt: now(), bytes: 0 };
    entry.guard = load(bookId, entry);
    entries.set(bookId, entry);
    // A failed read is not kept: the next turn tries again.
    entry.guard.catch(() => entries.get(bookId) === entry && entries.delete(bookId));
    return entry.guard;
  }

  /**
   * The guard for a turn of a reader at `position` talking to `characterId`; null for the whole book
   * (nothing is late), or when the book has no guard data or it cannot be read (the reply goes out
   * unchecked, as before the guard: its passages are still cut at the position).
   */
  async function guardFor(bookId: string, characterId: string, position: number | null): Promise<SpoilerGuard | null> {
    if (position === null) return null;
    let book: BookGuard | null;
    try {
      book = await bookGuard(bookId);
    } catch (error) {
      log.warn("spoiler-guard data unavailable; the reply is not checked for late names or passages", { book_id: bookId, error });
      return null;
    }
    if (!book) return null;
    return createSpoilerGuard({ position, lateNames: lateNames(book.characters, position, characterId), ...(book.shingles ? { shingles: book.shingles } : {}) });
  }

  return { guardFor };
}
