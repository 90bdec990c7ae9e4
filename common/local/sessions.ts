import type { Database, Queryable } from "../db/index.ts";
import type { Character } from "../contract/rows.ts";
import { listCharacters } from "../db/characters.ts";
import { npmRun } from "../cli-usage.ts";
import { addToLibrary, createSession, FRONTEND_WRITES_FLAG, frontendWritesAllowed } from "../db/frontend-rows.ts";

/**
 * Chat sessions for the person at the keyboard of a local install (`npm start`, `bun run chat`).
 * In production the frontend owns users and sessions; locally there is no frontend, so one fixed
 * local user stands in for it, and its sessions are found or created here.
 */

/** The local reader. Fixed rather than generated, so it survives a lost data dir on a shared database. */
export const LOCAL_USER_ID = "10ca1000-0000-4000-8000-000000000001";
/** Books offered by name when a choice matches none. */
const MAX_CHOICES_LISTED = 20;

/** Everything a client needs to send `POST /character/chat`, plus names to show. */
export interface LocalChat {
  user_id: string;
  book_id: string;
  book_title: string;
  character_id: string;
  character_name: string;
  session_id: string;
  /** Exchanges so far. */
  message_count: number;
  /** The book's page count (books.page_count), to tell a page from a position; null when unknown. */
  page_count: number | null;
}

/** What the reader asked for: a book by id or title, a character by name or alias; either may be left to us. */
export interface LocalChoice {
  book?: string | undefined;
  character?: string | undefined;
}

export interface LocalChatOptions {
  /** Whether a new session (and library entry) may be written on a database shared with the frontend. */
  writeFrontendTables?: boolean;
}

/** The choice names no book or character that can be chatted with; the message lists what can. */
export class LocalChoiceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LocalChoiceError";
  }
}

const LOCAL_CHAT_SELECT = `SELECT s.user_id, b.id AS book_id, b.title AS book_title, c.id AS character_id, c.name AS character_name,
         s.id AS session_id, s.message_count, b.page_count
  FROM chat_sessions s JOIN characters c ON c.id = s.character_id JOIN books b ON b.id = s.book_id`;

/** The same shape as a type alias: query rows must be index-signature compatible, interfaces are not. */
type LocalChatRow = { [K in keyof LocalChat]: LocalChat[K] };

/** The local reader's most recently used session, optionally only with one character or in one book. */
export async function findLocalChat(db: Queryable, only: { characterId?: string; bookId?: string } = {}): Promise<LocalChat | null> {
  const conditions = ["s.user_id = $1"];
  const params = [LOCAL_USER_ID];
  if (only.characterId) conditions.push(`s.character_id = $${params.push(only.characterId)}`);
  if (only.bookId) conditions.push(`s.book_id = $${params.push(only.bookId)}`);
  const [row] = await db.query<LocalChatRow>(
    `${LOCAL_CHAT_SELECT} WHERE ${conditions.join(" AND ")} ORDER BY s.updated_at DESC, s.created_at DESC LIMIT 1`,
    params,
  );
  return row ?? null;
}

type BookChoiceRow = { id: string; title: string; page_count: number | null };

const COMPLETED = "processing_status = 'completed'";

/** Books that can be chatted about, newest first. */
export function listChatBooks(db: Queryable, limit = MAX_CHOICES_LISTED): Promise<BookChoiceRow[]> {
  return db.query<BookChoiceRow>(`SELECT id, title, page_count FROM books WHERE ${COMPLETED} ORDER BY created_at DESC LIMIT ${Math.trunc(limit)}`);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function chooseBook(db: Queryable, wanted: string | undefined, latest: LocalChat | null): Promise<BookChoiceRow> {
  if (wanted === undefined && latest) return { id: latest.book_id, title: latest.book_title, page_count: latest.page_count };
  const completed = COMPLETED;
  let rows: BookChoiceRow[];
  if (wanted === undefined) rows = await listChatBooks(db, 1);
  else if (UUID.test(wanted)) rows = await db.query<BookChoiceRow>(`SELECT id, title, page_count FROM books WHERE ${completed} AND id = $1`, [wanted]);
  else rows = bestMatches(await db.query<BookChoiceRow>(`SELECT id, title, page_count FROM books WHERE ${completed} ORDER BY created_at DESC`), wanted, (b) => [b.title]);
  // Several books of one title (older copies): the newest.
  if (rows.length === 1 || (rows.length > 1 && rows.every((b) => nameKey(b.title) === nameKey(rows[0]!.title)))) return rows[0]!;

  const available = await listChatBooks(db);
  if (available.length === 0) throw new LocalChoiceError(`no book has been ingested yet: add one with \`${npmRun("ingest", "<file.txt>")}\``);
  const listed = available.map((b) => `  ${b.title} (${b.id})`).join("\n");
  const only = wanted === undefined ? "" : rows.length > 1 ? `"${wanted}" could be several books. ` : `no ingested book has the id or title "${wanted}". `;
  throw new LocalChoiceError(`${only}Books you can chat about:\n${listed}`);
}

function chooseCharacter(characters: readonly Character[], wanted: string | undefined, latestInBook: LocalChat | null, bookTitle: string): Character {
  if (characters.length === 0) throw new LocalChoiceError(`"${bookTitle}" has no characters to chat with`);
  if (wanted === undefined) return characters.find((c) => c.id === latestInBook?.character_id) ?? characters[0]!;
  const byId = characters.find((c) => c.id === wanted.trim().toLowerCase());
  const found = byId ? [byId] : bestMatches(characters, wanted, (c) => [c.name, ...c.aliases]);
  if (found.length === 1) return found[0]!;
  const listed = (found.length > 1 ? found : characters).map((c) => `  ${c.name}${c.aliases.length > 0 ? ` (${c.aliases.join(", ")})` : ""}`).join("\n");
  if (found.length > 1) throw new LocalChoiceError(`"${wanted}" could be several characters of "${bookTitle}":\n${listed}`);
  throw new LocalChoiceError(`"${bookTitle}" has no character called "${wanted}". Its characters:\n${listed}`);
}

/** A name as a reader types it: case, spacing, punctuation and a leading article do not matter. */
function nameKey(name: string): string {
  const words = name.normalize("NFKC").toLowerCase().replace(/[^\p{L}\p{N}]+/gu, " ").trim().split(" ");
  return (words.length > 1 && (words[0] === "the" || words[0] === "a") ? words.slice(1) : words).join(" ");
}

/**
 * What a typed name picks, best tier first: a name or alias equal to it; else names and aliases
 * that contain it, or that it contains, as whole words ("Queen" and "Queen of Hearts" both find
 * "The Queen"). More than one result in the best tier is an ambiguity the caller reports.
 */
function bestMatches<T>(items: readonly T[], wanted: string, namesOf: (item: T) => string[]): T[] {
  const key = nameKey(wanted);
  if (key === "") return [];
  const equal = items.filter((item) => namesOf(item).some((n) => nameKey(n) === key));
  if (equal.length > 0) return equal;
  const within = (outer: string, inner: string) => ` ${outer} `.includes(` ${inner} `);
  return items.filter((item) => namesOf(item).some((n) => nameKey(n) !== "" && (within(nameKey(n), key) || within(key, nameKey(n)))));
}

/**
 * The local reader's session with the chosen character, created (and the book added to the local
 * library) when there is none. Left unchosen, the book is that of the last session used, else the
 * newest ingested book; the character is the one last talked to in that book, else its most important.
 */
export async function openLocalChat(db: Database, choice: LocalChoice = {}, options: LocalChatOptions = {}): Promise<LocalChat> {
  const latest = await findLocalChat(db);
  const book = await chooseBook(db, choice.book, latest);
  const latestInBook = latest?.book_id === book.id ? latest : await findLocalChat(db, { bookId: book.id });
  const character = chooseCharacter(await listCharacters(db, book.id), choice.character, latestInBook, book.title);
  const existing = await findLocalChat(db, { characterId: character.id });
  if (existing) return existing;
  if (!frontendWritesAllowed(db, options.writeFrontendTables)) {
    throw new LocalChoiceError(
      `there is no local session with ${character.name} yet, and making one writes the frontend's tables chat_sessions and ` +
        `user_library of this shared database: pass ${FRONTEND_WRITES_FLAG} to allow it`,
    );
  }
  await addToLibrary(db, LOCAL_USER_ID, book.id);
  const session = await createSession(db, { userId: LOCAL_USER_ID, characterId: character.id });
  return {
    user_id: LOCAL_USER_ID,
    book_id: book.id,
    book_title: book.title,
    character_id: character.id,
    character_name: character.name,
    session_id: session.id,
    message_count: session.messageCount,
    page_count: book.page_count,
  };
}
