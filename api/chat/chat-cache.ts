import { z } from "zod";
import { jsonAs } from "../../common/json-as.ts";
import { bookCacheKey, characterCacheKey, knowledgeCacheKey, readingPositionsCacheKey, sessionCacheKey } from "../../common/contract/cache-keys.ts";
import type { Database } from "../../common/db/index.ts";
import { getBook } from "../../common/db/books.ts";
import { getCharacter } from "../../common/db/characters.ts";
import { getSessionWithRecentMessages } from "../../common/db/sessions.ts";
import { getBookReadingPositions, getCharacterKnowledge, getCharacterLines } from "../../common/db/reading-positions.ts";
import type { SessionHead } from "../../common/db/reader-state.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { silentLogger, type Logger } from "../../common/log.ts";
import { CONVERSATION_WINDOW_MESSAGES } from "../../common/prompt/conversation.ts";
import { cutChars, TRIM_MARKER } from "../../common/prompt/budget.ts";

/**
 * What a chat turn reads before it can answer (the character, the session with its recent history
 * and summary, the book), cached in the key-value store under `chat:char:{id}`, `chat:sess:{id}` and
 * `chat:book:{id}` and read in one round trip. The database is the source of truth: a miss, an entry
 * this version cannot read, or a store that fails is answered from it.
 *
 * Entries carry the spec's field names (SPEC: Key-value store keys): chat:char {id, name,
 * system_prompt, profile_json} plus the description a character without a persona is introduced
 * with, the book_id a turn checks and the character's lines with where each ends (character_lines); chat:sess {id, user_id, character_id, message_count} plus the
 * book_id a turn checks, then the last messages and the summary; chat:book {id, title, author,
 * description}. The reader's position is never cached: the frontend moves it at any time, and a
 * cached one could show a reader passages past where they have gone back to. An entry in any
 * other shape (one written by an earlier version during a rolling deploy) is never trusted: it is
 * read from the database instead and replaced (a session entry only by a turn holding the session's
 * lock, so that a fill can never put back an older history).
 *
 * A chat:sess value is at most maxSessionBytes (boundSession): it keeps every field SPEC lists (SPEC: Key-value store keys), all of
 * the last messages (with their roles) and the summary, and cuts the longest texts among them, each
 * ending in the trim marker. The database keeps them whole; the prompt cuts them to its own budgets
 * in any case, so a turn answered from the cache sees what one answered from the database does.
 */

export const CHAT_CACHE_TTL_SECONDS = 3600;
/** Character, session, book, positions, knowledge: the keys before contextKeys' `alsoRead`. */
const OWN_KEYS = 5;
/**
 * Longest chat:sess value, in bytes of its JSON. Ten messages of normal length (a reply of a thousand
 * tokens is about 5 KB) and a summary take a few tens of KB; the bound only bites on rows of abnormal
 * size, and it is above what the prompt takes of them at the default context (common/prompt/budget.ts).
 */
export const DEFAULT_SESSION_CACHE_BYTES = 262_144;

const ChatCharacter = z.object({
  id: z.string(),
  name: z.string(),
  system_prompt: z.string().nullable(),
  profile_json: z.record(z.string(), z.unknown()).nullable(),
  description: z.string().nullable(),
  /** The character's book: a session whose book is another is refused. */
  book_id: z.string(),
  /** Their lines in book order with where each ends (character_lines): a turn quotes a few of them. */
  lines: z.array(z.object({ position: z.number(), text: z.string() })),
});
export type ChatCharacter = z.infer<typeof ChatCharacter>;

const ChatBook = z.object({ id: z.string(), title: z.string(), author: z.string().nullable(), description: z.string().nullable() });
export type ChatBook = z.infer<typeof ChatBook>;

const ChatSessionState = z.object({
  id: z.string(),
  user_id: z.string(),
  character_id: z.string(),
  book_id: z.string(),
  /** Exchanges so far. */
  message_count: z.number().int().min(0),
  /** The last CONVERSATION_WINDOW_MESSAGES messages, oldest first. */
  messages: z.array(z.object({ role: z.enum(["user", "assistant"]), content: z.string() })),
  summary: z.string().nullable(),
});
export type ChatSessionState = z.infer<typeof ChatSessionState>;

const BookPositions = z.object({ chunk_ends: z.array(z.number()), checkpoints: z.array(z.number()) });
const CharacterKnowledge = z.object({
  checkpoints: z.array(z.object({ position: z.number(), profile_json: z.record(z.string(), z.unknown()), system_prompt: z.string() })),
});

/** What a turn with a reading position needs besides the usual context (common/retrieval/reading-position.ts). */
export interface PositionedContext {
  /** null: the book was ingested before reading positions were recorded. */
  book: z.infer<typeof BookPositions> | null;
  character: z.infer<typeof CharacterKnowledge>;
}

export interface ChatContext {
  character: ChatCharacter | null;
  session: ChatSessionState | null;
  book: ChatBook | null;
  /** Whether `session` was read from the database (it had no readable entry). */
  sessionFromDb: boolean;
  /** chat:positions and chat:knowledge as read with the rest, for loadPositioned; null when the store failed. */
  positioned: PositionedEntries | null;
  /** The values of `load`'s `alsoRead` keys; null when the store failed. */
  alsoRead: (string | null)[] | null;
}

/** ChatContext's entries as the key-value store had them (each null when missing or unreadable), and the raw values beside. */
export interface CachedEntries {
  character: ChatCharacter | null;
  session: ChatSessionState | null;
  book: ChatBook | null;
  positioned: PositionedEntries;
  /** The values of contextKeys' `alsoRead`. */
  alsoRead: (string | null)[];
}

/** The raw values of chat:positions:{book} and chat:knowledge:{character}. */
export type PositionedEntries = readonly [string | null, string | null];

export interface ChatContextIds {
  characterId: string;
  sessionId: string;
  bookId: string;
}

export interface ChatCacheOptions {
  kv: KeyValueStore;
  db: Database;
  logger?: Logger;
  ttlSeconds?: number;
  /** Messages of history kept with the session. */
  windowMessages?: number;
  /** Longest chat:sess value in bytes; DEFAULT_SESSION_CACHE_BYTES when unset. */
  maxSessionBytes?: number;
}

export interface ChatCache {
  /**
   * contextKeys' values read: the entries a turn may start on before the database has answered for
   * the misses.
   */
  entries(read: readonly (string | null)[]): CachedEntries;
  /** The keys `load` reads, in order: the context's own, then `alsoRead` (ChatContext.alsoRead). */
  contextKeys(ids: ChatContextIds, alsoRead?: readonly string[]): string[];
  /**
   * The context from `read`, the values of contextKeys (null when the store failed: `read` does not
   * reject), read by the caller in the round trip it makes anyway (the session lock's); each miss is read from the
   * database. The entries a reader with a position needs come with it (loadPositioned). A character
   * or book read is cached (nothing is cached for what does not exist); a session read is not: only a
   * turn holding the session's lock writes its entry (storeSession), so a fill read before another
   * turn saved its exchange can never replace the entry that turn wrote since. `sessionHead`: the
   * session's head read beside (undefined when it could not be): a missing entry of a session with no
   * messages yet (a first turn) is built from it, and one that does not exist needs no read of its own.
   */
  load(ids: ChatContextIds, read: Promise<readonly (string | null)[] | null>, sessionHead?: Promise<SessionHead | null | undefined>): Promise<ChatContext>;
  /**
   * The session as of now, for a turn holding the session lock: `cached` (the entry the caller just
   * read) when it is readable, else `read` (the database's, when the caller read it since taking the
   * lock), else the database's. Nothing is written: the turn stores the entry once its exchange is saved.
   */
  loadSession(sessionId: string, cached: string | null, read?: Promise<ChatSessionState | null>): Promise<ChatSessionState | null>;
  /** Replaces the session's entry (keeping the last windowMessages messages). Rejects with KvError when the store fails. */
  storeSession(session: ChatSessionState): Promise<void>;
  /** Drops the session's entry, so the next turn reads the database. Rejects with KvError when the store fails. */
  forgetSession(sessionId: string): Promise<void>;
  /**
   * For a reader with a position only: the book's chunk ends and the character's checkpoints, from
   * `cached` (what `load` read) or else in one KV round trip; a miss is read from the database.
   */
  loadPositioned(bookId: string, characterId: string, cached?: PositionedEntries | null): Promise<PositionedContext>;
}

export function createChatCache(options: ChatCacheOptions): ChatCache {
  const { kv, db } = options;
  const logger = options.logger ?? silentLogger;
  const ttl = options.ttlSeconds ?? CHAT_CACHE_TTL_SECONDS;
  const windowMessages = options.windowMessages ?? CONVERSATION_WINDOW_MESSAGES;
  const maxSessionBytes = options.maxSessionBytes ?? DEFAULT_SESSION_CACHE_BYTES;

  /** The session as cached: the last windowMessages messages, within maxSessionBytes. */
  function sessionEntry(session: ChatSessionState): ChatSessionState {
    const windowed = session.messages.length > windowMessages ? { ...session, messages: session.messages.slice(-windowMessages) } : session;
    const bounded = boundSession(windowed, maxSessionBytes);
    if (bounded !== windowed) {
      logger.info("session cache entry cut to its byte bound", { session_id: session.id, max_bytes: maxSessionBytes });
    }
    return bounded;
  }

  async function characterFromDb(id: string): Promise<ChatCharacter | null> {
    const [row, lines] = await Promise.all([getCharacter(db, id), getCharacterLines(db, id)]);
    if (!row) return null;
    return {
      id: row.id,
      name: row.name,
      system_prompt: row.systemPrompt,
      profile_json: row.profileJson,
      description: row.description,
      book_id: row.bookId,
      lines,
    };
  }

  async function bookFromDb(id: string): Promise<ChatBook | null> {
    const row = await getBook(db, id);
    return row ? { id: row.id, title: row.title, author: row.author, description: row.description } : null;
  }

  async function sessionFromHeadOrDb(id: string, head?: Promise<SessionHead | null | undefined>): Promise<ChatSessionState | null> {
    const known = await head;
    if (known === null) return null;
    if (known && !known.hasMessages) {
      const { userId, characterId, bookId, messageCount, summary } = known;
      return sessionEntry({ id: known.id, user_id: userId, character_id: characterId, book_id: bookId, message_count: messageCount, messages: [], summary });
    }
    return sessionFromDb(id);
  }

  async function sessionFromDb(id: string): Promise<ChatSessionState | null> {
    const row = await getSessionWithRecentMessages(db, id, windowMessages);
    if (!row) return null;
    return sessionEntry({
      id: row.id,
      user_id: row.userId,
      character_id: row.characterId,
      book_id: row.bookId,
      message_count: row.messageCount,
      messages: row.recentMessages,
      summary: row.summary,
    });
  }

  /** The keys of ChatContext's own entries (OWN_KEYS of them), in the order `load` reads them. */
  function ownKeys({ characterId, sessionId, bookId }: ChatContextIds): string[] {
    return [characterCacheKey(characterId), sessionCacheKey(sessionId), bookCacheKey(bookId), readingPositionsCacheKey(bookId), knowledgeCacheKey(characterId)];
  }

  async function load(ids: ChatContextIds, read: Promise<readonly (string | null)[] | null>, sessionHead?: Promise<SessionHead | null | undefined>): Promise<ChatContext> {
    const { characterId, sessionId, bookId } = ids;
    const own = ownKeys(ids);
    const cached = await read;
    if (cached === null) logger.warn("chat cache unavailable, reading the database");
    const hits = cached ? entries(cached) : null;
    const cachedSession = hits?.session ?? null;
    const [character, session, book] = await Promise.all([
      hits?.character ?? fromDb(own[0]!, cached?.[0], () => characterFromDb(characterId), cached !== null),
      cachedSession ?? sessionFromHeadOrDb(sessionId, sessionHead),
      hits?.book ?? fromDb(own[2]!, cached?.[2], () => bookFromDb(bookId), cached !== null),
    ]);
    return { character, session, book, sessionFromDb: !cachedSession, positioned: hits?.positioned ?? null, alsoRead: hits?.alsoRead ?? null };
  }

  function entries(read: readonly (string | null)[]): CachedEntries {
    return {
      character: jsonAs(ChatCharacter, read[0]),
      session: jsonAs(ChatSessionState, read[1]),
      book: jsonAs(ChatBook, read[2]),
      positioned: [read[3] ?? null, read[4] ?? null],
      alsoRead: read.slice(OWN_KEYS),
    };
  }

  async function fromCacheOrDb<T>(
    key: string,
    raw: string | null | undefined,
    schema: z.ZodType<T>,
    read: () => Promise<T | null>,
    kvUp: boolean,
  ) {
    return jsonAs(schema, raw) ?? fromDb(key, raw, read, kvUp);
  }

  /** A miss read from the database, and cached (`raw`: what the store held instead). */
  async function fromDb<T>(key: string, raw: string | null | undefined, read: () => Promise<T | null>, kvUp: boolean) {
    const value = await read();
    // A store that just failed is not asked again within the same turn.
    if (value && kvUp) await fill(key, value, !raw);
    return value;
  }

  async function fill(key: string, value: unknown, onlyIfAbsent: boolean) {
    await kv
      .set(key, JSON.stringify(value), { ex: ttl, ...(onlyIfAbsent ? { nx: true } : {}) })
      .catch((error: unknown) => logger.warn("chat cache write failed", { key, error }));
  }

  return {
    contextKeys: (ids, alsoRead = []) => [...ownKeys(ids), ...alsoRead],
    entries,
    load,
    async loadSession(sessionId, cached, read) {
      return jsonAs(ChatSessionState, cached) ?? (read ?? sessionFromDb(sessionId));
    },
    async storeSession(session) {
      await kv.set(sessionCacheKey(session.id), JSON.stringify(sessionEntry(session)), { ex: ttl });
    },
    async forgetSession(sessionId) {
      await kv.del(sessionCacheKey(sessionId));
    },
    async loadPositioned(bookId, characterId, given) {
      const keys = [readingPositionsCacheKey(bookId), knowledgeCacheKey(characterId)] as const;
      let cached: readonly (string | null)[] | null = given ?? null;
      if (!cached) {
        try {
          cached = await kv.mget([...keys]);
        } catch (error) {
          logger.warn("chat cache unavailable, reading the database", { error });
        }
      }
      const [book, character] = await Promise.all([
        fromCacheOrDb(keys[0], cached?.[0], BookPositions, async () => {
          const row = await getBookReadingPositions(db, bookId);
          return row && { chunk_ends: row.chunkEnds, checkpoints: row.checkpoints };
        }, cached !== null),
        fromCacheOrDb(keys[1], cached?.[1], CharacterKnowledge, async () => {
          const row = await getCharacterKnowledge(db, characterId);
          return { checkpoints: row.checkpoints.map((c) => ({ position: c.position, profile_json: c.profileJson, system_prompt: c.systemPrompt })) };
        }, cached !== null),
      ]);
      return { book, character: character ?? { checkpoints: [] } };
    },
  };
}

const utf8 = new TextEncoder();
/**
 * Bytes of the value's JSON, or (a JSON string of n UTF-16 units being at most 3n bytes) its length
 * when that shows it is under `below`: short values are not encoded.
 */
function jsonBytes(value: unknown, below = 0): number {
  const json = JSON.stringify(value);
  return json.length * 3 < below ? json.length : utf8.encode(json).length;
}

/** `text` whose JSON string is at most `bytes` long: unchanged, or its beginning ending in TRIM_MARKER. */
function cutToJsonBytes(text: string, bytes: number): string {
  if (jsonBytes(text) <= bytes) return text;
  let chars = Math.min(text.length, bytes);
  for (;;) {
    const cut = cutChars(text, chars).trimEnd() + TRIM_MARKER;
    const size = jsonBytes(cut);
    if (size <= bytes || chars === 0) return cut;
    chars = Math.max(0, Math.min(chars - 1, Math.floor((chars * bytes) / size)));
  }
}

/**
 * The session within `maxBytes` of JSON, the same object when it already is. The texts (each
 * message's content and the summary) share what the other fields leave, fairly: a text smaller than
 * an equal share keeps all of it, and what it leaves goes to the longer ones, which are cut.
 */
export function boundSession(session: ChatSessionState, maxBytes: number): ChatSessionState {
  if (jsonBytes(session, maxBytes) <= maxBytes) return session;
  const texts = [...session.messages.map((m) => m.content), session.summary ?? ""];
  const frame = jsonBytes({ ...session, messages: session.messages.map((m) => ({ ...m, content: "" })), summary: session.summary === null ? null : "" });
  // Each text's JSON string without its two quotes, which the frame already counts.
  const sizes = texts.map((t) => jsonBytes(t) - 2);
  let left = Math.max(0, maxBytes - frame);
  const order = sizes.map((_, i) => i).sort((a, b) => sizes[a]! - sizes[b]!);
  const allowed = new Array<number>(texts.length);
  for (const [rank, i] of order.entries()) {
    allowed[i] = Math.min(sizes[i]!, Math.floor(left / (order.length - rank)));
    left -= allowed[i]!;
  }
  const cut = texts.map((t, i) => (allowed[i]! >= sizes[i]! ? t : cutToJsonBytes(t, allowed[i]! + 2)));
  return {
    ...session,
    messages: session.messages.map((m, i) => ({ role: m.role, content: cut[i]! })),
    summary: session.summary === null ? null : cut[texts.length - 1]!,
  };
}
