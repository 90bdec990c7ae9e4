/**
 * The offline provider: the LanguageModel used when no LLM gateway is configured, so the service
 * works end to end with no key and no network. It runs no model. Each answer is composed
 * deterministically (same messages, same answer; temperature is ignored) from the material in the
 * prompt, chosen by the call's purpose:
 *
 * - embedding: lexical vectors (hashed words and word pairs, see offline-text.ts), not semantic ones;
 * - rewrite: keyword query = the reader's message without function words, narrative query = the
 *   message plus the salient words of the recent turns;
 * - chat: the character's own lines closest to the reader's message (whole lines before ones cut
 *   mid-sentence), then an excerpt of the closest passage that does not repeat them;
 * - summary: an extractive summary of the old summary and the messages leaving the window;
 * - extract, persona, characters: counts and quotes from the book (offline-characters.ts), with
 *   "not stated" where only a model could tell.
 *
 * Answers are bounded by construction, so maxTokens is not applied (cutting a JSON answer would
 * only break it). Token usage is reported like a gateway's: o200k_base tokens of the message
 * contents (without the per-message overhead a chat model adds) and of the answer.
 */
import { countO200kTokens } from "../token-count.ts";
import {
  DISCOVERY_MARKER,
  DiscoveryInput,
  EXTRACTION_MARKER,
  ExtractionInput,
  PERSONA_MARKER,
  PersonaInput,
  readPayload,
} from "./prompt-format.ts";
import type { z } from "zod";
import { UpstreamError } from "../upstream.ts";
import type { ChatMessage, CompletionOptions, LanguageModel, LlmPurpose, UsageListener } from "./index.ts";
import { composeDiscovery, composePersona, composeProfile } from "./offline-characters.ts";
import { composeChatReply, composeRewrite, composeSummary } from "./offline-conversation.ts";
import { lexicalVector } from "./offline-text.ts";

export interface OfflineLanguageModelOptions {
  onUsage?: UsageListener;
}

/** A request the offline provider cannot answer: like a gateway's 400, retrying will not help. */
function unanswerable(purpose: LlmPurpose, why: string): UpstreamError {
  return new UpstreamError("llm", "http", `offline provider cannot answer a ${purpose} request: ${why}`, { status: 400 });
}

function payload<T>(messages: readonly ChatMessage[], marker: string, schema: z.ZodType<T>, purpose: LlmPurpose): T {
  const parsed = schema.safeParse(readPayload(messages, marker));
  if (!parsed.success) throw unanswerable(purpose, `no valid ${marker} payload in the last user message`);
  return parsed.data;
}

function compose(messages: readonly ChatMessage[], purpose: LlmPurpose): string {
  switch (purpose) {
    case "rewrite":
      return composeRewrite(messages);
    case "chat":
      return composeChatReply(messages);
    case "summary":
      return composeSummary(messages);
    case "extract":
      return JSON.stringify(composeProfile(payload(messages, EXTRACTION_MARKER, ExtractionInput, purpose)));
    case "persona":
      return composePersona(payload(messages, PERSONA_MARKER, PersonaInput, purpose));
    case "characters":
      return JSON.stringify(composeDiscovery(payload(messages, DISCOVERY_MARKER, DiscoveryInput, purpose)));
    case "embedding":
      throw unanswerable(purpose, "embeddings are requested with embed(), not as a completion");
  }
}

/** Word by word, each word with the whitespace after it (and the first with any before it), so the deltas join back to `text`. */
export function splitDeltas(text: string): string[] {
  return text.match(/^\s+|\S+\s*/g) ?? [];
}

function aborted(signal: AbortSignal | undefined, when: string): void {
  if (signal?.aborted) throw new UpstreamError("llm", "aborted", `offline provider: aborted ${when}`, { cause: signal.reason });
}

/** Lets pending events (a client hanging up) run between deltas, as a network stream would. */
const nextTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

export function createOfflineLanguageModel(options: OfflineLanguageModelOptions = {}): LanguageModel {
  const onUsage = options.onUsage ?? (() => {});
  const promptTokens = (messages: readonly ChatMessage[]) => messages.reduce((sum, m) => sum + countO200kTokens(m.content), 0);

  async function complete(messages: readonly ChatMessage[], opts: CompletionOptions): Promise<string> {
    aborted(opts.signal, "before the request was answered");
    const answer = compose(messages, opts.purpose);
    onUsage(opts.purpose, { promptTokens: promptTokens(messages), completionTokens: countO200kTokens(answer) });
    return answer;
  }

  async function* stream(messages: readonly ChatMessage[], opts: CompletionOptions): AsyncGenerator<string> {
    aborted(opts.signal, "before the request was sent");
    const answer = compose(messages, opts.purpose);
    for (const delta of splitDeltas(answer)) {
      await nextTurn();
      aborted(opts.signal, "mid-stream");
      yield delta;
    }
    onUsage(opts.purpose, { promptTokens: promptTokens(messages), completionTokens: countO200kTokens(answer) });
  }

  async function embed(texts: readonly string[], opts: { signal?: AbortSignal } = {}): Promise<number[][]> {
    aborted(opts.signal, "before embedding");
    const vectors = texts.map(lexicalVector);
    onUsage("embedding", { promptTokens: texts.reduce((sum, t) => sum + countO200kTokens(t), 0), completionTokens: 0 });
    return vectors;
  }

  return { provider: "offline", complete, stream, embed };
}
