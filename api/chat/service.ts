import {
  createChatCache,
  sessionCacheKey,
  type ChatBook,
  type ChatCache,
  type ChatCharacter,
  type ChatSessionState,
  type PositionedContext,
} from "../../common/session/cache.ts";
import { DEFAULT_CHAT_FIRST_TOKEN_TIMEOUT_MS, type Config } from "../../common/config.ts";
import { DatabaseError, type Database } from "../../common/db/index.ts";
import { appendExchange, setSessionSummary, type ExchangeIds, type SavedExchange } from "../../common/db/sessions.ts";
import { getReaderState, type ReaderState } from "../../common/db/reader-state.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import { DEFAULT_LOCK_TTL_SECONDS, keepLockAlive, LockUnavailableError, tryAcquireLock, type Lock } from "../../common/session/lock.ts";
import type { LogFields, Logger } from "../../common/log.ts";
import type { Metrics } from "../../common/metrics/index.ts";
import type { ChatOutcome } from "../../common/metrics/chat.ts";
import {
  buildChatMessages,
  buildChatSystemPrompt,
  buildRewriteMessages,
  buildSummaryMessages,
  CONVERSATION_WINDOW_MESSAGES,
  messagesLeavingWindow,
  parseRewrite,
  rewriteCacheKey,
  type ConversationMessage,
  type RewrittenQueries,
} from "../../common/prompt/chat.ts";
import { skippedPreferenceValues, type PreferencesRow } from "../../common/prompt/preferences.ts";
import { createTokenCounter, promptBudget, type PromptLimits } from "../../common/prompt/budget.ts";
import type { Reranker } from "../../common/rerank/index.ts";
import { knowledgeAt, lastChunkWithin, positionFromPages, turnPosition } from "../../common/prompt/reading-position.ts";
import { createRetriever, type RetrievalResult, type Retriever } from "../../common/retrieval/retriever.ts";
import type { ChatEvent, ChatRequest } from "../../common/contract/schemas.ts";
import type { TextIndex } from "../../common/text/index.ts";
import type { VectorIndex } from "../../common/vector/index.ts";
import { HttpError } from "../errors.ts";

/**
 * One chat turn, from the request body to the events of the reply. Knows nothing of HTTP: `open`
 * throws HttpError before anything is streamed, and `reply` yields the events to send.
 *
 * Order of a turn: cached context (one KV round trip) → session checks → session lock → the
 * session's history re-read under the lock → query rewrite (cached) → hybrid retrieval → streamed
 * completion → the exchange saved in one transaction and the session cache refreshed → `done`.
 *
 * Everything that writes a session's history or summary holds a key: the turn holds the session lock
 * `chat:lock:{id}`, and the summary fold that runs after the reply holds `chat:fold:{id}`, taken
 * before the turn lets go of its lock. The next turn waits (briefly) for a fold to finish rather than
 * answering 429, then reads the history under its own lock, so it always builds on the latest
 * messages and summary. History read before the lock only decides the 404.
 */

export interface ChatDeps {
  db: Database;
  kv: KeyValueStore;
  llm: LanguageModel;
  vectorIndex: VectorIndex;
  textIndex: TextIndex;
  /** Without one, retrieval orders passages by rank fusion. */
  reranker: Reranker | undefined;
  /** The session lock's expiry (SPEC: 30 s); renewed while a reply streams, so it only ever lapses when its holder died. */
  sessionLockTtlSeconds?: number;
  config?: Pick<Config, "chatFirstTokenTimeoutMs"> & Partial<Pick<Config, "chatContextTokens" | "chatReplyTokens">>;
  metrics: Metrics;
  logger: Logger;
}

export const REWRITE_TEMPERATURE = 0;
export const REWRITE_MAX_TOKENS = 200;
/** The rewrite only sharpens retrieval: past this, the turn goes on with the reader's own words. */
export const REWRITE_TIMEOUT_MS = 10_000;
export const REWRITE_CACHE_TTL_SECONDS = 3600;
export const SUMMARY_MAX_TOKENS = 300;
export const SUMMARY_TIMEOUT_MS = 10_000;
/** Longest a turn waits for the previous turn's summary fold; longer than the fold may take, so waiters outlast it. */
export const FOLD_WAIT_MS = SUMMARY_TIMEOUT_MS + 2_000;
const FOLD_POLL_MS = 25;
/** How long, and how often, a lock release or a cache drop the store failed is tried again. */
export const STORE_RETRY_WINDOW_MS = 10_000;
const STORE_RETRY_FIRST_MS = 200;
const STORE_RETRY_MAX_MS = 2_000;
/**
 * A reply the reader has received is saved in up to SAVE_ATTEMPTS attempts, waiting
 * SAVE_RETRY_FIRST_MS, then twice as long each time up to SAVE_RETRY_MAX_MS, in between (1.75 s in
 * all), while the session lock is kept alive; then the reader gets the SAVE_FAILED event.
 */
export const SAVE_ATTEMPTS = 4;
export const SAVE_RETRY_FIRST_MS = 250;
export const SAVE_RETRY_MAX_MS = 2_000;
/** Characters of the reply kept as the session's preview, before the closing "…". */
export const PREVIEW_CHARS = 100;

export const lockKey = (sessionId: string) => `chat:lock:${sessionId}`;
export const foldKey = (sessionId: string) => `chat:fold:${sessionId}`;

export const SESSION_NOT_FOUND = "session not found";
/** The session's character belongs to another book than the session: its passages would be the wrong book's. */
export const CHARACTER_NOT_IN_BOOK = "character not found in the session's book";
export const SESSION_BUSY = "another reply is in progress for this session";
export const MODEL_FAILED = "the language model failed to reply";
export const SAVE_FAILED = "the reply could not be saved";
export const REPLY_FAILED = "the reply failed";

/** Everything `open` found, handed to `reply`. */
export interface ChatTurn {
  request: ChatRequest;
  character: ChatCharacter;
  book: ChatBook;
  /** As read before the lock: enough to decide the 404, not necessarily the latest history. */
  session: ChatSessionState;
  /** performance.now() when the request arrived: the start of time to first token. */
  receivedAt: number;
}

export interface ChatService {
  /** Loads and checks the session, character and book; throws HttpError 404 (or 500 when the database fails). */
  open(request: ChatRequest, receivedAt?: number): Promise<ChatTurn>;
  /**
   * The reply's events: tokens, then `done` (or one error event). Aborting `signal` (the client left)
   * cancels the model request, ends the events silently and saves nothing.
   */
  reply(turn: ChatTurn, signal: AbortSignal): AsyncGenerator<ChatEvent, void>;
  /** Resolves once the work started after replies (summary folds, rewrite cache writes) has finished. */
  settle(): Promise<void>;
}

/** The session's preview: the start of the reply on one line, always ending in "…". */
export function previewOf(reply: string): string {
  const codePoints = [...reply.replace(/\s+/g, " ").trim()];
  return `${codePoints.slice(0, PREVIEW_CHARS).join("").trimEnd()}…`;
}

/**
 * Whether a failed save may succeed when tried again: not when Postgres refused the data itself
 * (SQLSTATE classes 22 and 23, such as a NUL character or a session deleted meanwhile), except a
 * duplicate key, which is a save of the same exchange still in flight.
 */
function mayPassOnRetry(error: unknown): boolean {
  if (!(error instanceof DatabaseError) || error.code === "unique_violation") return true;
  return !/^2[23]/.test(error.sqlState ?? "");
}

/**
 * For a character whose persona prompt ingestion has not written yet, or (without the description,
 * which is written from the whole book) for a reader part-way through when no checkpoint fits.
 */
function fallbackPersona(character: Pick<ChatCharacter, "name" | "description">, book: ChatBook): string {
  const about = character.description?.trim() ? ` ${character.description.trim()}` : "";
  return `You are ${character.name}, a character in the book "${book.title}".${about} Speak as ${character.name}, in the first person, and stay in character.`;
}

/** What a turn may use of the book and the character (common/prompt/reading-position.ts). */
interface Knowledge {
  /** null: the whole book. */
  position: number | null;
  /** Only passages up to this chunk; -1: none; undefined: any. */
  maxChunkIndex: number | undefined;
  persona: string;
  profile: Record<string, unknown> | null;
  description: string | null;
  /** Tells apart rewrites made from different knowledge of the character (undefined: the whole book's). */
  tag: string | undefined;
}

export function createChatService(deps: ChatDeps): ChatService {
  const log = deps.logger.child({ component: "chat" });
  const background = new Set<Promise<unknown>>();
  const track = (task: Promise<unknown>) => {
    background.add(task);
    void task.finally(() => background.delete(task));
  };

  const budget = promptBudget(deps.config?.chatContextTokens, deps.config?.chatReplyTokens);
  const counter = createTokenCounter();
  /** Every cut made to fit a prompt into the context is logged and counted. */
  const limitsFor = (sessionId: string): PromptLimits => ({
    budget,
    counter,
    onTrim: ({ purpose, part, chars, keptChars, budgetTokens, dropped }) => {
      deps.metrics.chat.promptTrims.inc({ purpose, part });
      log.info("prompt part cut to its budget", { session_id: sessionId, purpose, part, chars, kept_chars: keptChars, budget_tokens: budgetTokens, ...(dropped ? { dropped } : {}) });
    },
  });

  // Built on first use: the routes (and the OpenAPI document) are assembled without the stores.
  let parts: { cache: ChatCache; retriever: Retriever } | undefined;
  const use = () =>
    (parts ??= {
      cache: createChatCache({ kv: deps.kv, db: deps.db, logger: log }),
      retriever: createRetriever({
        llm: deps.llm,
        vectorIndex: deps.vectorIndex,
        textIndex: deps.textIndex,
        reranker: deps.reranker,
        logger: log,
      }),
    });

  async function open(request: ChatRequest, receivedAt = performance.now()): Promise<ChatTurn> {
    const { cache } = use();
    const ids = { characterId: request.character_id, sessionId: request.session_id, bookId: request.book_id };
    const context = await cache.load(ids).catch((err: unknown) => {
      throw new HttpError(500, "database unavailable", { cause: err });
    });
    const { session, character, book } = context;
    const notFound = (message: string) => {
      deps.metrics.chat.requests.inc({ outcome: "404" });
      return new HttpError(404, message);
    };
    // Another reader's session, or one of another character or book, is reported exactly like a
    // missing one: the caller learns nothing about sessions that are not theirs.
    if (
      !session ||
      session.user_id !== request.user_id ||
      session.character_id !== request.character_id ||
      session.book_id !== request.book_id
    ) {
      throw notFound(SESSION_NOT_FOUND);
    }
    if (!character) throw notFound("character not found");
    if (character.book_id !== session.book_id) throw notFound(CHARACTER_NOT_IN_BOOK);
    if (!book) throw notFound("book not found");
    return { request, character, book, session, receivedAt };
  }

  async function rewrite(turn: ChatTurn, session: ChatSessionState, knowledge: Knowledge, signal: AbortSignal): Promise<RewrittenQueries> {
    const { character, request } = turn;
    const key = rewriteCacheKey(character.id, request.user_message, session.messages, knowledge.tag);
    const cached = await deps.kv.get(key).catch((error: unknown) => {
      log.warn("rewrite cache unavailable", { error });
      return null;
    });
    const hit = parseRewrite(cached, request.user_message);
    if (!hit.fellBack) return hit;

    let answer: string | null = null;
    try {
      answer = await deps.llm.complete(
        buildRewriteMessages({
          character: { name: character.name, profile: knowledge.profile, description: knowledge.description },
          userMessage: request.user_message,
          history: session.messages,
        }, limitsFor(session.id)),
        {
          purpose: "rewrite",
          temperature: REWRITE_TEMPERATURE,
          maxTokens: REWRITE_MAX_TOKENS,
          json: true,
          signal: AbortSignal.any([signal, AbortSignal.timeout(REWRITE_TIMEOUT_MS)]),
        },
      );
    } catch (error) {
      if (signal.aborted) throw error;
      log.warn("query rewrite failed, searching with the reader's message", { session_id: session.id, error });
    }
    const queries = parseRewrite(answer, request.user_message);
    if (queries.fellBack) {
      if (answer !== null) log.warn("query rewrite answer unusable, searching with the reader's message", { session_id: session.id });
      return queries;
    }
    const value = JSON.stringify({ narrative_query: queries.narrativeQuery, keyword_query: queries.keywordQuery });
    track(
      deps.kv.set(key, value, { ex: REWRITE_CACHE_TTL_SECONDS }).catch((error: unknown) => log.warn("rewrite cache write failed", { error })),
    );
    return queries;
  }

  /** The whole book for a reader with no position; else only what comes before it. */
  async function knowledgeFor(turn: ChatTurn, position: number | null): Promise<Knowledge> {
    const { character, book } = turn;
    const persona = character.system_prompt?.trim() || fallbackPersona(character, book);
    if (position === null) {
      return { position, maxChunkIndex: undefined, persona, profile: character.profile_json, description: character.description, tag: undefined };
    }
    let context: PositionedContext;
    try {
      context = await use().cache.loadPositioned(book.id, character.id);
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
    };
    if (!context.book) {
      // Ingested before positions were recorded: nothing can be told apart by position until it is ingested again.
      log.warn("book has no reading positions; re-ingest it for spoiler-safe passages and characters", { book_id: book.id });
      return nameOnly;
    }
    const maxChunkIndex = lastChunkWithin(context.book.chunk_ends, position);
    const known = knowledgeAt(position, context.book.checkpoints, context.character.checkpoints);
    if (known.kind === "whole-book") {
      return { position, maxChunkIndex, persona, profile: character.profile_json, description: character.description, tag: undefined };
    }
    if (known.kind === "name-only") return { ...nameOnly, maxChunkIndex };
    const { checkpoint } = known;
    return {
      position,
      maxChunkIndex,
      persona: checkpoint.system_prompt,
      profile: checkpoint.profile_json,
      description: null,
      tag: `at${checkpoint.position}`,
    };
  }

  /**
   * The reader's position (the body's, else their page in user_library) and stored preferences (unless
   * the body gives them) for this turn, read in one statement on every turn, never from a cache: a
   * bookmark moved back must narrow the very next turn. Rejects when the page is needed and cannot be
   * read: without it, the whole book could be a spoiler.
   */
  async function readerFor(request: ChatRequest, bookId: string): Promise<{ position: number | null; preferences: PreferencesRow | null }> {
    const needPreferences = request.preferences === undefined;
    const needPage = request.reading_position === undefined;
    if (!needPreferences && !needPage) return { position: turnPosition(request.reading_position, null), preferences: null };
    let state: ReaderState;
    try {
      state = await getReaderState(deps.db, { userId: request.user_id, characterId: request.character_id, bookId }, needPreferences);
    } catch (error) {
      if (needPage) throw error;
      log.warn("preferences unavailable, replying without them", { error });
      return { position: turnPosition(request.reading_position, null), preferences: null };
    }
    const { preferences } = state;
    const skipped = preferences ? skippedPreferenceValues(preferences) : [];
    if (skipped.length > 0) log.warn("preference values not understood, left out of the prompt", { skipped: skipped.join(", ") });
    return { position: turnPosition(request.reading_position, positionFromPages(state.currentPage, state.pageCount)), preferences };
  }

  /**
   * Saves the exchange, trying again with back-off when the database fails (SAVE_ATTEMPTS): the reader
   * has the whole reply by now. The same message ids on every attempt make a retry after a save whose
   * answer was lost find it saved rather than save it twice. Null: the session is gone.
   */
  async function saveExchange(sessionId: string, userMessage: string, reply: string, signal: AbortSignal): Promise<SavedExchange | null> {
    const ids: ExchangeIds = { userMessageId: crypto.randomUUID(), assistantMessageId: crypto.randomUUID() };
    for (let attempt = 1, wait = SAVE_RETRY_FIRST_MS; ; attempt++, wait = Math.min(wait * 2, SAVE_RETRY_MAX_MS)) {
      try {
        return await appendExchange(deps.db, sessionId, userMessage, reply, previewOf(reply), ids);
      } catch (error) {
        if (attempt >= SAVE_ATTEMPTS || !mayPassOnRetry(error) || signal.aborted) throw error;
        log.warn("saving the exchange failed; trying again", { session_id: sessionId, attempt, error });
        await Bun.sleep(wait);
      }
    }
  }

  async function release(lock: Lock | null) {
    if (!lock) return;
    try {
      await lock.release();
    } catch (error) {
      // Otherwise a store that was down as the turn ended (a Redis restart) would leave the session
      // refusing every message with 429 until the lock's 30 s expiry.
      log.warn("session lock release failed; trying again in the background", { key: lock.key, error });
      track(retryUntilStoreAnswers(lock.key, () => lock.release()));
    }
  }

  /** Tries a write the store failed again, with back-off, until it succeeds or STORE_RETRY_WINDOW_MS has passed. */
  async function retryUntilStoreAnswers(key: string, write: () => Promise<unknown>) {
    const deadline = performance.now() + STORE_RETRY_WINDOW_MS;
    for (let wait = STORE_RETRY_FIRST_MS; performance.now() + wait < deadline; wait = Math.min(wait * 2, STORE_RETRY_MAX_MS)) {
      await Bun.sleep(wait);
      try {
        await write();
        log.info("key-value write done after the store came back", { key });
        return;
      } catch {
        // still unavailable
      }
    }
    log.error("key-value write given up; the key lapses at its expiry", { key });
  }

  /**
   * The session's history as of now, for a turn holding the session lock (or going without it):
   * waits for a summary fold in progress, then reads the cache, or the database behind it.
   */
  async function latestSession(sessionId: string, signal: AbortSignal): Promise<ChatSessionState | null> {
    const { cache } = use();
    const deadline = performance.now() + FOLD_WAIT_MS;
    for (;;) {
      let cached: string | null;
      let folding: string | null;
      try {
        [cached = null, folding = null] = await deps.kv.mget([sessionCacheKey(sessionId), foldKey(sessionId)]);
      } catch (error) {
        log.warn("session cache unavailable, reading the database", { session_id: sessionId, error });
        return cache.loadSession(sessionId, null);
      }
      if (!folding) return cache.loadSession(sessionId, cached);
      if (performance.now() > deadline) {
        log.warn("summary fold still running, replying without waiting for it", { session_id: sessionId });
        return cache.loadSession(sessionId, cached);
      }
      await Bun.sleep(FOLD_POLL_MS);
      signal.throwIfAborted();
    }
  }

  /** Folds the messages that left the window into the summary; a failure keeps the old one. Releases the fold key. */
  async function foldSummary(turn: ChatTurn, state: ChatSessionState, leaving: ConversationMessage[], lock: Lock | null) {
    try {
      const text = await deps.llm.complete(
        buildSummaryMessages({ characterName: turn.character.name, previousSummary: state.summary, leaving }, limitsFor(state.id)),
        { purpose: "summary", temperature: 0, maxTokens: SUMMARY_MAX_TOKENS, signal: AbortSignal.timeout(SUMMARY_TIMEOUT_MS) },
      );
      const summary = text.trim();
      if (!summary) throw new Error("the model returned an empty summary");
      await setSessionSummary(deps.db, state.id, summary);
      await refreshSessionCache({ ...state, summary });
    } catch (error) {
      log.warn("summary fold failed, keeping the previous summary", { session_id: state.id, error });
    } finally {
      await release(lock);
    }
  }

  /**
   * Starts the summary fold under the fold key, taken before the session lock is released so that
   * no turn can slip in between and read the summary the fold is about to replace.
   */
  async function handOver(sessionId: string, lock: Lock | null, fold: (foldLock: Lock | null) => Promise<void>) {
    const foldLock = await tryAcquireLock(deps.kv, foldKey(sessionId)).catch((error: unknown) => {
      log.warn("fold key unavailable, folding without it", { session_id: sessionId, error });
      // The set may have landed all the same: released after the fold like a key we hold.
      return error instanceof LockUnavailableError ? error.attempted : null;
    });
    await release(lock);
    track(fold(foldLock));
  }

  /** A cache entry that could not be replaced must not outlive the turn that made it stale. */
  async function refreshSessionCache(state: ChatSessionState) {
    try {
      await use().cache.storeSession(state);
    } catch (error) {
      log.warn("session cache write failed, dropping the entry", { session_id: state.id, error });
      await forgetSessionCache(state.id);
    }
  }

  async function forgetSessionCache(sessionId: string) {
    const { cache } = use();
    await cache.forgetSession(sessionId).catch((err: unknown) => {
      // Left in place, the entry would feed the next turns a history without this exchange for an hour.
      log.warn("stale session cache entry left behind; dropping it again in the background", { session_id: sessionId, error: err });
      track(retryUntilStoreAnswers(sessionCacheKey(sessionId), () => cache.forgetSession(sessionId)));
    });
  }

  async function* reply(turn: ChatTurn, signal: AbortSignal): AsyncGenerator<ChatEvent, void> {
    const { request, character, book } = turn;
    const { retriever } = use();
    let outcome: ChatOutcome | undefined;
    let lock: Lock | null = null;
    let stopKeepAlive: (() => void) | undefined;
    let afterReply: ((foldLock: Lock | null) => Promise<void>) | undefined;
    const lockTtl = deps.sessionLockTtlSeconds ?? DEFAULT_LOCK_TTL_SECONDS;
    /** For the turn's log line: how far the reader was and which knowledge of the character spoke. */
    let positioned: LogFields = {};
    try {
      try {
        lock = await tryAcquireLock(deps.kv, lockKey(turn.session.id), lockTtl);
        if (!lock) {
          outcome = "429";
          yield { error: SESSION_BUSY, code: 429 };
          return;
        }
      } catch (error) {
        deps.metrics.chat.lockUnavailable.inc();
        log.warn("session lock unavailable, replying without it", { session_id: turn.session.id, error });
        // The set may have landed all the same: released at the end of the turn like a lock we hold.
        if (error instanceof LockUnavailableError) lock = error.attempted;
      }
      if (lock) {
        const key = lock.key;
        stopKeepAlive = keepLockAlive(lock, {
          ttlSeconds: lockTtl,
          onLost: () => log.warn("session lock lost while replying; another message may be answered at the same time", { key }),
          onError: (error) => log.warn("session lock renewal failed; trying again", { key, error }),
        });
      }

      const reader = readerFor(request, book.id);
      // Awaited with the prompt; a failed read rejects `reader` itself, awaited first.
      const preferences = reader.then((r) => r.preferences, () => null);
      const session = await latestSession(turn.session.id, signal);
      if (!session) throw new Error("the session was deleted before the reply");
      const knowledge = await knowledgeFor(turn, (await reader).position);
      if (knowledge.position !== null) positioned = { reading_position: knowledge.position, knowledge: knowledge.tag ?? "whole-book" };
      const queries = await rewrite(turn, session, knowledge, signal);
      // A reader who has not finished the first chunk may be shown no passage: nothing to search for.
      const retrieved: RetrievalResult =
        knowledge.maxChunkIndex === -1
          ? { chunks: [], rankedBy: "fusion", degraded: [] }
          : await retriever.retrieve({
              bookId: book.id,
              narrativeQuery: queries.narrativeQuery,
              keywordQuery: queries.keywordQuery,
              rerankQuery: request.user_message,
              signal,
              ...(knowledge.maxChunkIndex !== undefined ? { maxChunkIndex: knowledge.maxChunkIndex } : {}),
            });
      const systemPrompt = buildChatSystemPrompt({
        personaPrompt: knowledge.persona,
        preferences: await preferences,
        preferencesOverride: request.preferences ?? null,
        passages: retrieved.chunks,
        summary: session.summary,
        readingPosition: knowledge.position,
      }, limitsFor(session.id));

      let full = "";
      // The reader waits for the first token at most this long from the moment the message arrived.
      const firstTokenBudget = (deps.config?.chatFirstTokenTimeoutMs ?? DEFAULT_CHAT_FIRST_TOKEN_TIMEOUT_MS) - (performance.now() - turn.receivedAt);
      const completion = new AbortController();
      const forwardAbort = () => completion.abort(signal.reason);
      signal.addEventListener("abort", forwardAbort, { once: true });
      const firstTokenTimer = setTimeout(() => completion.abort(new Error("no first token in time")), Math.max(0, firstTokenBudget));
      try {
        const deltas = deps.llm.stream(buildChatMessages(systemPrompt, session.messages, request.user_message, limitsFor(session.id)), {
          purpose: "chat",
          signal: completion.signal,
        });
        for await (const delta of deltas) {
          if (full === "") {
            clearTimeout(firstTokenTimer);
            deps.metrics.chat.timeToFirstToken.observe((performance.now() - turn.receivedAt) / 1000);
          }
          full += delta;
          yield { token: delta };
        }
      } catch (error) {
        if (signal.aborted) return;
        const late = full === "" && completion.signal.aborted;
        log.warn(late ? "no first token in time; the reader gets the 502 event" : "chat completion failed", { session_id: session.id, error });
        outcome = "502";
        yield { error: MODEL_FAILED, code: 502 };
        return;
      } finally {
        clearTimeout(firstTokenTimer);
        signal.removeEventListener("abort", forwardAbort);
      }
      if (signal.aborted) return;

      let saved;
      try {
        saved = await saveExchange(session.id, request.user_message, full, signal);
        if (!saved) throw new Error("the session was deleted during the reply");
      } catch (error) {
        log.error("saving the exchange failed; the reader gets the 502 event", { session_id: session.id, error });
        outcome = "502";
        yield { error: SAVE_FAILED, code: 502 };
        return;
      }
      const conversation: ChatSessionState["messages"] = [
        ...session.messages,
        { role: "user", content: request.user_message },
        { role: "assistant", content: full },
      ];
      const state: ChatSessionState = {
        ...session,
        message_count: saved.messageCount,
        messages: conversation.slice(-CONVERSATION_WINDOW_MESSAGES),
      };
      if (saved.previousCount !== null && saved.previousCount === saved.messageCount) {
        log.warn("message_count is at its largest value and no longer counts exchanges", { session_id: session.id, message_count: saved.messageCount });
      }
      if (saved.previousCount === null) {
        // Found saved by a retry: whether another exchange came in between cannot be told, so the entry is dropped.
        log.warn("exchange found saved on a retry; its cache entry is dropped", { session_id: session.id });
        await forgetSessionCache(session.id);
      } else if (saved.previousCount === session.message_count) {
        await refreshSessionCache(state);
        const leaving = messagesLeavingWindow(conversation, 2);
        if (leaving.length > 0) afterReply = (foldLock) => foldSummary(turn, state, leaving, foldLock);
      } else {
        // Another exchange was saved while this one was written (its lock had lapsed): this turn's
        // history lacks it, so the cache entry is dropped for the next turn to read the database.
        log.warn("session changed during the reply; its cache entry is dropped", { session_id: session.id });
        await forgetSessionCache(session.id);
      }

      outcome = "ok";
      yield { done: true, full_response: full, sources: retrieved.chunks.map((c) => ({ chunk_index: c.chunkIndex, score: c.score })) };
    } catch (error) {
      if (signal.aborted) return;
      log.error("chat turn failed", { session_id: turn.session.id, error });
      outcome = "502";
      yield { error: REPLY_FAILED, code: 502 };
    } finally {
      stopKeepAlive?.();
      if (afterReply) await handOver(turn.session.id, lock, afterReply);
      else await release(lock);
      // Logged and counted last: once the outcome shows, the session is free (or handed to the fold).
      const seconds = Math.round(performance.now() - turn.receivedAt) / 1000;
      log.info("chat turn", { session_id: turn.session.id, character_id: character.id, ...positioned, outcome: outcome ?? "aborted", seconds });
      deps.metrics.chat.requests.inc({ outcome: outcome ?? "aborted" });
    }
  }

  async function settle() {
    while (background.size > 0) await Promise.allSettled([...background]);
  }

  return { open, reply, settle };
}
