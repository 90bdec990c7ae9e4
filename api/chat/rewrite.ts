import type { ChatCharacter, ChatSessionState } from "./chat-cache.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import type { Logger } from "../../common/log.ts";
import { buildRewriteMessages, cachedRewrite, parseRewrite, rewriteCacheKey, withCachedRewrite, type RewrittenQueries } from "../../common/prompt/rewrite.ts";
import type { PromptLimits } from "../../common/prompt/budget.ts";
import type { Track } from "./background.ts";
import type { Knowledge } from "./knowledge.ts";

export const REWRITE_TEMPERATURE = 0;
export const REWRITE_MAX_TOKENS = 200;
/** The rewrite only sharpens retrieval: past this, the turn goes on with the reader's own words. */
export const REWRITE_TIMEOUT_MS = 10_000;
export const REWRITE_CACHE_TTL_SECONDS = 3600;

export interface RewriterDeps {
  kv: KeyValueStore;
  llm: LanguageModel;
  log: Logger;
  limitsFor: (sessionId: string) => PromptLimits;
  track: Track;
}

/** Holds the chat:qr key a turn of this session cached without its exchange being saved. */
export const unsavedRewriteKey = (sessionId: string) => `chat:retry:${sessionId}`;

/**
 * A rewrite, and (when the model made it) `remember`, which caches it: called by the turn with its
 * other writes at the end, so that they share one round trip; with the session's id when the
 * turn's exchange was not saved, so that the message sent again finds it (EarlyRewriteRead).
 */
export interface Rewrite {
  queries: RewrittenQueries;
  remember?: (unsavedSessionId?: string) => void;
}

/** What chat:qr held for a message and history, read as soon as the history was known (`lookup`). */
export interface RewriteLookup {
  key: string;
  value: Promise<string | null>;
}

/**
 * What the turn's first command read for the rewrite's cache (`earlyKeys`): chat:qr for the message
 * with no history (a first turn's), and the key in unsavedRewriteKey; undefined when the store failed.
 */
export interface EarlyRewriteRead {
  first: string | null | undefined;
  unsaved: string | null | undefined;
}

/**
 * The reader's message rewritten into a narrative and a keyword query for retrieval, cached per
 * character, history and knowledge. The cache is read (`lookup`) as soon as the history is known,
 * before the reader's position decides which knowledge applies, so that the read overlaps the others.
 *
 * A follow-up's key covers the conversation's last messages, which every saved exchange moves on: an
 * entry for it exists only when a turn of this session asked the same at the same point and ended
 * without saving its exchange (the reader sends the message again after an error). Such a turn
 * leaves that key under unsavedRewriteKey, read with the session lock; every other follow-up is
 * spared a round trip that could only miss.
 */
export function createRewriter(deps: RewriterDeps) {
  const { log } = deps;

  /** The keys the turn reads with the session lock, for EarlyRewriteRead, in its order. */
  const earlyKeys = (characterId: string, sessionId: string, userMessage: string) => [rewriteCacheKey(characterId, userMessage, []), unsavedRewriteKey(sessionId)];

  function lookup(characterId: string, userMessage: string, history: ChatSessionState["messages"], early?: EarlyRewriteRead): RewriteLookup {
    const key = rewriteCacheKey(characterId, userMessage, history);
    const known = history.length === 0 ? early?.first : early?.unsaved === undefined || early.unsaved === key ? undefined : null;
    if (known !== undefined) return { key, value: Promise.resolve(known) };
    return {
      key,
      value: deps.kv.get(key).catch((error: unknown) => {
        log.warn("rewrite cache unavailable", { error });
        return null;
      }),
    };
  }

  async function rewrite(
    character: Pick<ChatCharacter, "id" | "name">,
    userMessage: string,
    session: Pick<ChatSessionState, "id" | "messages">,
    knowledge: Pick<Knowledge, "profile" | "description" | "tag">,
    signal: AbortSignal,
    looked: RewriteLookup = lookup(character.id, userMessage, session.messages),
  ): Promise<Rewrite> {
    const cached = await looked.value;
    const hit = cachedRewrite(cached, knowledge.tag, userMessage);
    if (!hit.fellBack) return { queries: hit };

    let answer: string | null = null;
    try {
      answer = await deps.llm.complete(
        buildRewriteMessages({
          character: { name: character.name, profile: knowledge.profile, description: knowledge.description },
          userMessage,
          history: session.messages,
        }, deps.limitsFor(session.id)),
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
    const queries = parseRewrite(answer, userMessage);
    if (queries.fellBack) {
      if (answer !== null) log.warn("query rewrite answer unusable, searching with the reader's message", { session_id: session.id });
      return { queries };
    }
    // Beside the rewrites of this message made from other knowledge, as they were read.
    const value = withCachedRewrite(cached, knowledge.tag, queries);
    const write = (key: string, text: string) =>
      deps.track(deps.kv.set(key, text, { ex: REWRITE_CACHE_TTL_SECONDS }).catch((error: unknown) => log.warn("rewrite cache write failed", { key, error })));
    const remember = (unsavedSessionId?: string) => {
      write(looked.key, value);
      if (unsavedSessionId) write(unsavedRewriteKey(unsavedSessionId), looked.key);
    };
    return { queries, remember };
  }

  return { earlyKeys, lookup, rewrite };
}
