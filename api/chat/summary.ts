import type { ChatSessionState } from "./chat-cache.ts";
import type { Database } from "../../common/db/index.ts";
import { setSessionSummary } from "../../common/db/sessions.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import type { Lock } from "../../common/kv/lock.ts";
import type { Logger } from "../../common/log.ts";
import { buildSummaryMessages } from "../../common/prompt/summary.ts";
import type { ConversationMessage } from "../../common/prompt/conversation.ts";
import type { PromptLimits } from "../../common/prompt/budget.ts";

export const SUMMARY_MAX_TOKENS = 300;
export const SUMMARY_TIMEOUT_MS = 10_000;

export interface SummaryFoldDeps {
  db: Database;
  llm: LanguageModel;
  log: Logger;
  limitsFor: (sessionId: string) => PromptLimits;
  /** Writes the session's cache entry, or drops it. */
  refreshSessionCache: (state: ChatSessionState) => Promise<void>;
  /** Lets go of the fold key (api/chat/session-lock.ts). */
  release: (lock: Lock | null) => Promise<void>;
}

/** The summary fold that runs after a reply whose exchange pushed messages out of the conversation window. */
export function createSummaryFold(deps: SummaryFoldDeps) {
  /** Folds the messages that left the window into the summary; a failure keeps the old one. Releases the fold key. */
  return async function foldSummary(characterName: string, state: ChatSessionState, leaving: ConversationMessage[], lock: Lock | null) {
    try {
      const text = await deps.llm.complete(
        buildSummaryMessages({ characterName, previousSummary: state.summary, leaving }, deps.limitsFor(state.id)),
        { purpose: "summary", temperature: 0, maxTokens: SUMMARY_MAX_TOKENS, signal: AbortSignal.timeout(SUMMARY_TIMEOUT_MS) },
      );
      const summary = text.trim();
      if (!summary) throw new Error("the model returned an empty summary");
      await setSessionSummary(deps.db, state.id, summary);
      await deps.refreshSessionCache({ ...state, summary });
    } catch (error) {
      deps.log.warn("summary fold failed, keeping the previous summary", { session_id: state.id, error });
    } finally {
      await deps.release(lock);
    }
  };
}
