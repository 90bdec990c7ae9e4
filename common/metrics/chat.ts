import { Counter, Histogram, type Registry } from "./prom.ts";

/** The chat metrics of SPEC's catalogue (SPEC: POST /character/chat, Metric catalogue), on the API, and ours beside them. */

export const CHAT_OUTCOMES = ["ok", "404", "429", "502", "aborted"] as const;
export type ChatOutcome = (typeof CHAT_OUTCOMES)[number];

const TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10];

export interface ChatMetrics {
  requests: Counter<"outcome">;
  timeToFirstToken: Histogram;
  lockUnavailable: Counter;
  /** Prompt parts cut (or messages and passages left out) to fit the context budget (common/prompt/budget.ts). */
  promptTrims: Counter<"purpose" | "part">;
  /** Replies stopped by the spoiler guard (api/chat/spoiler-filter.ts), by what it found: a late name or passage. */
  spoilerStops: Counter<"kind">;
}

export function createChatMetrics(api: Registry[]): ChatMetrics {
  return {
    requests: new Counter({
      name: "chat_requests_total",
      help: "Chat requests by outcome (ok, 404, 429, 502, aborted).",
      labelNames: ["outcome"],
      registers: api,
    }),
    timeToFirstToken: new Histogram({
      name: "chat_time_to_first_token_seconds",
      help: "From request received to first token sent.",
      buckets: TTFT_BUCKETS,
      registers: api,
    }),
    lockUnavailable: new Counter({
      name: "chat_lock_unavailable_total",
      help: "Chats that proceeded without the session lock because the key-value store failed.",
      registers: api,
    }),
    promptTrims: new Counter({
      name: "chat_prompt_trims_total",
      help: "Prompt parts cut, or history messages and passages left out, to fit the context budget, by request purpose (chat, rewrite, summary) and part (persona, preferences, passages, summary, history, user_message).",
      labelNames: ["purpose", "part"],
      registers: api,
    }),
    spoilerStops: new Counter({
      name: "chat_spoiler_stops_total",
      help: "Chat replies stopped by the spoiler guard before a name (kind=name) or an 8-word passage (kind=passage) the reader has not reached.",
      labelNames: ["kind"],
      registers: api,
    }),
  };
}
