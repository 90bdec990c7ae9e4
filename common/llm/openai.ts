import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError, type ClientOptions } from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { z } from "zod";
import { UpstreamError, toUpstreamError, upstreamErrorFromResponse } from "../upstream.ts";
import type { ChatMessage, CompletionOptions, LanguageModel, UsageListener } from "./index.ts";
import { createSseDataDecoder } from "./sse-data.ts";

/**
 * LanguageModel over any OpenAI-compatible gateway (OpenAI, OpenRouter, vLLM, Ollama, LiteLLM).
 *
 * Failure policy: whole requests (complete, embed) go through the SDK, with its own timeout and
 * bounded retries. A stream is read with fetch (see `stream`) and never retried, not even its
 * opening: a reader is waiting on it, and three attempts of a gateway that never answers kept one in
 * silence for three minutes. `timeoutMs` bounds the wait for its headers, then each wait between
 * chunks.
 */

export const DEFAULT_LLM_TIMEOUT_MS = 60_000;
export const DEFAULT_LLM_MAX_RETRIES = 2;
export const DEFAULT_EMBED_BATCH_SIZE = 128;

export interface OpenAiLanguageModelOptions {
  /** Base URL ending in /v1, e.g. https://api.openai.com/v1. */
  baseURL: string;
  /** Sent as a bearer token; local gateways (Ollama, vLLM) need none. */
  apiKey?: string;
  chatModel: string;
  embedModel: string;
  fetch?: ClientOptions["fetch"];
  timeoutMs?: number;
  maxRetries?: number;
  embedBatchSize?: number;
  onUsage?: UsageListener;
}

const completionSchema = z.object({
  choices: z.array(z.object({ message: z.object({ content: z.string() }) })).min(1),
  usage: z.object({ prompt_tokens: z.number(), completion_tokens: z.number() }).nullish(),
});

const embeddingsSchema = z.object({
  data: z.array(z.object({ index: z.number().int().nonnegative(), embedding: z.union([z.string(), z.array(z.number())]) })),
  usage: z.object({ prompt_tokens: z.number() }).nullish(),
});

/**
 * Maps SDK errors by class. The checks run from most to least specific because the SDK's
 * abort, timeout and connection errors all extend APIError.
 */
function toLlmError(err: unknown, signal?: AbortSignal): UpstreamError {
  if (err instanceof UpstreamError) return err;
  if (err instanceof APIConnectionTimeoutError) return new UpstreamError("llm", "timeout", err.message, { cause: err });
  if (err instanceof APIUserAbortError) return new UpstreamError("llm", "aborted", err.message, { cause: err });
  if (err instanceof APIConnectionError) return new UpstreamError("llm", "connection", err.message, { cause: err });
  // An error event inside a stream arrives as an APIError without a status: the gateway spoke, so it is not a connection failure.
  if (err instanceof APIError) return new UpstreamError("llm", "http", err.message, { status: err.status, cause: err });
  return toUpstreamError("llm", err, signal);
}

function invalid(message: string, cause?: unknown): UpstreamError {
  return new UpstreamError("llm", "invalid_response", message, { cause });
}

/** OpenAI sends little-endian float32 bytes; DataView keeps that explicit and ignores buffer alignment. */
function decodeBase64Floats(encoded: string): number[] {
  const bytes = Buffer.from(encoded, "base64");
  if (bytes.length % 4 !== 0) throw invalid(`embedding of ${bytes.length} bytes is not a float32 array`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  return Array.from({ length: bytes.length / 4 }, (_, i) => view.getFloat32(i * 4, true));
}

/** One event of a streamed chat completion, as much of it as is read. */
interface StreamChunk {
  choices?: { delta?: { content?: unknown }; finish_reason?: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  error?: { message?: string };
}

function toSdkMessages(messages: readonly ChatMessage[]): ChatCompletionMessageParam[] {
  return messages.map((m) => ({ role: m.role, content: m.content }));
}

export function createOpenAiLanguageModel(options: OpenAiLanguageModelOptions): LanguageModel {
  const timeoutMs = options.timeoutMs ?? DEFAULT_LLM_TIMEOUT_MS;
  const batchSize = options.embedBatchSize ?? DEFAULT_EMBED_BATCH_SIZE;
  const onUsage = options.onUsage ?? (() => {});
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`embedBatchSize must be a positive integer, got ${batchSize}`);

  // Every setting is explicit so the SDK never falls back to OPENAI_* environment variables.
  const client = new OpenAI({
    baseURL: options.baseURL,
    apiKey: options.apiKey ?? "no-key",
    adminAPIKey: null,
    organization: null,
    project: null,
    webhookSecret: null,
    ...(options.apiKey ? {} : { defaultHeaders: { Authorization: null } }),
    timeout: timeoutMs,
    maxRetries: options.maxRetries ?? DEFAULT_LLM_MAX_RETRIES,
    logLevel: "off",
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });

  function requestBody(messages: readonly ChatMessage[], opts: CompletionOptions) {
    return {
      model: options.chatModel,
      messages: toSdkMessages(messages),
      ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
      ...(opts.maxTokens !== undefined ? { max_tokens: opts.maxTokens } : {}),
      ...(opts.json ? { response_format: { type: "json_object" as const } } : {}),
    };
  }

  async function complete(messages: readonly ChatMessage[], opts: CompletionOptions): Promise<string> {
    let raw: unknown;
    try {
      raw = await client.chat.completions.create({ ...requestBody(messages, opts), stream: false }, { signal: opts.signal ?? null });
    } catch (err) {
      throw toLlmError(err, opts.signal);
    }
    const parsed = completionSchema.safeParse(raw);
    if (!parsed.success) throw invalid("chat completion without message content", parsed.error);
    if (parsed.data.usage) {
      onUsage(opts.purpose, { promptTokens: parsed.data.usage.prompt_tokens, completionTokens: parsed.data.usage.completion_tokens });
    }
    return parsed.data.choices[0]!.message.content;
  }

  const completionsUrl = `${options.baseURL.replace(/\/+$/, "")}/chat/completions`;
  const streamHeaders: Record<string, string> = {
    "content-type": "application/json",
    accept: "text/event-stream",
    ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
  };
  const fetchStream = options.fetch ?? fetch;

  /**
   * A streamed reply, read with fetch and a small SSE decoder rather than the SDK: on the chat's hot
   * path the SDK's stream decoding was close to half of the API's CPU per exchange. `timeoutMs`
   * bounds the wait for the response headers, then each wait for the next piece of the stream.
   */
  async function* stream(messages: readonly ChatMessage[], opts: CompletionOptions): AsyncGenerator<string> {
    const controller = new AbortController();
    let timedOut = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const armTimer = () => {
      timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, timeoutMs);
    };
    const forwardAbort = () => controller.abort(opts.signal?.reason);
    if (opts.signal?.aborted) throw new UpstreamError("llm", "aborted", "aborted before the request was sent");
    opts.signal?.addEventListener("abort", forwardAbort, { once: true });

    const stopped = () =>
      timedOut ? new UpstreamError("llm", "timeout", `no stream data for ${timeoutMs} ms`) : new UpstreamError("llm", "aborted", "stream aborted by the caller");
    const failed = (err: unknown) => (controller.signal.aborted ? stopped() : toUpstreamError("llm", err));

    let finished = false;
    let reader: ReadableStreamDefaultReader<string> | undefined;
    try {
      armTimer();
      let res: Response;
      try {
        res = await fetchStream(completionsUrl, {
          method: "POST",
          headers: streamHeaders,
          body: JSON.stringify({ ...requestBody(messages, opts), stream: true, stream_options: { include_usage: true } }),
          signal: controller.signal,
        });
      } catch (err) {
        throw failed(err);
      } finally {
        clearTimeout(timer);
      }
      if (!res.ok) throw await upstreamErrorFromResponse("llm", res);
      if (!res.body) throw new UpstreamError("llm", "connection", "stream response without a body");
      reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      const decoder = createSseDataDecoder();
      let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
      for (;;) {
        // The clock runs only while waiting on the gateway, not while a slow consumer handles a delta.
        armTimer();
        let read: Awaited<ReturnType<typeof reader.read>>;
        try {
          read = await reader.read();
        } catch (err) {
          throw failed(err);
        } finally {
          clearTimeout(timer);
        }
        for (const payload of read.done ? decoder.end() : decoder.push(read.value)) {
          if (payload === "[DONE]") continue;
          let chunk: StreamChunk;
          try {
            chunk = JSON.parse(payload) as StreamChunk;
          } catch (err) {
            throw invalid("stream event is not JSON", err);
          }
          // An error event: the gateway spoke, so it is not a connection failure.
          if (chunk.error) throw new UpstreamError("llm", "http", chunk.error.message ?? "error event in the stream", { cause: chunk.error });
          if (chunk.usage) usage = chunk.usage;
          const choice = chunk.choices?.[0];
          if (choice?.finish_reason) finished = true;
          const delta = choice?.delta?.content;
          if (typeof delta === "string" && delta !== "") yield delta;
        }
        if (read.done) break;
      }
      if (controller.signal.aborted) throw stopped();
      if (!finished) throw new UpstreamError("llm", "connection", "stream ended before the model finished its reply");
      if (usage) onUsage(opts.purpose, { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens });
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", forwardAbort);
      // Reached early when the consumer stops iterating: cancel the upstream generation too.
      if (!finished) controller.abort();
      reader?.cancel().catch(() => {});
    }
  }

  async function embedBatch(texts: readonly string[], signal?: AbortSignal): Promise<number[][]> {
    let raw: unknown;
    try {
      // Asking for base64 explicitly makes the SDK hand back the raw payload, so gateways that
      // ignore encoding_format and answer plain floats are decoded correctly as well.
      raw = await client.embeddings.create(
        { model: options.embedModel, input: [...texts], encoding_format: "base64" },
        { signal: signal ?? null },
      );
    } catch (err) {
      throw toLlmError(err, signal);
    }
    const parsed = embeddingsSchema.safeParse(raw);
    if (!parsed.success) throw invalid("malformed embeddings response", parsed.error);
    const vectors: (number[] | undefined)[] = new Array(texts.length);
    for (const item of parsed.data.data) {
      if (item.index >= texts.length || vectors[item.index]) throw invalid(`embedding index ${item.index} is out of range or repeated`);
      vectors[item.index] = typeof item.embedding === "string" ? decodeBase64Floats(item.embedding) : item.embedding;
    }
    const missing = vectors.findIndex((v) => v === undefined);
    if (missing !== -1) throw invalid(`no embedding for input ${missing}`);
    if (parsed.data.usage) onUsage("embedding", { promptTokens: parsed.data.usage.prompt_tokens, completionTokens: 0 });
    return vectors as number[][];
  }

  async function embed(texts: readonly string[], opts: { signal?: AbortSignal } = {}): Promise<number[][]> {
    const vectors: number[][] = [];
    // Batches run one after another: ingestion is throughput-bound anyway and this stays clear of rate limits.
    for (let start = 0; start < texts.length; start += batchSize) {
      vectors.push(...(await embedBatch(texts.slice(start, start + batchSize), opts.signal)));
    }
    const dimension = vectors[0]?.length;
    if (vectors.some((v) => v.length !== dimension || v.length === 0)) throw invalid("embeddings differ in dimension");
    return vectors;
  }

  return { provider: "openai-compatible", complete, stream, embed };
}
