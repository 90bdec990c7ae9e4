import type { ChatBook, ChatCache, ChatCharacter, PositionedContext, PositionedEntries } from "./chat-cache.ts";
import type { Database } from "../../common/db/index.ts";
import { getReaderState, type ReaderState, type SessionHead } from "../../common/db/reader-state.ts";
import type { Logger } from "../../common/log.ts";
import { skippedPreferenceValues, type PreferencesRow } from "../../common/prompt/preferences.ts";
import { lastChunkWithin, positionFromPages, turnPosition } from "../../common/retrieval/reading-position.ts";
import type { ChatRequest } from "../../common/contract/schemas.ts";
import { tokenize } from "../../common/text-index/tokenize.ts";

export interface Checkpoint {
  /** The position the knowledge is written as of. */
  position: number;
}

/**
 * Which of a character's knowledge a turn at `position` uses:
 * - `whole-book`: the characters row (the book has no checkpoints, as before this feature);
 * - `checkpoint`: the latest checkpoint at or before the position;
 * - `name-only`: none fits without looking past the position, so the persona is built from the name
 *   alone: the reader has not reached the character's first checkpoint (placed where the book has
 *   shown a couple of their lines), or the passes for the earlier ones failed. Never a later checkpoint, not even for a character the reader has yet to meet: it is
 *   written from what comes after the position, all of it a spoiler (the passages, cut at the
 *   position, still show what the reader has read of them).
 * `checkpoints` are the ones written for the character (failed ones are absent), `attempted` the
 * book's checkpoint positions.
 */
export type KnownAt<T extends Checkpoint> = { kind: "whole-book" } | { kind: "checkpoint"; checkpoint: T } | { kind: "name-only" };

export function knowledgeAt<T extends Checkpoint>(
  position: number,
  attempted: readonly number[],
  checkpoints: readonly T[],
): KnownAt<T> {
  if (attempted.length === 0) return { kind: "whole-book" };
  const before = [...checkpoints].sort((a, b) => a.position - b.position).filter((c) => c.position <= position).at(-1);
  return before ? { kind: "checkpoint", checkpoint: before } : { kind: "name-only" };
}

/** The latest lines before the position: the scenes the reader has just read the character in. */
export const RECENT_LINES = 6;
/** Earlier lines that share the most words with the reader's message, beside the recent ones. */
export const RELEVANT_LINES = 4;
/** Words that say nothing of what a message is about. */
const COMMON_WORDS = new Set(
  "about after again also been before being could does doing from have having here into just like more most much must only other over said same should some such than that their them then there these they this those through very want were what when where which while will with would your yours yourself".split(" "),
);
/**
 * What a text may be about: its words of four letters or more but the commonest, each by its first
 * four letters, so that "dancing" meets "dance" and "families" "family" (a rough stem, enough to rank
 * a few lines; the words come folded as the full-text index folds them).
 */
function topicWords(text: string): Set<string> {
  return new Set(tokenize(text).filter((w) => w.length >= 4 && !COMMON_WORDS.has(w)).map((w) => w.slice(0, 4)));
}

/**
 * What the persona quotes of the character at `position`: their RECENT_LINES latest lines before it,
 * and the RELEVANT_LINES earlier ones that share the most words with the reader's message, in book
 * order; never a line that ends after the position. For the whole book (null) only the lines the
 * message asks about: the end of the book is no nearer the reader than any other page. `lines` are in
 * book order.
 */
export function linesFor(lines: readonly { position: number; text: string }[], position: number | null, question: string): string[] {
  const before = position === null ? lines : lines.filter((l) => l.position <= position);
  const recent = position === null ? [] : before.slice(-RECENT_LINES);
  const asked = topicWords(question);
  const earlier = before
    .slice(0, before.length - recent.length)
    .map((l, i) => ({ i, shared: [...topicWords(l.text)].filter((w) => asked.has(w)).length }))
    .filter((l) => l.shared > 0)
    .sort((a, b) => b.shared - a.shared || b.i - a.i)
    .slice(0, RELEVANT_LINES)
    .sort((a, b) => a.i - b.i)
    .map((l) => before[l.i]!);
  return [...earlier, ...recent].map((l) => l.text);
}

/** What a turn may use of the book and the character (common/retrieval/reading-position.ts). */
export interface Knowledge {
  /** null: the whole book. */
  position: number | null;
  /** Only passages up to this chunk; -1: none; undefined: any. */
  maxChunkIndex: number | undefined;
  persona: string;
  profile: Record<string, unknown> | null;
  description: string | null;
  /** Tells apart rewrites made from different knowledge of the character (undefined: the whole book's). */
  tag: string | undefined;
  /** The character's own lines up to the position that the persona carries, in book order (none for the whole book). */
  ownLines: string[];
}

/** Where the reader is, and their stored preferences for the character (null when the body gives them or they are unavailable). */
export interface Reader {
  position: number | null;
  preferences: PreferencesRow | null;
  /** The session's head as the reader's statement found it (null: no such session); absent when nothing was read. */
  session?: SessionHead | null;
}

/**
 * For a character whose persona prompt ingestion has not written yet, or (without the description,
 * which is written from the whole book) for a reader part-way through when no checkpoint fits.
 */
function fallbackPersona(character: Pick<ChatCharacter, "name" | "description">, book: ChatBook): string {
  const about = character.description?.trim() ? ` ${character.description.trim()}` : "";
  return `You are ${character.name}, a character in the book "${book.title}".${about} Speak as ${character.name}, in the first person, and stay in character.`;
}

export interface KnowledgeDeps {
  db: Database;
  cache: ChatCache;
  log: Logger;
}

/** How far the reader is, and what the character may know (and the turn may show) at that position. */
export function createKnowledge(deps: KnowledgeDeps) {
  const { log } = deps;

  /** The whole book for a reader with no position; else only what comes before it. */
  async function knowledgeFor(
    character: ChatCharacter,
    book: ChatBook,
    position: number | null,
    question: string,
    cached?: PositionedEntries | null,
  ): Promise<Knowledge> {
    const persona = character.system_prompt?.trim() || fallbackPersona(character, book);
    if (position === null) {
      const ownLines = linesFor(character.lines, null, question);
      return { position, maxChunkIndex: undefined, persona, profile: character.profile_json, description: character.description, tag: undefined, ownLines };
    }
    let context: PositionedContext;
    try {
      context = await deps.cache.loadPositioned(book.id, character.id, cached);
    } catch (error) {
      log.warn("reading positions unavailable; replying without passages, from the character's name", { book_id: book.id, error });
      context = { book: null, character: { checkpoints: [] } };
    }
    const nameOnly: Knowledge = {
      position,
      maxChunkIndex: -1,
      persona: fallbackPersona({ name: character.name, description: null }, book),
      profile: null,
      description: null,
      tag: "name",
      ownLines: [],
    };
    if (!context.book) {
      // Ingested before positions were recorded: nothing can be told apart by position until it is ingested again.
      log.warn("book has no reading positions; re-ingest it for spoiler-safe passages and characters", { book_id: book.id });
      return nameOnly;
    }
    const maxChunkIndex = lastChunkWithin(context.book.chunk_ends, position);
    const ownLines = linesFor(character.lines, position, question);
    const known = knowledgeAt(position, context.book.checkpoints, context.character.checkpoints);
    if (known.kind === "whole-book") {
      return { position, maxChunkIndex, persona, profile: character.profile_json, description: character.description, tag: undefined, ownLines };
    }
    if (known.kind === "name-only") return { ...nameOnly, maxChunkIndex, ownLines };
    const { checkpoint } = known;
    return {
      position,
      maxChunkIndex,
      persona: checkpoint.system_prompt,
      profile: checkpoint.profile_json,
      description: null,
      tag: `at${checkpoint.position}`,
      ownLines,
    };
  }

  /**
   * The reader's position (the body's, else their page in user_library) and stored preferences (unless
   * the body gives them) for this turn, read in one statement on every turn, never from a cache: a
   * bookmark moved back must narrow the very next turn. Rejects when the page is needed and cannot be
   * read: without it, the whole book could be a spoiler. The same statement brings the session's head
   * (Reader.session), which spares a first turn a read of its own.
   */
  async function readerFor(request: ChatRequest, bookId: string): Promise<Reader> {
    const needPreferences = request.preferences === undefined;
    const needPage = request.reading_position === undefined;
    if (!needPreferences && !needPage) return { position: turnPosition(request.reading_position, null), preferences: null };
    let state: ReaderState;
    try {
      state = await getReaderState(deps.db, { userId: request.user_id, characterId: request.character_id, bookId }, needPreferences, request.session_id);
    } catch (error) {
      if (needPage) throw error;
      log.warn("preferences unavailable, replying without them", { error });
      return { position: turnPosition(request.reading_position, null), preferences: null };
    }
    const { preferences } = state;
    const skipped = preferences ? skippedPreferenceValues(preferences) : [];
    if (skipped.length > 0) log.warn("preference values not understood, left out of the prompt", { skipped: skipped.join(", ") });
    return { position: turnPosition(request.reading_position, positionFromPages(state.currentPage, state.pageCount)), preferences, session: state.session };
  }

  /**
   * The turn's position: the body's needs no read, so the turn goes on without waiting for the
   * reader's statement (its preferences are needed only by the reply's prompt); else the page that
   * statement read.
   */
  async function positionOf(request: ChatRequest, reader: Promise<Reader>): Promise<number | null> {
    return request.reading_position !== undefined ? turnPosition(request.reading_position, null) : (await reader).position;
  }

  return { knowledgeFor, readerFor, positionOf };
}
