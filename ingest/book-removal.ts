import { rm } from "node:fs/promises";
import { bookCacheKey, characterCacheKey, knowledgeCacheKey, readingPositionsCacheKey, sessionCacheKey } from "../common/contract/cache-keys.ts";
import type { Config } from "../common/config.ts";
import type { Queryable } from "../common/db/index.ts";
import { deleteBookRow } from "../common/db/frontend-rows.ts";
import { isUuid } from "../common/db/row-lookup.ts";
import { listCharacters } from "../common/db/characters.ts";
import { listBookChatIds } from "../common/db/sessions.ts";
import type { KeyValueStore } from "../common/kv/index.ts";
import type { TextIndex } from "../common/text-index/index.ts";
import type { VectorIndex } from "../common/vector/index.ts";
import { bookBackupDir } from "./characters/backups.ts";

/**
 * What a book leaves outside its database rows: its chunks in both indexes and its persona backups.
 * The rows (characters, sessions, positions, our ingestion record) go with the books row, whose
 * foreign keys cascade.
 */

export interface RemovalDeps {
  config: Pick<Config, "systemPromptStoragePath">;
  vectorIndex: VectorIndex;
  textIndex: TextIndex;
}

/** Removes the book's indexes and backups, each independently; the reasons of those that failed. */
export async function removeIndexesAndBackups(deps: RemovalDeps, bookId: string): Promise<unknown[]> {
  const results = await Promise.allSettled([
    deps.vectorIndex.deleteBook(bookId),
    deps.textIndex.deleteBook(bookId),
    rm(bookBackupDir(deps.config.systemPromptStoragePath, bookId), { recursive: true, force: true }),
  ]);
  return results.filter((r): r is PromiseRejectedResult => r.status === "rejected").map((r) => r.reason);
}

export type BookMatch = {
  id: string;
  title: string;
  processing_status: string;
};

/** The books an id or a title (any case) names: none, one, or several of one title. */
export async function findBooks(db: Queryable, idOrTitle: string): Promise<BookMatch[]> {
  const wanted = idOrTitle.trim();
  if (isUuid(wanted)) return db.query<BookMatch>("SELECT id, title, processing_status::text AS processing_status FROM books WHERE id = $1", [wanted]);
  return db.query<BookMatch>(
    "SELECT id, title, processing_status::text AS processing_status FROM books WHERE lower(title) = lower($1) ORDER BY created_at DESC",
    [wanted],
  );
}

export interface RemovalReport {
  characters: number;
  /** What could not be removed: the row is gone, these are left behind. */
  failed: unknown[];
}

/** Cache entries deleted at once: a book with many sessions must not open one request per key at the same time. */
const CACHE_DELETES_AT_ONCE = 64;

/** The chat cache's entries of a book: the book, its positions, each character's, each session's (its conversation). */
function bookCacheKeys(bookId: string, ids: { characterIds: readonly string[]; sessionIds: readonly string[] }): string[] {
  return [
    bookCacheKey(bookId),
    readingPositionsCacheKey(bookId),
    ...ids.characterIds.flatMap((id) => [characterCacheKey(id), knowledgeCacheKey(id)]),
    ...ids.sessionIds.map(sessionCacheKey),
  ];
}

/** Deletes each key, CACHE_DELETES_AT_ONCE at a time; the reasons of the deletes that failed. */
async function deleteKeys(kv: KeyValueStore, keys: readonly string[]): Promise<unknown[]> {
  const failed: unknown[] = [];
  for (let i = 0; i < keys.length; i += CACHE_DELETES_AT_ONCE) {
    const results = await Promise.allSettled(keys.slice(i, i + CACHE_DELETES_AT_ONCE).map((k) => kv.del(k)));
    for (const r of results) if (r.status === "rejected") failed.push(r.reason);
  }
  return failed;
}

/**
 * Deletes a book: its row (and with it its characters, sessions and records), its indexes, its
 * persona backups, and the chat cache's copies of the book, its characters, positions and sessions
 * (a session's entry holds its recent conversation: left, it would outlive the deletion by its TTL).
 */
export async function deleteBook(deps: RemovalDeps & { db: Queryable; kv: KeyValueStore }, bookId: string): Promise<RemovalReport> {
  const [characters, ids] = await Promise.all([listCharacters(deps.db, bookId), listBookChatIds(deps.db, bookId)]);
  await deleteBookRow(deps.db, bookId);
  const [failed, cache] = await Promise.all([removeIndexesAndBackups(deps, bookId), deleteKeys(deps.kv, bookCacheKeys(bookId, ids))]);
  return { characters: characters.length, failed: [...failed, ...cache] };
}
