import { randomUUID } from "node:crypto";
import type { Database, Queryable } from "./index.ts";
import type { Book, ChatSession, Language, ProcessingStatus } from "../contract/rows.ts";
import { getBook } from "./books.ts";
import { getSession } from "./sessions.ts";

/**
 * The rows the frontend writes (SPEC: Ingestion behavior steps 1–2, the chat session routes, the
 * preference route), written the way the frontend writes them. The backend's service never calls
 * these: they serve the local conveniences (the sample book of `npm start`, `bun run ingest`,
 * `bun run chat`) on the embedded database or when the user asks for it, and tests.
 */

/** The flag a local convenience takes to write the frontend's tables on a database other than the embedded one. */
export const FRONTEND_WRITES_FLAG = "--write-frontend-tables";

/**
 * On a shared database (Postgres, Neon) the frontend's tables hold readers' data, so a local
 * convenience writes them only when the user says so; the embedded database is ours alone.
 */
export function frontendWritesAllowed(db: Pick<Database, "driver">, flagGiven: boolean | undefined): boolean {
  return db.driver === "pglite" || flagGiven === true;
}

/** Author given to a book added from a file that names none. */
export const UNKNOWN_AUTHOR = "Unknown author";

export interface NewBook {
  id?: string;
  title: string;
  author?: string;
  /** At least 10 characters, as the frontend's upload form requires; one is made from the title when absent. */
  description?: string;
  language?: Language;
  pageCount?: number | null;
  filePath?: string | null;
  uploaderId?: string | null;
  processingStatus?: ProcessingStatus;
}

/** The frontend's slug: the title in lower-case words joined by hyphens, made unique with a piece of the id. */
export function slugFor(title: string, id: string): string {
  const words = title
    .normalize("NFKD")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 80);
  return `${words || "book"}-${id.slice(0, 8)}`;
}

/** The books row of an upload: status `approved`, public, free, processing `pending` unless given. */
export async function insertBook(db: Queryable, book: NewBook): Promise<Book> {
  const id = book.id ?? randomUUID();
  await db.query(
    `INSERT INTO books (id, title, slug, author, description, language, page_count, file_path, uploader_id,
                        status, processing_status, is_public, is_free)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'approved', $10, true, true)`,
    [
      id,
      book.title,
      slugFor(book.title, id),
      book.author ?? UNKNOWN_AUTHOR,
      book.description ?? `${book.title}, added as a text file.`,
      book.language ?? "English",
      book.pageCount ?? null,
      book.filePath ?? null,
      book.uploaderId ?? null,
      book.processingStatus ?? "pending",
    ],
  );
  return (await getBook(db, id))!;
}

/** The uploader's (or buyer's) library entry: `unread`, page 0. */
export async function addToLibrary(db: Queryable, userId: string, bookId: string): Promise<void> {
  await db.query("INSERT INTO user_library (user_id, book_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [userId, bookId]);
}

export interface NewChatSession {
  id?: string;
  userId: string;
  characterId: string;
}

/** A session as the frontend's session routes create it; its book is the character's book. Throws when the character does not exist. */
export async function createSession(db: Queryable, session: NewChatSession): Promise<ChatSession> {
  const id = session.id ?? randomUUID();
  const inserted = await db.query(
    `INSERT INTO chat_sessions (id, user_id, character_id, book_id)
     SELECT $1, $2, c.id, c.book_id FROM characters c WHERE c.id = $3 RETURNING id`,
    [id, session.userId, session.characterId],
  );
  if (inserted.length === 0) throw new Error(`character ${session.characterId} does not exist`);
  return (await getSession(db, id))!;
}

export interface PreferencesInput {
  userId: string;
  characterId: string;
  relationshipMode?: string;
  customRelationship?: string | null;
  speechModifiers?: string[];
  behavioralModifiers?: string[];
  preferenceSummary?: string | null;
}

/** What the frontend's preference route stores: one row per reader and character, replaced whole. */
export async function upsertPreferences(db: Queryable, p: PreferencesInput): Promise<void> {
  await db.query(
    `INSERT INTO user_preferences (user_id, character_id, relationship_mode, custom_relationship, speech_modifiers,
                                   behavioral_modifiers, preference_summary)
     SELECT $1, $2, $3, $4, ARRAY(SELECT jsonb_array_elements_text($5::jsonb)), ARRAY(SELECT jsonb_array_elements_text($6::jsonb)), $7
     ON CONFLICT (user_id, character_id) DO UPDATE SET
       relationship_mode = EXCLUDED.relationship_mode, custom_relationship = EXCLUDED.custom_relationship,
       speech_modifiers = EXCLUDED.speech_modifiers, behavioral_modifiers = EXCLUDED.behavioral_modifiers,
       preference_summary = EXCLUDED.preference_summary, updated_at = now()`,
    [
      p.userId,
      p.characterId,
      p.relationshipMode ?? "stranger",
      p.customRelationship ?? null,
      p.speechModifiers ?? [],
      p.behavioralModifiers ?? [],
      p.preferenceSummary ?? null,
    ],
  );
}

/** Deletes a books row; its characters, sessions and our records of it cascade. False when there was none. */
export async function deleteBookRow(db: Queryable, bookId: string): Promise<boolean> {
  const rows = await db.query("DELETE FROM books WHERE id = $1 RETURNING id", [bookId]);
  return rows.length > 0;
}

export interface BookDetails {
  title?: string;
  author?: string;
  language?: Language;
}

/**
 * What a local convenience re-ingesting a book is told of it; what is not given is kept. The slug
 * stays: links to the book keep working under a new title.
 */
export async function setBookDetails(db: Queryable, bookId: string, details: BookDetails): Promise<void> {
  await db.query("UPDATE books SET title = COALESCE($2, title), author = COALESCE($3, author), language = COALESCE($4, language), updated_at = now() WHERE id = $1", [
    bookId,
    details.title ?? null,
    details.author ?? null,
    details.language ?? null,
  ]);
}
