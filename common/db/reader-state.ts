import type { Camelize, UserPreferences, UserPreferencesRow } from "../contract/rows.ts";
import type { Queryable } from "./index.ts";
import { camelize, isUuid } from "./row-lookup.ts";

/** What a chat turn reads of the reader: their page in the book (user_library) and their preferences (the frontend's tables, read only). */

type ReadingPagesRow = { current_page: number | null; page_count: number | null };
/** The reader's page in the book (user_library) and the book's page count: where the reader is. */
export type ReadingPages = Camelize<ReadingPagesRow>;

/** The reader's page in the book and the book's page count, as two columns, for the given parameter placeholders. */
const pagesSelect = (user: string, book: string) =>
  `(SELECT l.current_page FROM user_library l WHERE l.user_id = ${user} AND l.book_id = ${book}) AS current_page,
   (SELECT b.page_count FROM books b WHERE b.id = ${book}) AS page_count`;

/** The reader's page in the book (user_library) and the book's page count; nulls when either is unknown. */
export async function getReadingPages(db: Queryable, userId: string, bookId: string): Promise<ReadingPages> {
  if (!isUuid(userId) || !isUuid(bookId)) return { currentPage: null, pageCount: null };
  const [row] = await db.query<ReadingPagesRow>(`SELECT ${pagesSelect("$1", "$2")}`, [userId, bookId]);
  return { currentPage: row?.current_page ?? null, pageCount: row?.page_count ?? null };
}

/** A user_preferences row as UserPreferencesRow: the modifier lists as JSON arrays whatever their column type. */
const PREFERENCES_SELECT = `SELECT user_id, character_id, relationship_mode::text AS relationship_mode, custom_relationship, preference_summary,
            COALESCE(to_jsonb(speech_modifiers), '[]'::jsonb) AS speech_modifiers,
            COALESCE(to_jsonb(behavioral_modifiers), '[]'::jsonb) AS behavioral_modifiers
       FROM user_preferences WHERE user_id = $1 AND character_id = $2`;

/** The reader's preferences for a character; the modifier lists read the same from text[], jsonb or json columns. */
export async function getPreferences(db: Queryable, userId: string, characterId: string): Promise<UserPreferences | null> {
  if (!isUuid(userId) || !isUuid(characterId)) return null;
  const [row] = await db.query<UserPreferencesRow>(PREFERENCES_SELECT, [userId, characterId]);
  return row ? camelize(row) : null;
}

type SessionHeadRow = { id: string; user_id: string; character_id: string; book_id: string; message_count: number; summary: string | null; has_messages: boolean };
/**
 * A chat session without its messages: enough to tell whose it is, and, while it has none, all a turn
 * needs. `hasMessages` is read from the messages themselves: the frontend may write rows that
 * message_count does not count.
 */
export type SessionHead = Camelize<SessionHeadRow>;

export type ReaderState = ReadingPages & {
  preferences: UserPreferences | null;
  /** With `sessionId`: the session's head, null when there is no such session. */
  session?: SessionHead | null;
};

/**
 * What a chat turn reads of the reader on every turn, never from a cache: their page in the book
 * (user_library, which the frontend moves at any time) with the book's page count, when
 * `withPreferences` their preferences for the character, and with `sessionId` the session's head
 * (what a first turn needs of a session not cached yet) — one statement, one round trip.
 */
export async function getReaderState(
  db: Queryable,
  ids: { userId: string; characterId: string; bookId: string },
  withPreferences: boolean,
  sessionId?: string,
): Promise<ReaderState> {
  const session = sessionId === undefined ? {} : { session: null };
  if (!isUuid(ids.userId) || !isUuid(ids.characterId) || !isUuid(ids.bookId)) return { currentPage: null, pageCount: null, preferences: null, ...session };
  const [row] = await db.query<ReadingPagesRow & { preferences: UserPreferencesRow | null; session: SessionHeadRow | null }>(
    `SELECT ${pagesSelect("$1", "$3")},
            (SELECT to_jsonb(p) FROM (${PREFERENCES_SELECT} AND $4::boolean) p) AS preferences,
            (SELECT to_jsonb(h) FROM (
               SELECT s.id, s.user_id, s.character_id, s.book_id, s.message_count,
                      (SELECT summary FROM chat_session_summaries WHERE session_id = s.id) AS summary,
                      EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id) AS has_messages
                 FROM chat_sessions s WHERE s.id = $5::uuid) h) AS session`,
    [ids.userId, ids.characterId, ids.bookId, withPreferences, sessionId !== undefined && isUuid(sessionId) ? sessionId : null],
  );
  return {
    currentPage: row?.current_page ?? null,
    pageCount: row?.page_count ?? null,
    preferences: row?.preferences ? camelize(row.preferences) : null,
    ...(sessionId === undefined ? {} : { session: row?.session ? camelize(row.session) : null }),
  };
}
