/** LLM port: chat completions (whole or streamed) and embeddings from an OpenAI-compatible gateway. */

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/**
 * What a call is for; labels token metrics and tells the offline provider which answer to compose.
 * `characters` is the LLM-based character discovery used for books BookNLP cannot read (Urdu).
 */
export type LlmPurpose = "rewrite" | "chat" | "summary" | "extract" | "persona" | "characters" | "embedding";

export interface CompletionOptions {
  purpose: LlmPurpose;
  temperature?: number;
  maxTokens?: number;
  /** Ask for a JSON object (response_format json_object). */
  json?: boolean;
  signal?: AbortSignal;
}

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
}

/** Told about the tokens every call used, when the provider reports them. */
export type UsageListener = (purpose: LlmPurpose, usage: TokenUsage) => void;

export interface LanguageModel {
  readonly provider: "openai-compatible" | "offline";
  complete(messages: readonly ChatMessage[], options: CompletionOptions): Promise<string>;
  /** Text deltas in order; aborting options.signal cancels the upstream request. */
  stream(messages: readonly ChatMessage[], options: CompletionOptions): AsyncIterable<string>;
  /** One vector per text, in the order given. */
  embed(texts: readonly string[], options?: { signal?: AbortSignal }): Promise<number[][]>;
}
