import { Counter, type Registry } from "./prom.ts";
import type { LlmPurpose } from "../llm/index.ts";

/** LLM token use, on both processes. */

export interface LlmMetrics {
  tokens: Counter<"purpose" | "type">;
}

export function createLlmMetrics(both: Registry[]): LlmMetrics {
  return {
    tokens: new Counter({
      name: "llm_tokens_total",
      help: "LLM tokens used, by purpose (rewrite, chat, summary, extract, persona, characters, embedding) and type (prompt, completion).",
      labelNames: ["purpose", "type"],
      registers: both,
    }),
  };
}

/** The UsageListener the composition root hands to the LLM adapter. */
export function countTokens(metrics: { llm: LlmMetrics }, purpose: LlmPurpose, prompt: number, completion: number): void {
  if (prompt > 0) metrics.llm.tokens.inc({ purpose, type: "prompt" }, prompt);
  if (completion > 0) metrics.llm.tokens.inc({ purpose, type: "completion" }, completion);
}
