import { type Database, DatabaseError, type Queryable, type Row } from "./index.ts";

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
export const RELATIONSHIP_MODES = ["neutral", "friend", "mentor", "confidant", "rival", "romantic"] as const;
export type RelationshipMode = (typeof RELATIONSHIP_MODES)[number];
export type MessageRole = "user" | "assistant";

type BookRow = {
  id: string;
  title: string;
  author: string | null;
  description: string | null;
  cover_image_url: string | null;
  language: Language;
  file_path: string | null;
  price_cents: number;
  processing_status: ProcessingStatus;
  processing_error: string | null;
  created_at: Date;
  updated_at: Date;
};

type CharacterRow = {
  id: string;
  book_id: string;
  name: string;
  aliases: string[];
  description: string | null;
  profile_json: Record<string, unknown> | null;
  system_prompt: string | null;
  color: string | null;
  emoji: string | null;
  importance: number;
  created_at: Date;
  updated_at: Date;
};

type ChatSessionRow = {
  id: string;
  user_id: string;
  character_id: string;
  book_id: string;
  title: string | null;
  /** Exchanges (a user message and its reply), not single messages. */
  message_count: number;
  preview: string | null;
  summary: string | null;
  created_at: Date;
  updated_at: Date;
};

type MessageRow = {
  id: string;
  seq: number;
  session_id: string;
  role: MessageRole;
  content: string;
  created_at: Date;
};

type UserPreferencesRow = {
  user_id: string;
  character_id: string;
  relationship_mode: RelationshipMode;
  speech_modifiers: string[];
  behavioral_modifiers: string[];
  preference_summary: string | null;
  updated_at: Date;
};

type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;
type Camelize<T> = { [K in keyof T as CamelCase<K & string>]: T[K] };

export type Book = Camelize<BookRow>;
export type Character = Camelize<CharacterRow>;
export type ChatSession = Camelize<ChatSessionRow>;
export type Message = Camelize<MessageRow>;
export type UserPreferences = Camelize<UserPreferencesRow>;

function camelize<T extends Row>(row: T): Camelize<T> {
  const out: Row = {};
  for (const [key, value] of Object.entries(row)) out[key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())] = value;
  return out as Camelize<T>;
}

function snakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A malformed id names no row; answering "not found" spares callers a database error for user input. */
async function findById<T extends Row>(db: Queryable, table: string, id: string): Promise<Camelize<T> | null> {
  if (!UUID.test(id)) return null;
  const [row] = await db.query<T>(`SELECT * FROM ${table} WHERE id = $1`, [id]);
  return row ? camelize(row) : null;
}

/**
 * INSERT of the given camelCase fields (undefined ones are left to the column defaults), returning
 * the row. With `upsertOn`, a conflicting row gets the given fields instead, and a fresh updated_at.
 * Table and field names come from this module, never from input.
 */
async function insertRow<T extends Row>(
  db: Queryable,
  table: string,
  fields: Record<string, unknown>,
  upsertOn?: readonly string[],
): Promise<T> {
  const entries = Object.entries(fields).filter(([, v]) => v !== undefined);
  const columns = entries.map(([k]) => snakeCase(k));
  let sql = `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`;
  if (upsertOn) {
    const updates = columns.filter((c) => !upsertOn.includes(c)).map((c) => `${c} = EXCLUDED.${c}`);
    sql += ` ON CONFLICT (${upsertOn.join(", ")}) DO UPDATE SET ${[...updates, "updated_at = now()"].join(", ")}`;
  }
  const [row] = await db.query<T>(`${sql} RETURNING *`, entries.map(([, v]) => v));
  return row!;
}

// Books ----------------------------------------------------------------------------------------

export interface NewBook {
  id?: string;
  title: string;
  author?: string | null;
  description?: string | null;
  coverImageUrl?: string | null;
  language?: Language;
  filePath?: string | null;
  priceCents?: number;
  processingStatus?: ProcessingStatus;
}

export async function insertBook(db: Queryable, book: NewBook): Promise<Book> {
  return camelize(await insertRow<BookRow>(db, "books", { ...book }));
}

export function getBook(db: Queryable, id: string): Promise<Book | null> {
  return findById<BookRow>(db, "books", id);
}

/** Moves a book through ingestion; the error is kept only with it (cleared on any other change). Null when there is no such book. */
export async function setProcessingStatus(
  db: Queryable,
  bookId: string,
  status: ProcessingStatus,
  error?: string,
): Promise<Book | null> {
  if (!UUID.test(bookId)) return null;
  const [row] = await db.query<BookRow>(
    "UPDATE books SET processing_status = $2, processing_error = $3, updated_at = now() WHERE id = $1 RETURNING *",
    [bookId, status, error ?? null],
  );
  return row ? camelize(row) : null;
}

export async function addToLibrary(db: Queryable, userId: string, bookId: string): Promise<void> {
  await db.query("INSERT INTO user_library (user_id, book_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [userId, bookId]);
}

// Characters -----------------------------------------------------------------------------------

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
  return findById<CharacterRow>(db, "characters", id);
}

/** A book's characters, most important first. */
export async function listCharacters(db: Queryable, bookId: string): Promise<Character[]> {
  if (!UUID.test(bookId)) return [];
  const rows = await db.query<CharacterRow>(
    "SELECT * FROM characters WHERE book_id = $1 ORDER BY importance DESC, name",
    [bookId],
  );
  return rows.map(camelize);
}

/**
 * Makes the book's character list exactly `characters`, in one transaction, and returns them in the
 * order given. Characters are matched by name and updated in place rather than deleted and
 * re-inserted: a character keeps its id across re-ingestion, so the chat sessions and preferences
 * that reference it survive. Only characters whose names are no longer in the list are deleted, and
 * their sessions and preferences with them (the schema cascades), since nothing could answer them.
 */
export async function replaceCharacters(db: Database, bookId: string, characters: readonly CharacterInput[]): Promise<Character[]> {
  const names = characters.map((c) => c.name);
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate !== undefined) {
    throw new DatabaseError(`character "${duplicate}" appears twice in one book`, "unique_violation");
  }
  const records = characters.map((c) => ({
    name: c.name,
    aliases: c.aliases ?? [],
    description: c.description ?? null,
    profile_json: c.profileJson ?? null,
    system_prompt: c.systemPrompt ?? null,
    color: c.color ?? null,
    emoji: c.emoji ?? null,
    importance: c.importance ?? 0,
  }));
  return db.transaction(async (tx) => {
    await tx.query(
      "DELETE FROM characters WHERE book_id = $1 AND name NOT IN (SELECT jsonb_array_elements_text($2::jsonb))",
      [bookId, names],
    );
    // One statement for the whole list: a round trip per character adds up over a WebSocket.
    const rows = await tx.query<CharacterRow>(
      `INSERT INTO characters (book_id, name, aliases, description, profile_json, system_prompt, color, emoji, importance)
       SELECT $1, x.name, x.aliases, x.description, x.profile_json, x.system_prompt, x.color, x.emoji, x.importance
       FROM jsonb_to_recordset($2::jsonb) AS x(name text, aliases jsonb, description text, profile_json jsonb,
                                               system_prompt text, color text, emoji text, importance integer)
       ON CONFLICT (book_id, name) DO UPDATE SET
         aliases = EXCLUDED.aliases, description = EXCLUDED.description, profile_json = EXCLUDED.profile_json,
         system_prompt = EXCLUDED.system_prompt, color = EXCLUDED.color, emoji = EXCLUDED.emoji,
         importance = EXCLUDED.importance, updated_at = now()
       RETURNING *`,
      [bookId, records],
    );
    const byName = new Map(rows.map((r) => [r.name, camelize(r)]));
    return names.map((n) => byName.get(n)!);
  });
}

// Chat sessions and messages -------------------------------------------------------------------

export interface NewChatSession {
  id?: string;
  userId: string;
  characterId: string;
  title?: string | null;
}

/** The session's book is the character's book, so the two can never disagree. */
export async function createSession(db: Queryable, session: NewChatSession): Promise<ChatSession> {
  const [row] = await db.query<ChatSessionRow>(
    `INSERT INTO chat_sessions (id, user_id, character_id, book_id, title)
     SELECT COALESCE($1::uuid, gen_random_uuid()), $2, c.id, c.book_id, $4 FROM characters c WHERE c.id = $3
     RETURNING *`,
    [session.id ?? null, session.userId, session.characterId, session.title ?? null],
  );
  if (!row) throw new DatabaseError(`character ${session.characterId} does not exist`, "foreign_key_violation");
  return camelize(row);
}

export function getSession(db: Queryable, id: string): Promise<ChatSession | null> {
  return findById<ChatSessionRow>(db, "chat_sessions", id);
}

/**
 * Records one exchange: the user's message, the reply, and the session's count, preview and
 * updated_at, all or nothing. Returns the updated session, or null (and writes nothing) when the
 * session does not exist.
 *
 * One statement, so atomic without a transaction: a chat turn saves its exchange in one round trip
 * to the database (over the network on Postgres and Neon) where BEGIN, UPDATE, INSERT, COMMIT took
 * four.
 */
export async function appendExchange(
  db: Queryable,
  sessionId: string,
  userMessage: string,
  assistantMessage: string,
  preview: string,
): Promise<ChatSession | null> {
  if (!UUID.test(sessionId)) return null;
  const [session] = await db.query<ChatSessionRow>(
    `WITH session AS (
       UPDATE chat_sessions SET message_count = message_count + 1, preview = $2, updated_at = now() WHERE id = $1 RETURNING *
     ), saved AS (
       INSERT INTO messages (session_id, role, content)
       SELECT session.id, m.role, m.content FROM session, (VALUES (1, 'user', $3::text), (2, 'assistant', $4::text)) AS m (n, role, content)
       ORDER BY m.n
     )
     SELECT * FROM session`,
    [sessionId, preview, userMessage, assistantMessage],
  );
  return session ? camelize(session) : null;
}

export interface RecentMessage {
  role: Message["role"];
  content: string;
}

/** The session with its last `limit` messages (oldest first), in one statement. */
export async function getSessionWithRecentMessages(
  db: Queryable,
  sessionId: string,
  limit: number,
): Promise<(ChatSession & { recentMessages: RecentMessage[] }) | null> {
  if (!UUID.test(sessionId)) return null;
  const [row] = await db.query<ChatSessionRow & { recent_messages: RecentMessage[] }>(
    `SELECT s.*, COALESCE(
       (SELECT jsonb_agg(jsonb_build_object('role', m.role, 'content', m.content) ORDER BY m.seq)
          FROM (SELECT role, content, seq FROM messages WHERE session_id = s.id ORDER BY seq DESC LIMIT $2) m),
       '[]'::jsonb) AS recent_messages
     FROM chat_sessions s WHERE s.id = $1`,
    [sessionId, limit],
  );
  return row ? camelize(row) : null;
}

/** The session's last `limit` messages, oldest first. */
export async function getRecentMessages(db: Queryable, sessionId: string, limit: number): Promise<Message[]> {
  if (!UUID.test(sessionId)) return [];
  const rows = await db.query<MessageRow>(
    "SELECT * FROM (SELECT * FROM messages WHERE session_id = $1 ORDER BY seq DESC LIMIT $2) recent ORDER BY seq",
    [sessionId, limit],
  );
  return rows.map(camelize);
}

/**
 * Stores the rolling summary. updated_at is left alone: it orders a reader's sessions by their own
 * activity, and the summary is written in the background after a reply.
 */
export async function setSessionSummary(db: Queryable, sessionId: string, summary: string): Promise<boolean> {
  if (!UUID.test(sessionId)) return false;
  const rows = await db.query("UPDATE chat_sessions SET summary = $2 WHERE id = $1 RETURNING id", [sessionId, summary]);
  return rows.length > 0;
}

// Preferences ----------------------------------------------------------------------------------

export interface PreferencesInput {
  userId: string;
  characterId: string;
  relationshipMode?: RelationshipMode;
  speechModifiers?: string[];
  behavioralModifiers?: string[];
  preferenceSummary?: string | null;
}

export async function getPreferences(db: Queryable, userId: string, characterId: string): Promise<UserPreferences | null> {
  if (!UUID.test(userId) || !UUID.test(characterId)) return null;
  const [row] = await db.query<UserPreferencesRow>(
    "SELECT * FROM user_preferences WHERE user_id = $1 AND character_id = $2",
    [userId, characterId],
  );
  return row ? camelize(row) : null;
}

/** Creates the reader's preferences for a character, or changes only the fields given. */
export async function upsertPreferences(db: Queryable, preferences: PreferencesInput): Promise<UserPreferences> {
  return camelize(await insertRow<UserPreferencesRow>(db, "user_preferences", { ...preferences }, ["user_id", "character_id"]));
}
