/**
 * The conversation as the chat-turn prompts quote it: the window of recent messages sent verbatim,
 * the messages cut to the history budget (newest kept) and neutralised, and the plain transcript the
 * rewrite and summary prompts show. Pure: no I/O.
 */
import type { ChatMessage } from "../llm/index.ts";
import { READER_LABEL } from "../llm/prompt-format.ts";
import { fitTokens, fitUncounted, MIN_PART_TOKENS, type PromptLimits, type PromptPurpose } from "./budget.ts";
import { neutraliseFences } from "./fences.ts";

/** Messages of history sent verbatim with a chat turn; older ones live on in the summary. */
export const CONVERSATION_WINDOW_MESSAGES = 10;

export type ConversationMessage = Pick<ChatMessage, "role" | "content">;

/**
 * Messages, oldest first, within the history budget: the newest are kept, each at most
 * `historyMessage` tokens (a longer one is cut), and once too little is left the older ones are left out.
 */
export function fitHistory(messages: readonly ConversationMessage[], limits: PromptLimits, purpose: PromptPurpose): ConversationMessage[] {
  const { budget, counter } = limits;
  if (fitUncounted(messages.map((m) => m.content), budget.historyMessage, budget.history)) {
    return messages.map(({ role, content }) => ({ role, content: neutraliseFences(content) }));
  }
  const kept: ConversationMessage[] = [];
  let left = budget.history;
  let cut = false;
  for (let i = messages.length - 1; i >= 0; i--) {
    const room = Math.min(budget.historyMessage, left);
    if (room < MIN_PART_TOKENS) break;
    const { role, content } = messages[i]!;
    const fitted = fitTokens(content, room, counter, true);
    cut ||= fitted.trimmed;
    kept.unshift({ role, content: neutraliseFences(fitted.text) });
    left -= fitted.tokens;
  }
  if (cut || kept.length < messages.length) {
    limits.onTrim?.({
      purpose,
      part: "history",
      chars: messages.reduce((n, m) => n + m.content.length, 0),
      keptChars: kept.reduce((n, m) => n + m.content.length, 0),
      budgetTokens: budget.history,
      dropped: messages.length - kept.length,
    });
  }
  return kept;
}

export function transcript(messages: readonly ConversationMessage[], characterName: string): string {
  return messages.map((m) => `${m.role === "assistant" ? characterName : READER_LABEL}: ${m.content}`).join("\n");
}

/**
 * The history after an exchange is saved, in the order the database keeps (and the frontend shows):
 * the exchange goes before the last `stampedAfter` messages, those a frontend stamped so far ahead of
 * the clock that they stay last (common/db/sessions.ts, appendExchange).
 */
export function withExchange<T>(history: readonly T[], exchange: readonly T[], stampedAfter: number): T[] {
  const at = Math.max(0, history.length - Math.max(0, stampedAfter));
  return [...history.slice(0, at), ...exchange, ...history.slice(at)];
}
