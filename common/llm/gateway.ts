import { z } from "zod";
import { UpstreamError, requestJson, toUpstreamError, upstreamErrorFromResponse, withRetries } from "../upstream.ts";
import type { ChatMessage, CompletionOptions, LanguageModel, UsageListener } from "./index.ts";
import { createSseDataDecoder } from "../sse-data.ts";

/**
 * LanguageModel over any OpenAI-compatible gateway (OpenAI, OpenRouter, vLLM, Ollama, LiteLLM), spoken
 * to with fetch: the openai SDK's layers (header building, its own stream decoder) were a large share
 * of the API's CPU per chat exchange, and the three calls need little of what it offers.
 *
 * Failure policy: whole requests (complete, embed) have a timeout per attempt and bounded retries
 * (timeouts, dropped connections, 408/409/429 and 5xx, after the gateway's Retry-After when it sends
 * one, as the SDK did). A stream is never retried, not even its opening: a reader is waiting on it,
 * and three attempts of a gateway that never answers kept one in silence for three minutes.
 * `timeoutMs` bounds the wait for its headers, then each wait between chunks.
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
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
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

export function createOpenAiLanguageModel(options: OpenAiLanguageModelOptions): LanguageModel {
  const timeoutMs = options.timeoutMs ?? DEFAULT_LLM_TIMEOUT_MS;
  const batchSize = options.embedBatchSize ?? DEFAULT_EMBED_BATCH_SIZE;
  const onUsage = options.onUsage ?? (() => {});
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`embedBatchSize must be a positive integer, got ${batchSize}`);

  const root = options.baseURL.replace(/\/+$/, "");
  const completionsUrl = `${root}/chat/completions`;
  const embeddingsUrl = `${root}/embeddings`;
  const jsonHeaders: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json",
    ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
  };
  const streamHeaders = { ...jsonHeaders, accept: "text/event-stream" };
  const doFetch = options.fetch ?? fetch;
  const maxRetries = options.maxRetries ?? DEFAULT_LLM_MAX_RETRIES;

  /** A whole request: each attempt bounded by timeoutMs, retried as the failure policy says. */
  function post(url: string, body: unknown, signal: AbortSignal | undefined): Promise<unknown> {
    const text = JSON.stringify(body);
    return withRetries(() => requestJson("llm", url, { headers: jsonHeaders, body: text, timeoutMs, fetch: doFetch, ...(signal ? { signal } : {}) }), {
      maxRetries,
      ...(signal ? { signal } : {}),
    });
  }

  function requestBody(messages: readonly ChatMessage[], opts: CompletionOptions) {
    return {
      model: options.chatModel,
      messages: messages.map((m) => ({ role: m.role, content: m.content })),
      ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
      ...(opts.maxTokens !== undefined ? { max_tokens: opts.maxTokens } : {}),
      ...(opts.json ? { response_format: { type: "json_object" as const } } : {}),
    };
  }

  async function complete(messages: readonly ChatMessage[], opts: CompletionOptions): Promise<string> {
    const raw = await post(completionsUrl, requestBody(messages, opts), opts.signal);
    const parsed = completionSchema.safeParse(raw);
    if (!parsed.success) throw invalid("chat completion without message content", parsed.error);
    if (parsed.data.usage) {
      onUsage(opts.purpose, { promptTokens: parsed.data.usage.prompt_tokens, completionTokens: parsed.data.usage.completion_tokens });
    }
    return parsed.data.choices[0]!.message.content;
  }

  /**
   * A streamed reply, read with a small SSE decoder: on the chat's hot path the SDK's stream decoding
   * was close to half of the API's CPU per exchange. `timeoutMs`
   * bounds the wait for the response headers, then each wait for the next piece of the stream.
   */
  async function* stream(messages: readonly ChatMessage[], opts: CompletionOptions): AsyncGenerator<string> {
    const controller = new AbortController();
    let timedOut = false;
    // One lazy timer rather than one set and cleared around every read (a tenth of the API's CPU per
    // token): a wait records when it began, and the timer, when it fires, either finds the current
    // wait past timeoutMs or sets itself again for what the wait has left.
    let waitingSince: number | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const check = () => {
      const waited = waitingSince === undefined ? 0 : performance.now() - waitingSince;
      if (waited >= timeoutMs) {
        timedOut = true;
        controller.abort();
      } else timer = setTimeout(check, timeoutMs - waited);
    };
    const forwardAbort = () => controller.abort(opts.signal?.reason);
    if (opts.signal?.aborted) throw new UpstreamError("llm", "aborted", "aborted before the request was sent");
    opts.signal?.addEventListener("abort", forwardAbort, { once: true });

    const stopped = () =>
      timedOut ? new UpstreamError("llm", "timeout", `no stream data for ${timeoutMs} ms`) : new UpstreamError("llm", "aborted", "stream aborted by the caller");
    const failed = (err: unknown) => (controller.signal.aborted ? stopped() : toUpstreamError("llm", err));

    let finished = false;
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    try {
      waitingSince = performance.now();
      timer = setTimeout(check, timeoutMs);
      let res: Response;
      try {
        res = await doFetch(completionsUrl, {
          method: "POST",
          headers: streamHeaders,
          body: JSON.stringify({ ...requestBody(messages, opts), stream: true, stream_options: { include_usage: true } }),
          signal: controller.signal,
        });
      } catch (err) {
        throw failed(err);
      } finally {
        waitingSince = undefined;
      }
      if (!res.ok) throw await upstreamErrorFromResponse("llm", res);
      if (!res.body) throw new UpstreamError("llm", "connection", "stream response without a body");
      reader = res.body.getReader();
      // Decoded here rather than through a TextDecoderStream: one stream fewer on every chunk.
      const text = new TextDecoder();
      const decoder = createSseDataDecoder({ atEnd: "dispatch" });
      let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
      for (;;) {
        // The clock runs only while waiting on the gateway, not while a slow consumer handles a delta.
        waitingSince = performance.now();
        let read: Awaited<ReturnType<typeof reader.read>>;
        try {
          read = await reader.read();
        } catch (err) {
          throw failed(err);
        } finally {
          waitingSince = undefined;
        }
        const payloads = read.done ? [...decoder.push(text.decode()), ...decoder.end()] : decoder.push(text.decode(read.value, { stream: true }));
        for (const payload of payloads) {
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
    // base64 is a quarter of the bytes of JSON floats; gateways that ignore encoding_format and
    // answer plain floats are decoded correctly as well.
    const raw = await post(embeddingsUrl, { model: options.embedModel, input: texts, encoding_format: "base64" }, signal);
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
