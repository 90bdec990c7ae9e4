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

/**
 * A rewrite, and (when the model made it) `remember`, which caches it: called by the turn with its
 * other writes at the end, so that they share one round trip.
 */
export interface Rewrite {
  queries: RewrittenQueries;
  remember?: () => void;
}

/** What chat:qr held for a message and history, read as soon as the history was known (`lookup`). */
export interface RewriteLookup {
  key: string;
  value: Promise<string | null>;
}

/**
 * The reader's message rewritten into a narrative and a keyword query for retrieval, cached per
 * character, history and knowledge. The cache is read (`lookup`) as soon as the history is known,
 * before the reader's position decides which knowledge applies, so that the read overlaps the others.
 */
export function createRewriter(deps: RewriterDeps) {
  const { log } = deps;

  /** `value`: the entry when the caller has read it already (with other keys, in one round trip). */
  function lookup(characterId: string, userMessage: string, history: ChatSessionState["messages"], value?: string | null): RewriteLookup {
    const key = rewriteCacheKey(characterId, userMessage, history);
    if (value !== undefined) return { key, value: Promise.resolve(value) };
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
    session: ChatSessionState,
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
    const remember = () =>
      deps.track(deps.kv.set(looked.key, value, { ex: REWRITE_CACHE_TTL_SECONDS }).catch((error: unknown) => log.warn("rewrite cache write failed", { error })));
    return { queries, remember };
  }

  return { lookup, rewrite };
}
