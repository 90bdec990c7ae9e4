import type { Deps } from "../../common/deps-assembly.ts";
import { noSourcesReason } from "../../common/retrieval/no-sources.ts";
import { createChatCache, type ChatBook, type ChatCharacter, type ChatContext, type ChatSessionState, type PositionedEntries } from "./chat-cache.ts";
import type { Config } from "../../common/config.ts";
import { DEFAULT_CHAT_FIRST_TOKEN_TIMEOUT_MS } from "../../common/config-defaults.ts";
import type { Lock } from "../../common/kv/lock.ts";
import type { LogFields } from "../../common/log.ts";
import type { ChatOutcome } from "../../common/metrics/chat.ts";
import { buildChatMessages, buildChatSystemPrompt } from "../../common/prompt/chat.ts";
import { CONVERSATION_WINDOW_MESSAGES, withExchange } from "../../common/prompt/conversation.ts";
import { messagesLeavingWindow } from "../../common/prompt/summary.ts";
import { createTokenCounter, promptBudget, type PromptLimits } from "../../common/prompt/budget.ts";
import { createRetriever, type RetrievalResult } from "../../common/retrieval/retriever.ts";
import type { ChatEvent, ChatRequest } from "../../common/contract/schemas.ts";
import { NotFoundError, StoreUnavailableError } from "../service-errors.ts";
import { createBackground } from "./background.ts";
import { createKnowledge, type Reader } from "./knowledge.ts";
import { createRewriter, type EarlyRewriteRead, type Rewrite } from "./rewrite.ts";
import { createRewriteAhead, type RewriteAhead } from "./rewrite-ahead.ts";
import { refusal, SESSION_NOT_FOUND } from "./refusal.ts";
import { createExchangeSaver } from "./save.ts";
import { createSessionCacheUpkeep } from "./cache-upkeep.ts";
import { createSessionLocks, type HeldLock } from "./session-lock.ts";
import { createSpoilerGuards } from "./spoiler-guard-cache.ts";
import { createSummaryFold } from "./summary.ts";
import { closingAfter, type SpoilerGuard, type SpoilerKind } from "./spoiler-filter.ts";

/**
 * One chat turn, from the request body to the events of the reply. Knows nothing of HTTP: `open`
 * throws the services' errors (api/service-errors.ts) before anything is streamed, and `reply`
 * yields the events to send.
 *
 * Order of a turn, so that the first token comes at most one database and one key-value round trip
 * after the model's own calls, and on a guess that holds one key-value round trip: the session lock
 * and the cached context (with the reader's positioned entries) in one key-value command, beside the
 * reader's page in one database round trip → the query rewrite started on a guess as soon as the
 * key-value store answers (rewrite-ahead.ts) → session checks (404) → the session's history as of the
 * lock → the rewrite kept if the database agrees with the guess, else made again (cached) → hybrid
 * retrieval, the spoiler guard's data read meanwhile → streamed completion → the exchange saved in one
 * transaction → the session's entry, the rewrite's and the lock's release in one key-value round trip
 * → `done`.
 *
 * Everything that writes a session's history or summary holds a key: the turn holds the session lock
 * `chat:lock:{id}`, and the summary fold that runs after the reply holds `chat:fold:{id}`, taken
 * before the turn lets go of its lock. The next turn waits (briefly) for a fold to finish rather than
 * answering 429, then reads the history under its own lock, so it always builds on the latest
 * messages and summary. History read before the lock only decides the 404.
 *
 * The parts, one job each: knowledge.ts (what the character may know at the reader's position),
 * rewrite.ts, rewrite-ahead.ts, save.ts, summary.ts (the fold), session-lock.ts (the lock, its hand-over to the fold),
 * session-cache.ts, background.ts (work outliving the reply, store writes tried again).
 */

export interface ChatDeps extends Pick<Deps, "db" | "kv" | "llm" | "vectorIndex" | "textIndex" | "reranker" | "metrics" | "logger"> {
  /** The chat's settings; `sessionLockTtlSeconds` is the session lock's expiry (SPEC: 30 s when absent), renewed while a reply streams. */
  config?: Pick<Config, "chatFirstTokenTimeoutMs"> & Partial<Pick<Config, "chatContextTokens" | "chatReplyTokens" | "spoilerGuardCacheMb" | "sessionLockTtlSeconds">>;
}

export const SESSION_BUSY = "another reply is in progress for this session";
export const MODEL_FAILED = "the language model failed to reply";
export const SAVE_FAILED = "the reply could not be saved";
export const REPLY_FAILED = "the reply failed";

/** Everything `open` found, and the reads it started for `reply`. */
export interface ChatTurn {
  request: ChatRequest;
  character: ChatCharacter;
  book: ChatBook;
  /** As read with the lock's command: enough to decide the 404, not necessarily the latest history. */
  session: ChatSessionState;
  /** performance.now() when the request arrived: the start of time to first token. */
  receivedAt: number;
  /** The session lock, asked for as the request arrived. */
  held: Promise<HeldLock | "busy">;
  /** The reader's position and preferences, asked for as the request arrived. */
  reader: Promise<Reader>;
  /** The positioned entries read with the context (ChatContext.positioned). */
  positioned: PositionedEntries | null;
  /**
   * The session as the database had it when its cache entry was missing: its head read beside the
   * lock's command (a session with no messages yet), or the whole of it read once the command had run.
   */
  sessionFromDb: Promise<ChatSessionState | null> | undefined;
  /** What the rewrite's cache held, read with the context. */
  earlyRewrite: EarlyRewriteRead;
  /** The rewrite started on a guess as the key-value store answered (rewrite-ahead.ts). */
  ahead: Promise<RewriteAhead | null>;
}

export interface ChatService {
  /** Loads and checks the session, character and book; throws NotFoundError (or StoreUnavailableError when the database fails). */
  open(request: ChatRequest, receivedAt?: number): Promise<ChatTurn>;
  /**
   * The reply's events: tokens, then `done` (or one error event). Aborting `signal` (the client left)
   * cancels the model request, ends the events silently and saves nothing.
   */
  reply(turn: ChatTurn, signal: AbortSignal): AsyncGenerator<ChatEvent, void>;
  /** Resolves once the work started after replies (summary folds, rewrite cache writes) has finished. */
  settle(): Promise<void>;
  /** Resolves once the work started so far has finished, whatever starts later. */
  settleStarted(): Promise<void>;
}

export function createChatService(deps: ChatDeps): ChatService {
  const log = deps.logger.child({ component: "chat" });
  const { track, settle, settleStarted } = createBackground();

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
  let parts: ReturnType<typeof buildParts> | undefined;
  const use = () => (parts ??= buildParts());
  function buildParts() {
    const cache = createChatCache({ kv: deps.kv, db: deps.db, logger: log });
    const sessionCache = createSessionCacheUpkeep({ cache, track, log });
    const locks = createSessionLocks({ kv: deps.kv, cache, metrics: deps.metrics, log, track, ttlSeconds: deps.config?.sessionLockTtlSeconds });
    const knowledge = createKnowledge({ db: deps.db, cache, log });
    const rewriter = createRewriter({ kv: deps.kv, llm: deps.llm, log, limitsFor, track });
    return {
      cache,
      retriever: createRetriever({
        llm: deps.llm,
        vectorIndex: deps.vectorIndex,
        textIndex: deps.textIndex,
        reranker: deps.reranker,
        logger: log,
      }),
      ...knowledge,
      ...createSpoilerGuards({ db: deps.db, log, ...(deps.config ? { cacheMb: deps.config.spoilerGuardCacheMb } : {}) }),
      rewriteAhead: createRewriteAhead({ kv: deps.kv, rewriter, knowledgeFor: knowledge.knowledgeFor, log, track }),
      saveExchange: createExchangeSaver({ db: deps.db, log }),
      sessionCache,
      locks,
      foldSummary: createSummaryFold({ db: deps.db, llm: deps.llm, log, limitsFor, refreshSessionCache: sessionCache.refresh, release: locks.release }),
    };
  }

  async function open(request: ChatRequest, receivedAt = performance.now()): Promise<ChatTurn> {
    const { cache, locks, readerFor, rewriteAhead } = use();
    const ids = { characterId: request.character_id, sessionId: request.session_id, bookId: request.book_id };
    // Everything the turn reads before its model calls that depends only on the request starts now,
    // together: the lock and the cache reads are one key-value command (the reads run once the lock is
    // set, so what the database gives for a missing entry is read under the lock; a turn refused the
    // lock still learns whose session it is), the reader's page one database round trip beside it.
    // A request answered 404 lets the lock go at once.
    const taken = locks.take(request.session_id, cache.contextKeys(ids, rewriteAhead.keys(request)));
    const held = taken.then((t) => t.held);
    const reader = readerFor(request, request.book_id);
    const loaded = cache.load(ids, taken.then((t) => t.values), reader.then((r) => r.session, () => undefined));
    const ahead = taken.then(({ held, values }) => (held === "busy" || !values ? null : rewriteAhead.startFrom(request, cache.entries(values), held.read?.[1])));
    let context: ChatContext;
    try {
      context = await loaded;
    } catch (err) {
      abandon(held, reader, ahead, "the database failed");
      throw new StoreUnavailableError("database unavailable", { cause: err });
    }
    const { session, character, book } = context;
    const refused = refusal(request, context);
    if (refused !== undefined || !session || !character || !book) {
      abandon(held, reader, ahead, "the request is refused");
      deps.metrics.chat.requests.inc({ outcome: "404" });
      throw new NotFoundError(refused ?? SESSION_NOT_FOUND);
    }
    return {
      request,
      character,
      book,
      session,
      receivedAt,
      held,
      reader,
      positioned: context.positioned,
      sessionFromDb: context.sessionFromDb ? Promise.resolve(session) : undefined,
      earlyRewrite: rewriteAhead.earlyOf(context.alsoRead),
      ahead,
    };
  }

  /** What `open` started for a turn that will not reply: the lock goes back, a failed read is nobody's error. */
  function abandon(held: Promise<HeldLock | "busy">, reader: Promise<Reader>, ahead: Promise<RewriteAhead | null>, reason: string) {
    reader.catch(() => {});
    void ahead.then((a) => a?.abandon(reason));
    track(held.then((h) => (h === "busy" ? undefined : use().locks.release(h.lock))));
  }

  async function* reply(turn: ChatTurn, signal: AbortSignal): AsyncGenerator<ChatEvent, void> {
    /** The turn's last writes: the rewrite cached, renewals stopped, the lock released or handed to the fold. */
    const endTurn = (saved: boolean, afterReply?: (foldLock: Lock | null) => Promise<void>): Promise<void> => {
      rewritten?.remember?.(saved ? undefined : turn.session.id);
      stopKeepAlive?.();
      return afterReply ? use().locks.handOver(turn.session.id, lock, afterReply) : use().locks.release(lock);
    };
    const { request, character, book } = turn;
    const { retriever, knowledgeFor, positionOf, guardFor, rewriteAhead, saveExchange, sessionCache, locks, foldSummary } = use();
    let outcome: ChatOutcome | undefined;
    let lock: Lock | null = null;
    let stopKeepAlive: (() => void) | undefined;
    /** Set once the turn has let its lock go (or handed it to the fold). */
    let ended = false;
    let rewritten: Rewrite | undefined;
    /** For the turn's log line: how far the reader was and which knowledge of the character spoke. */
    let positioned: LogFields = {};
    /** Stops listening for the reader leaving, to cancel the rewrite made ahead. */
    let leave: (() => void) | undefined;
    try {
      const held = await turn.held;
      if (held === "busy") {
        outcome = "429";
        ended = true;
        turn.reader.catch(() => {});
        yield { error: SESSION_BUSY, code: 429 };
        return;
      }
      lock = held.lock;
      stopKeepAlive = locks.keepAlive(lock);

      // Awaited with the prompt; a failed read rejects `reader` itself, awaited first.
      const preferences = turn.reader.then((r) => r.preferences, () => null);
      const session = await locks.latestSession(turn.session.id, signal, held.read, turn.sessionFromDb);
      if (!session) throw new Error("the session was deleted before the reply");
      const rewriting = rewriteAhead.forTurn(await turn.ahead, { character, userMessage: request.user_message, session, early: turn.earlyRewrite }, signal);
      leave = rewriting.release;
      const knowledge = await knowledgeFor(character, book, await positionOf(request, turn.reader), request.user_message, turn.positioned);
      if (knowledge.position !== null) positioned = { reading_position: knowledge.position, knowledge: knowledge.tag ?? "whole-book" };
      let guard: SpoilerGuard | null;
      [rewritten, guard] = await Promise.all([rewriting.rewrite(knowledge), guardFor(book.id, character.id, knowledge.position)]);
      const { queries } = rewritten;
      // A reader who has not finished the first chunk may be shown no passage: nothing to search for.
      const retrieved: RetrievalResult =
        knowledge.maxChunkIndex === -1
          ? { chunks: [], rankedBy: "fusion", degraded: [], loading: [] }
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
        ownLines: knowledge.ownLines,
      }, limitsFor(session.id));

      let full = "";
      /** Set when the spoiler guard ended the reply. */
      let stopped: SpoilerKind | undefined;
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
        let started = false;
        for await (const delta of deltas) {
          if (!started) {
            started = true;
            clearTimeout(firstTokenTimer);
            deps.metrics.chat.timeToFirstToken.observe((performance.now() - turn.receivedAt) / 1000);
          }
          const step = guard ? guard.push(delta) : { forward: delta };
          if (step.forward) {
            full += step.forward;
            yield { token: step.forward };
          }
          if (step.stop) {
            stopped = step.stop;
            break;
          }
        }
        const last = guard && !stopped ? guard.end() : undefined;
        if (last?.forward) {
          full += last.forward;
          yield { token: last.forward };
        }
        stopped ??= last?.stop;
        if (stopped) {
          // The model is not read further; the reply ends in the character's voice, and only what was
          // sent and the closing are saved. The log says where, never the words held back.
          completion.abort(new Error("stopped by the spoiler guard"));
          const closing = closingAfter(full);
          full += closing;
          yield { token: closing };
          deps.metrics.chat.spoilerStops.inc({ kind: stopped });
          log.warn("reply stopped by the spoiler guard", { session_id: session.id, book_id: book.id, character_id: character.id, kind: stopped, reading_position: knowledge.position, sent_chars: full.length - closing.length });
        }
      } catch (error) {
        if (signal.aborted) return;
        const late = full === "" && completion.signal.aborted && !stopped;
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
      const conversation: ChatSessionState["messages"] = withExchange(
        session.messages,
        [
          { role: "user", content: request.user_message },
          { role: "assistant", content: full },
        ],
        saved.stampedAfter,
      );
      const state: ChatSessionState = {
        ...session,
        message_count: saved.messageCount,
        messages: conversation.slice(-CONVERSATION_WINDOW_MESSAGES),
      };
      if (saved.previousCount !== null && saved.previousCount === saved.messageCount) {
        log.warn("message_count is at its largest value and no longer counts exchanges", { session_id: session.id, message_count: saved.messageCount });
      }
      const { current, written } = sessionCache.afterSave(session.id, session.message_count, saved, state);
      const leaving = current ? messagesLeavingWindow(conversation, 2) : [];
      const afterReply = leaving.length > 0 ? (foldLock: Lock | null) => foldSummary(character.name, state, leaving, foldLock) : undefined;
      // The session's entry, the reader's page, the rewrite's, the fold key and the lock's release go out in one tick: the
      // store runs them in this order in one round trip, so the next turn finds the entry written and
      // the lock free by the time the reader has `done`. (Should the entry's write fail after the
      // release landed, the next turn reads the older history; its save then finds the count moved
      // and drops the entry, in afterSave.)
      ended = true;
      rewriteAhead.rememberPage(request, knowledge.position);
      await Promise.all([written, endTurn(true, afterReply)]);

      outcome = "ok";
      const missing = noSourcesReason(knowledge.maxChunkIndex, retrieved);
      if (missing) {
        const fields = { session_id: session.id, book_id: book.id, reason: missing, degraded: retrieved.degraded.join(",") };
        if (missing === "index_loading" || missing === "search_failed") log.warn("reply has no passages of the book", fields);
        else log.info("reply has no passages of the book", fields);
      }
      yield {
        done: true,
        full_response: full,
        sources: retrieved.chunks.map((c) => ({ chunk_index: c.chunkIndex, score: c.score })),
        ...(missing ? { sources_missing: missing } : {}),
      };
    } catch (error) {
      if (signal.aborted) return;
      log.error("chat turn failed", { session_id: turn.session.id, error });
      outcome = "502";
      yield { error: REPLY_FAILED, code: 502 };
    } finally {
      leave?.();
      if (!ended) await endTurn(false);
      // Logged and counted last: once the outcome shows, the session is free (or handed to the fold).
      const seconds = Math.round(performance.now() - turn.receivedAt) / 1000;
      log.info("chat turn", { session_id: turn.session.id, character_id: character.id, ...positioned, outcome: outcome ?? "aborted", seconds });
      deps.metrics.chat.requests.inc({ outcome: outcome ?? "aborted" });
    }
  }

  return { open, reply, settle, settleStarted };
}
