import type { ChatCharacter, ChatSessionState } from "./chat-cache.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import type { Logger } from "../../common/log.ts";
import { buildRewriteMessages, parseRewrite, rewriteCacheKey, type RewrittenQueries } from "../../common/prompt/rewrite.ts";
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

/** The reader's message rewritten into a narrative and a keyword query for retrieval, cached per character, history and knowledge. */
export function createRewriter(deps: RewriterDeps) {
  const { log } = deps;

  return async function rewrite(
    character: Pick<ChatCharacter, "id" | "name">,
    userMessage: string,
    session: ChatSessionState,
    knowledge: Pick<Knowledge, "profile" | "description" | "tag">,
    signal: AbortSignal,
  ): Promise<RewrittenQueries> {
    const key = rewriteCacheKey(character.id, userMessage, session.messages, knowledge.tag);
    const cached = await deps.kv.get(key).catch((error: unknown) => {
      log.warn("rewrite cache unavailable", { error });
      return null;
    });
    const hit = parseRewrite(cached, userMessage);
    if (!hit.fellBack) return hit;

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
      return queries;
    }
    const value = JSON.stringify({ narrative_query: queries.narrativeQuery, keyword_query: queries.keywordQuery });
    deps.track(
      deps.kv.set(key, value, { ex: REWRITE_CACHE_TTL_SECONDS }).catch((error: unknown) => log.warn("rewrite cache write failed", { error })),
    );
    return queries;
  };
}
