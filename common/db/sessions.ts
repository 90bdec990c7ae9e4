import type { ChatSession, ChatSessionRow, Message, MessageRow } from "../contract/rows.ts";
import type { Queryable } from "./index.ts";
import { camelize, findById, isUuid } from "./row-lookup.ts";

/** Chat sessions (the frontend's table), their messages and rolling summaries (ours). */

const SESSION_COLUMNS = "id, user_id, character_id, book_id, message_count, preview, updated_at";

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
  /**
   * Messages the database orders after this exchange: those stamped more than
   * MESSAGE_STAMP_LEAD_SECONDS ahead, which stay last. 0 but for rows a frontend wrote so.
   */
  stampedAfter: number;
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
  const [session] = await db.query<ChatSessionRow & { previous_count: number | null; stamped_after: number }>(
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
     SELECT session.*, (SELECT count(*)::int FROM messages WHERE session_id = $1 AND created_at > now() + make_interval(secs => $8)) AS stamped_after FROM session
     UNION ALL
     SELECT ${SESSION_COLUMNS}, NULL, 0 FROM chat_sessions WHERE id = $1 AND EXISTS (SELECT 1 FROM done)`,
    [sessionId, preview, userMessage, assistantMessage, ids.userMessageId, ids.assistantMessageId, MESSAGE_COUNT_MAX, MESSAGE_STAMP_LEAD_SECONDS],
  );
  return session ? camelize(session) : null;
}

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

/** A message as read with a bound on its text: `contentChars` is the length of the whole stored text. */
export type BoundedMessage = Message & { contentChars: number };

/**
 * The session's last `limit` messages, oldest first, each message's text cut to its first
 * `maxChars` characters in the database (the frontend writes rows of any length: a reader of the
 * history must not have to carry them whole).
 */
export async function getRecentMessages(db: Queryable, sessionId: string, limit: number, maxChars = 2_147_483_647): Promise<BoundedMessage[]> {
  if (!isUuid(sessionId)) return [];
  const rows = await db.query<MessageRow & { content_chars: number }>(
    `SELECT id, session_id, role, left(content, $3) AS content, char_length(content) AS content_chars, created_at FROM
       (SELECT * FROM messages WHERE session_id = $1 ORDER BY ${MESSAGE_ORDER_DESC} LIMIT $2) recent
     ORDER BY ${MESSAGE_ORDER}`,
    [sessionId, limit, maxChars],
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

/**
 * The ids a book's chat cache entries are kept under: every character of the book (retired ones
 * too) and every chat session of the book or of one of its characters. Read before the book's row is
 * deleted (the rows go with it).
 */
export async function listBookChatIds(db: Queryable, bookId: string): Promise<{ characterIds: string[]; sessionIds: string[] }> {
  if (!isUuid(bookId)) return { characterIds: [], sessionIds: [] };
  const [row] = await db.query<{ character_ids: string[]; session_ids: string[] }>(
    `SELECT COALESCE((SELECT array_agg(id::text) FROM characters WHERE book_id = $1), '{}') AS character_ids,
            COALESCE((SELECT array_agg(id::text) FROM chat_sessions
                       WHERE book_id = $1 OR character_id IN (SELECT id FROM characters WHERE book_id = $1)), '{}') AS session_ids`,
    [bookId],
  );
  return { characterIds: row?.character_ids ?? [], sessionIds: row?.session_ids ?? [] };
}
