import type { Logger } from "../log.ts";
import { type Database, DatabaseError, type Queryable, type Row } from "./index.ts";
import { refusedStatus, writesStatus } from "./processing-status.ts";

/**
 * Typed access to the tables this backend reads and writes. Row shapes are declared once, in the
 * database's snake_case, and every function returns them in camelCase through `camelize`.
 * Functions that need a transaction take a Database; the rest take any Queryable, so they can also
 * run inside someone else's transaction.
 */

export const PROCESSING_STATUSES = ["pending", "processing", "completed", "failed"] as const;
export type ProcessingStatus = (typeof PROCESSING_STATUSES)[number];
export const LANGUAGES = ["English", "Urdu", "both"] as const;
export type Language = (typeof LANGUAGES)[number];
export type MessageRole = "user" | "assistant";

/** What the backend reads of a books row (the frontend's table; SPEC: Resources, books). */
type BookRow = {
  id: string;
  title: string;
  author: string | null;
  description: string | null;
  language: Language;
  file_path: string | null;
  processing_status: ProcessingStatus;
};
const BOOK_COLUMNS = "id, title, author, description, language, file_path, processing_status";

type CharacterRow = {
  id: string;
  book_id: string;
  name: string;
  description: string | null;
  system_prompt: string | null;
  profile_json: Record<string, unknown> | null;
  avatar_url: string | null;
  color: string | null;
  emoji: string | null;
  /** Ours: other names the book uses for the character. */
  aliases: string[];
  /** Ours: rank among the book's characters (mentions and quotes). */
  importance: number;
  /** Ours: when a re-ingestion last stopped finding the character, kept for a reader's sake; null while found. */
  retired_at: Date | null;
  created_at: Date;
  updated_at: Date;
};
const CHARACTER_COLUMNS =
  "id, book_id, name, description, system_prompt, profile_json, avatar_url, color, emoji, aliases, importance, retired_at, created_at, updated_at";

/** What the backend reads of a chat_sessions row (the frontend's table). */
type ChatSessionRow = {
  id: string;
  user_id: string;
  character_id: string;
  book_id: string;
  /** Exchanges (a user message and its reply), not single messages. */
  message_count: number;
  preview: string | null;
  updated_at: Date;
};
const SESSION_COLUMNS = "id, user_id, character_id, book_id, message_count, preview, updated_at";

type MessageRow = {
  id: string;
  session_id: string;
  role: MessageRole;
  content: string;
  created_at: Date;
};

/** What the backend reads of a user_preferences row (the frontend's table), the lists as JSON arrays whatever their column type. */
type UserPreferencesRow = {
  user_id: string;
  character_id: string;
  relationship_mode: string;
  custom_relationship: string | null;
  speech_modifiers: string[];
  behavioral_modifiers: string[];
  preference_summary: string | null;
};

type BookIngestionRow = {
  book_id: string;
  attempts: number;
  last_error: string | null;
  chunk_count: number | null;
  /** The queue's job_id of the run that last completed the book. */
  completed_job_id: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  updated_at: Date;
};

type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;
type Camelize<T> = { [K in keyof T as CamelCase<K & string>]: T[K] };

export type Book = Camelize<BookRow>;
export type Character = Camelize<CharacterRow>;
export type ChatSession = Camelize<ChatSessionRow>;
export type Message = Camelize<MessageRow>;
export type UserPreferences = Camelize<UserPreferencesRow>;
export type BookIngestion = Camelize<BookIngestionRow>;

/** Column names are few and repeat on every row: each is converted once. */
const camelKeys = new Map<string, string>();

function camelize<T extends Row>(row: T): Camelize<T> {
  const out: Row = {};
  for (const key of Object.keys(row)) {
    let camel = camelKeys.get(key);
    if (camel === undefined) {
      camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
      camelKeys.set(key, camel);
    }
    out[camel] = (row as Row)[key];
  }
  return out as Camelize<T>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A malformed id names no row; answering "not found" spares callers a database error for user input. */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}

async function findById<T extends Row>(db: Queryable, table: string, columns: string, id: string): Promise<Camelize<T> | null> {
  if (!isUuid(id)) return null;
  const [row] = await db.query<T>(`SELECT ${columns} FROM ${table} WHERE id = $1`, [id]);
  return row ? camelize(row) : null;
}

// Books (the frontend's table: the backend writes processing_status only) -------------------------

export function getBook(db: Queryable, id: string): Promise<Book | null> {
  return findById<BookRow>(db, "books", BOOK_COLUMNS, id);
}

export interface IngestionOutcome {
  /** Why ingestion failed, in our own words; kept in book_ingestions, never in the books row. */
  error?: string;
  chunkCount?: number;
  /** The job that completed the book, so that the same job is never run again. */
  jobId?: string;
}

/**
 * Moves a book through ingestion: books.processing_status (the only column of books the backend
 * writes), and our own record of it in book_ingestions (attempts, last error, chunk count, times).
 * A completed book stays completed until a new ingestion completes: while it is re-ingested, and
 * when that fails, readers keep chatting with what it has, and the failure is only recorded here.
 * False when there is no such book.
 */
export async function setProcessingStatus(
  db: Queryable,
  bookId: string,
  status: ProcessingStatus,
  outcome: IngestionOutcome = {},
  log?: Logger,
): Promise<boolean> {
  if (!isUuid(bookId)) return false;
  try {
    return await writeProcessingStatus(db, bookId, status, outcome, await columnValue(db, status, log));
  } catch (err) {
    if (!(await refusedStatus(db, status, err, log))) throw err;
    return writeProcessingStatus(db, bookId, status, outcome, await columnValue(db, status, log));
  }
}

/**
 * What goes into books.processing_status for `status` (common/db/processing-status.ts): the status
 * where the column accepts it; where it refuses `failed`, `pending` (the book can be submitted
 * again); where it refuses `processing`, nothing (the row keeps `pending`).
 */
async function columnValue(db: Queryable, status: ProcessingStatus, log: Logger | undefined): Promise<ProcessingStatus | null> {
  if (await writesStatus(db, status, log)) return status;
  return status === "failed" ? "pending" : null;
}

async function writeProcessingStatus(
  db: Queryable,
  bookId: string,
  status: ProcessingStatus,
  outcome: IngestionOutcome,
  column: ProcessingStatus | null,
): Promise<boolean> {
  // The status is bound twice: once for the frontend's column, whose type may be an enum of its own
  // (bound as `pending`, never written, when the column gets nothing), and once as text for our table.
  const rows = await db.query(
    `WITH target AS (
       SELECT id, processing_status::text = 'completed' AS completed FROM books WHERE id = $1
     ), book AS (
       UPDATE books b SET processing_status = $2 FROM target
       WHERE b.id = target.id AND $7::boolean AND (NOT target.completed OR $3::text = 'completed')
       RETURNING b.id
     ), record AS (
       INSERT INTO book_ingestions (book_id, attempts, last_error, chunk_count, completed_job_id, started_at, finished_at)
       SELECT id, CASE WHEN $3::text = 'processing' THEN 1 ELSE 0 END, $4::text, $5::integer, $6::text,
              CASE WHEN $3::text = 'processing' THEN now() END,
              CASE WHEN $3::text IN ('completed', 'failed') THEN now() END
       FROM target
       ON CONFLICT (book_id) DO UPDATE SET
         attempts = book_ingestions.attempts + EXCLUDED.attempts,
         last_error = EXCLUDED.last_error,
         chunk_count = COALESCE(EXCLUDED.chunk_count, book_ingestions.chunk_count),
         completed_job_id = COALESCE(EXCLUDED.completed_job_id, book_ingestions.completed_job_id),
         started_at = COALESCE(EXCLUDED.started_at, book_ingestions.started_at),
         finished_at = EXCLUDED.finished_at,
         updated_at = now()
     )
     SELECT id FROM target`,
    [bookId, column ?? "pending", status, outcome.error ?? null, outcome.chunkCount ?? null, outcome.jobId ?? null, column !== null],
  );
  return rows.length > 0;
}

/**
 * Clears the error recorded for a book after the job that completed it (a returned lease of a job
 * that had in fact finished), so a completed book reports no stale failure. A no-op otherwise.
 */
export async function clearStaleIngestionError(db: Queryable, bookId: string, jobId: string): Promise<void> {
  if (!isUuid(bookId)) return;
  await db.query(
    "UPDATE book_ingestions SET last_error = NULL, updated_at = now() WHERE book_id = $1 AND completed_job_id = $2 AND last_error IS NOT NULL",
    [bookId, jobId],
  );
}

/** Our record of a book's ingestion, or null before its first run. */
export async function getIngestion(db: Queryable, bookId: string): Promise<BookIngestion | null> {
  if (!isUuid(bookId)) return null;
  const [row] = await db.query<BookIngestionRow>("SELECT * FROM book_ingestions WHERE book_id = $1", [bookId]);
  return row ? camelize(row) : null;
}

// Book sources (ours) ----------------------------------------------------------------------------

/** Records the SHA-256 of the file a book was ingested from (book_sources), so the same file finds it again. */
export async function recordBookSource(db: Queryable, bookId: string, contentHash: string): Promise<void> {
  await db.query(
    `INSERT INTO book_sources (book_id, content_hash) VALUES ($1, $2)
     ON CONFLICT (book_id) DO UPDATE SET content_hash = EXCLUDED.content_hash`,
    [bookId, contentHash],
  );
}

/** The newest book ingested from a file with this SHA-256, or null. */
export async function findBookBySource(db: Queryable, contentHash: string): Promise<Book | null> {
  const [row] = await db.query<BookRow>(
    `SELECT ${BOOK_COLUMNS.split(", ").map((c) => `b.${c}`).join(", ")}
     FROM book_sources s JOIN books b ON b.id = s.book_id WHERE s.content_hash = $1 ORDER BY s.created_at DESC LIMIT 1`,
    [contentHash],
  );
  return row ? camelize(row) : null;
}

// Characters (ours) ------------------------------------------------------------------------------

export interface CharacterInput {
  name: string;
  aliases?: string[];
  description?: string | null;
  profileJson?: Record<string, unknown> | null;
  systemPrompt?: string | null;
  color?: string | null;
  emoji?: string | null;
  importance?: number;
}

export function getCharacter(db: Queryable, id: string): Promise<Character | null> {
  return findById<CharacterRow>(db, "characters", CHARACTER_COLUMNS, id);
}

/** A book's characters that its latest ingestion found, most important first. */
export async function listCharacters(db: Queryable, bookId: string): Promise<Character[]> {
  if (!isUuid(bookId)) return [];
  const rows = await db.query<CharacterRow>(
    `SELECT ${CHARACTER_COLUMNS} FROM characters WHERE book_id = $1 AND retired_at IS NULL ORDER BY importance DESC, name`,
    [bookId],
  );
  return rows.map(camelize);
}

/**
 * Every persona the book's characters rows hold, retired characters' included, oldest row first (so a
 * backup's file name, which depends on the order when two names collide, stays the same across runs).
 */
export async function listPersonas(db: Queryable, bookId: string): Promise<{ name: string; systemPrompt: string }[]> {
  if (!isUuid(bookId)) return [];
  const rows = await db.query<{ name: string; system_prompt: string }>(
    "SELECT name, system_prompt FROM characters WHERE book_id = $1 AND system_prompt IS NOT NULL ORDER BY created_at, id",
    [bookId],
  );
  return rows.map(camelize);
}

export interface SaveCharactersOptions {
  /**
   * Names this run found but could not write (a profile or persona pass failed for them): such a
   * character keeps what the previous run wrote, untouched.
   */
  alsoFound?: readonly string[];
}

export interface SavedCharacters {
  /** The written characters, in the order given. */
  characters: Character[];
  /** Characters no longer found that a reader has a session or preferences with: kept, marked retired. */
  retired: number;
  /** Characters no longer found that nobody has used: deleted. */
  removed: number;
}

/**
 * Writes one ingestion run's characters in one transaction. A character is matched by name and
 * updated in place, so it keeps its id and every session and preference pointing at it. A character
 * the run did not find is deleted only when no reader has a session or preferences with it;
 * otherwise it stays, with its last persona, marked retired. Nothing a reader made is ever deleted,
 * even where the frontend's foreign keys cascade: the book's character rows are locked first, so a
 * session being created for one of them either commits before the check that keeps it, or waits and
 * then fails on its foreign key instead of being cascaded away.
 */
export async function saveCharacters(
  db: Database,
  bookId: string,
  characters: readonly CharacterInput[],
  options: SaveCharactersOptions = {},
): Promise<SavedCharacters> {
  const names = characters.map((c) => c.name);
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate !== undefined) {
    throw new DatabaseError(`character "${duplicate}" appears twice in one book`, "unique_violation");
  }
  const found = new Set([...names, ...(options.alsoFound ?? [])]);
  return db.transaction(async (tx) => {
    const existing = await tx.query<{ id: string; name: string }>(
      "SELECT id, name FROM characters WHERE book_id = $1 ORDER BY created_at, id FOR UPDATE",
      [bookId],
    );
    const idByName = new Map<string, string>();
    for (const row of existing) if (!idByName.has(row.name)) idByName.set(row.name, row.id);
    const records = characters.map((c) => ({
      id: idByName.get(c.name) ?? null,
      name: c.name,
      aliases: c.aliases ?? [],
      description: c.description ?? null,
      profile_json: c.profileJson ?? null,
      system_prompt: c.systemPrompt ?? null,
      color: c.color ?? null,
      emoji: c.emoji ?? null,
      importance: c.importance ?? 0,
    }));

    const gone = existing.filter((row) => !found.has(row.name)).map((row) => row.id);
    let removed = 0;
    let retired = 0;
    if (gone.length > 0) {
      const deleted = await tx.query(
        `DELETE FROM characters c WHERE c.id IN (SELECT jsonb_array_elements_text($1::jsonb)::uuid)
           AND NOT EXISTS (SELECT 1 FROM chat_sessions s WHERE s.character_id = c.id)
           AND NOT EXISTS (SELECT 1 FROM user_preferences p WHERE p.character_id = c.id)
         RETURNING c.id`,
        [gone],
      );
      removed = deleted.length;
      const kept = await tx.query(
        `UPDATE characters SET retired_at = COALESCE(retired_at, now())
         WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb)::uuid) RETURNING id`,
        [gone],
      );
      retired = kept.length;
    }

    // One statement for the updates and one for the inserts: a round trip per character adds up over a WebSocket.
    const recordset = `jsonb_to_recordset($1::jsonb) AS x(id uuid, name text, aliases jsonb, description text, profile_json jsonb,
                                                     system_prompt text, color text, emoji text, importance integer)`;
    const updates = records.filter((r) => r.id !== null);
    const inserts = records.filter((r) => r.id === null);
    const rows: CharacterRow[] = [];
    if (updates.length > 0) {
      rows.push(
        ...(await tx.query<CharacterRow>(
          `UPDATE characters c SET aliases = x.aliases, description = x.description, profile_json = x.profile_json,
             system_prompt = x.system_prompt, color = x.color, emoji = x.emoji, importance = x.importance,
             retired_at = NULL, updated_at = now()
           FROM ${recordset} WHERE c.id = x.id
           RETURNING ${CHARACTER_COLUMNS.split(", ").map((c) => `c.${c}`).join(", ")}`,
          [updates],
        )),
      );
    }
    if (inserts.length > 0) {
      rows.push(
        ...(await tx.query<CharacterRow>(
          `INSERT INTO characters (book_id, name, aliases, description, profile_json, system_prompt, color, emoji, importance)
           SELECT $2, x.name, x.aliases, x.description, x.profile_json, x.system_prompt, x.color, x.emoji, x.importance
           FROM ${recordset}
           RETURNING ${CHARACTER_COLUMNS}`,
          [inserts, bookId],
        )),
      );
    }
    const byName = new Map(rows.map((r) => [r.name, camelize(r)]));
    return { characters: names.map((n) => byName.get(n)!), retired, removed };
  });
}

// Chat sessions (the frontend's table) and messages (ours) ---------------------------------------

export function getSession(db: Queryable, id: string): Promise<ChatSession | null> {
  return findById<ChatSessionRow>(db, "chat_sessions", SESSION_COLUMNS, id);
}

/** The largest value of an integer column (the frontend's `message_count` is int4): the count stops there. */
export const MESSAGE_COUNT_MAX = 2_147_483_647;
/**
 * How far past the database's clock a message may be stamped and still order the next exchange. A
 * later stamp (a frontend's wrong clock, `infinity`, the largest timestamp) is left where it is and
 * ignored: ordering after it would stamp every later message with it, or fail for good past the
 * timestamp's range.
 */
export const MESSAGE_STAMP_LEAD_SECONDS = 3600;

/** The two messages of one exchange, named by the turn: saving them again finds them and saves nothing. */
export interface ExchangeIds {
  userMessageId: string;
  assistantMessageId: string;
}

export type SavedExchange = ChatSession & {
  /**
   * message_count before this save, null when the exchange had already been saved (a retry after a
   * save whose answer was lost). Equal to messageCount when the count is at MESSAGE_COUNT_MAX.
   */
  previousCount: number | null;
};

/**
 * Records one exchange: the user's message, the reply, and the session's message_count, preview and
 * updated_at (the only columns of chat_sessions the backend writes), all or nothing. Returns the
 * updated session, or null (and writes nothing) when the session does not exist.
 *
 * Idempotent: the messages carry the ids the turn chose, and a session already holding the first
 * of them is returned as it is, with nothing written (`previousCount` null), so a turn may retry a
 * save whose answer it never got.
 *
 * The frontend orders messages by created_at alone, so the question is stamped after every message
 * already in the session and the reply after the question, never equal: clocks can be coarser than
 * the time between two statements (the embedded database's ticks in milliseconds). Messages stamped
 * more than MESSAGE_STAMP_LEAD_SECONDS ahead of the clock are not ordered after. message_count stops
 * at MESSAGE_COUNT_MAX rather than failing every later save.
 * One statement, so atomic without a transaction: a chat turn saves its exchange in one round trip.
 */
export async function appendExchange(
  db: Queryable,
  sessionId: string,
  userMessage: string,
  assistantMessage: string,
  preview: string,
  ids: ExchangeIds = { userMessageId: crypto.randomUUID(), assistantMessageId: crypto.randomUUID() },
): Promise<SavedExchange | null> {
  if (!isUuid(sessionId)) return null;
  const [session] = await db.query<ChatSessionRow & { previous_count: number | null }>(
    `WITH done AS (
       SELECT 1 FROM messages WHERE id = $5 AND session_id = $1
     ), previous AS (
       SELECT id, message_count FROM chat_sessions WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM done) FOR UPDATE
     ), session AS (
       UPDATE chat_sessions s
          SET message_count = CASE WHEN s.message_count < $7 THEN s.message_count + 1 ELSE s.message_count END,
              preview = $2, updated_at = now()
         FROM previous WHERE s.id = previous.id
       RETURNING ${SESSION_COLUMNS.split(", ").map((c) => `s.${c}`).join(", ")}, previous.message_count AS previous_count
     ), asked AS (
       SELECT GREATEST(now(), max(created_at) + interval '1 microsecond') AS at FROM messages
        WHERE session_id = $1 AND created_at <= now() + make_interval(secs => $8)
     ), saved AS (
       INSERT INTO messages (id, session_id, role, content, created_at)
       SELECT m.id, session.id, m.role, m.content,
              CASE m.role WHEN 'user' THEN asked.at ELSE GREATEST(clock_timestamp(), asked.at + interval '1 microsecond') END
       FROM session, asked, (VALUES ($5::uuid, 'user', $3::text), ($6::uuid, 'assistant', $4::text)) AS m (id, role, content)
     )
     SELECT * FROM session
     UNION ALL
     SELECT ${SESSION_COLUMNS}, NULL FROM chat_sessions WHERE id = $1 AND EXISTS (SELECT 1 FROM done)`,
    [sessionId, preview, userMessage, assistantMessage, ids.userMessageId, ids.assistantMessageId, MESSAGE_COUNT_MAX, MESSAGE_STAMP_LEAD_SECONDS],
  );
  return session ? camelize(session) : null;
}

type ReadingPagesRow = { current_page: number | null; page_count: number | null };
/** The reader's page in the book (user_library) and the book's page count: where the reader is. */
export type ReadingPages = Camelize<ReadingPagesRow>;

export interface RecentMessage {
  role: Message["role"];
  content: string;
}

/** Messages in the order the frontend shows them: by created_at, a question before a reply stamped the same. */
const MESSAGE_ORDER = "created_at, CASE role WHEN 'user' THEN 0 ELSE 1 END, id";
const MESSAGE_ORDER_DESC = "created_at DESC, CASE role WHEN 'user' THEN 0 ELSE 1 END DESC, id DESC";

/** The session with its last `limit` messages (oldest first) and its rolling summary, in one statement. */
export async function getSessionWithRecentMessages(
  db: Queryable,
  sessionId: string,
  limit: number,
): Promise<(ChatSession & { recentMessages: RecentMessage[]; summary: string | null }) | null> {
  if (!isUuid(sessionId)) return null;
  const [row] = await db.query<ChatSessionRow & { recent_messages: RecentMessage[]; summary: string | null }>(
    `SELECT ${SESSION_COLUMNS.split(", ").map((c) => `s.${c}`).join(", ")},
       (SELECT summary FROM chat_session_summaries WHERE session_id = s.id) AS summary,
       COALESCE(
         (SELECT jsonb_agg(jsonb_build_object('role', m.role, 'content', m.content) ORDER BY m.n DESC)
            FROM (SELECT role, content, row_number() OVER (ORDER BY ${MESSAGE_ORDER_DESC}) AS n
                    FROM messages WHERE session_id = s.id ORDER BY ${MESSAGE_ORDER_DESC} LIMIT $2) m),
         '[]'::jsonb) AS recent_messages
     FROM chat_sessions s WHERE s.id = $1`,
    [sessionId, limit],
  );
  return row ? camelize(row) : null;
}

/** The session's last `limit` messages, oldest first. */
export async function getRecentMessages(db: Queryable, sessionId: string, limit: number): Promise<Message[]> {
  if (!isUuid(sessionId)) return [];
  const rows = await db.query<MessageRow>(
    `SELECT id, session_id, role, content, created_at FROM
       (SELECT * FROM messages WHERE session_id = $1 ORDER BY ${MESSAGE_ORDER_DESC} LIMIT $2) recent
     ORDER BY ${MESSAGE_ORDER}`,
    [sessionId, limit],
  );
  return rows.map(camelize);
}

/** Stores the rolling summary in our own table; chat_sessions (and its updated_at) is left alone. False when there is no such session. */
export async function setSessionSummary(db: Queryable, sessionId: string, summary: string): Promise<boolean> {
  if (!isUuid(sessionId)) return false;
  const rows = await db.query(
    `INSERT INTO chat_session_summaries (session_id, summary)
     SELECT id, $2 FROM chat_sessions WHERE id = $1
     ON CONFLICT (session_id) DO UPDATE SET summary = EXCLUDED.summary, updated_at = now()
     RETURNING session_id`,
    [sessionId, summary],
  );
  return rows.length > 0;
}

// Preferences (the frontend's table, read only) ----------------------------------------------------

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

export type ReaderState = ReadingPages & { preferences: UserPreferences | null };

/**
 * What a chat turn reads of the reader on every turn, never from a cache: their page in the book
 * (user_library, which the frontend moves at any time) with the book's page count, and, when
 * `withPreferences`, their preferences for the character — one statement, one round trip.
 */
export async function getReaderState(
  db: Queryable,
  ids: { userId: string; characterId: string; bookId: string },
  withPreferences: boolean,
): Promise<ReaderState> {
  if (!isUuid(ids.userId) || !isUuid(ids.characterId) || !isUuid(ids.bookId)) return { currentPage: null, pageCount: null, preferences: null };
  const [row] = await db.query<ReadingPagesRow & { preferences: UserPreferencesRow | null }>(
    `SELECT (SELECT l.current_page FROM user_library l WHERE l.user_id = $1 AND l.book_id = $3) AS current_page,
            (SELECT b.page_count FROM books b WHERE b.id = $3) AS page_count,
            (SELECT to_jsonb(p) FROM (${PREFERENCES_SELECT} AND $4::boolean) p) AS preferences`,
    [ids.userId, ids.characterId, ids.bookId, withPreferences],
  );
  return { currentPage: row?.current_page ?? null, pageCount: row?.page_count ?? null, preferences: row?.preferences ? camelize(row.preferences) : null };
}
