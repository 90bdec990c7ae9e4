/**
 * A loopback OpenAI-compatible gateway for tests. It speaks the real wire format, so the `openai`
 * SDK (and anything else that talks to OpenAI) runs against it unmodified:
 *
 *   POST /v1/chat/completions  whole (`chat.completion`) or streamed (SSE `chat.completion.chunk`
 *                              lines: a role chunk, content deltas, a finish_reason chunk, a usage
 *                              chunk when stream_options.include_usage, then `data: [DONE]`)
 *   POST /v1/embeddings        `encoding_format` base64 (little-endian float32) or float
 *
 * Usage:
 *
 *   const gateway = startFakeLlmGateway({ embeddingDimension: 8 });
 *   const llm = createOpenAiLanguageModel({ baseURL: gateway.baseURL, ... });
 *   gateway.onChat((req) => ({ content: '{"name":"Alice"}' }));          // script the next replies
 *   gateway.onChat((req, call) => (call === 0 ? { status: 500 } : { chunks: ["Hel", "lo"] }));
 *   gateway.onEmbeddings(() => ({ shuffle: true }));                      // data[] out of order
 *   gateway.chatRequests()[0]!.body                                       // what the client sent
 *   await gateway.waitForAbort();                                         // the client hung up
 *   gateway.reset(); gateway.stop();
 *
 * Every handler returns one behaviour:
 *   - a reply (ChatReply / EmbeddingsReply; every field optional, defaults are deterministic),
 *   - `{ status, message? }`: an OpenAI-shaped error body with that HTTP status,
 *   - `{ hang: true }`: never answer (for timeouts); released when the client gives up,
 *   - `{ raw, status?, contentType? }`: exactly this body (for malformed responses).
 *
 * Whole requests can be slowed gateway-wide (`chatLatencyMs`, `embeddingsLatencyMs`: a pause before
 * answering, as a real model's latency). Streamed replies can also be slowed per chunk
 * (`tokenDelayMs`, or the gateway-wide option), cut (`dropAfterChunks`: the connection closes
 * mid-body) or failed in-band (`errorEventAfterChunks`: an OpenAI error event, then the end of the
 * stream).
 *
 * Defaults: chat replies are "Echo: <last user message>" (JSON mode: {"echo": <last user message>}),
 * streamed word by word; usage counts words. Embeddings come from
 * `fakeEmbedding`: hashed bag of words, so texts sharing words are close under cosine, which makes
 * retrieval over them meaningful. Error replies carry `retry-after-ms: 0` so that client retries
 * do not sleep; set `retryAfterMs` to change it.
 *
 * Every request is recorded (method, path, lower-cased headers, parsed body) with `aborted` set
 * when the client disconnected before the response was complete.
 */

import { z } from "zod";
import { fnv1a } from "../../common/hash.ts";

export const DEFAULT_FAKE_EMBEDDING_DIMENSION = 16;

// ---------------------------------------------------------------------------------------------
// Shared loopback machinery (the fake reranker uses it too)

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: unknown;
  /** The client went away before the response was complete. */
  aborted: boolean;
}

export interface ErrorReply {
  status: number;
  message?: string;
  type?: string;
  /** Sent as `retry-after-ms`; 0 unless set, so client retries do not sleep. */
  retryAfterMs?: number;
}

export interface HangReply {
  hang: true;
}

export interface RawReply {
  /** Sent as is; objects are JSON-encoded. */
  raw: string | object;
  status?: number;
  contentType?: string;
}

export type FailureReply = ErrorReply | HangReply | RawReply;

export interface RouteContext {
  record: RecordedRequest;
  /** Aborted when the client disconnects or the server stops. */
  signal: AbortSignal;
  /**
   * A streamed body, flushed piece by piece. The request counts as complete once the generator
   * returns; returning "drop" then cuts the connection without finishing the response.
   */
  stream(body: () => AsyncGenerator<string, StreamEnding>, headers: Record<string, string>): Response;
}

export type StreamEnding = void | "drop";

/** How long a deliberate drop waits for flushed bytes to leave the process. */
const DROP_GRACE_MS = 10;

export type Route = (ctx: RouteContext) => Response | Promise<Response>;

export interface LoopbackServer {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** Requests to one path, in arrival order. */
  requestsTo(path: string): RecordedRequest[];
  /** Resolves once `count` requests in total have been aborted by the client. */
  waitForAbort(count?: number): Promise<void>;
  /** Forgets recorded requests. */
  clearRequests(): void;
  stop(): void;
}

/**
 * Bun.serve on an ephemeral loopback port that records requests and notices client aborts.
 * `routes` maps a path to its handler; other paths get a 404 in OpenAI's error shape. With an
 * `apiKey`, requests without `Authorization: Bearer <apiKey>` get a 401.
 */
export function startLoopbackServer(routes: Record<string, Route>, options: { apiKey?: string } = {}): LoopbackServer {
  const requests: RecordedRequest[] = [];
  const stopping = new AbortController();
  let abortWaiters: { count: number; resolve: () => void }[] = [];
  const abortedCount = () => requests.filter((r) => r.aborted).length;
  const notifyAbort = () => {
    const n = abortedCount();
    abortWaiters = abortWaiters.filter((w) => (n >= w.count ? (w.resolve(), false) : true));
  };

  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    // Production mode keeps Bun from printing the deliberate errors that drop a streamed connection.
    development: false,
    error: () => new Response("internal error", { status: 500 }),
    async fetch(request) {
      const path = new URL(request.url).pathname;
      const text = await request.text();
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        // recorded as the raw text; routes answer 400
      }
      const record: RecordedRequest = { method: request.method, path, headers: Object.fromEntries(request.headers), body, aborted: false };
      requests.push(record);
      let complete = false;
      request.signal.addEventListener("abort", () => {
        if (complete) return;
        record.aborted = true;
        notifyAbort();
      });
      const signal = AbortSignal.any([request.signal, stopping.signal]);

      const answered = (response: Response) => {
        complete = true;
        return response;
      };
      if (options.apiKey !== undefined && request.headers.get("authorization") !== `Bearer ${options.apiKey}`) {
        return answered(errorResponse({ status: 401, message: "Incorrect API key provided.", type: "invalid_request_error" }));
      }
      const route = request.method === "POST" ? routes[path] : undefined;
      if (!route) return answered(errorResponse({ status: 404, message: `Unknown route ${request.method} ${path}` }));
      if (typeof body !== "object" || body === null) {
        return answered(errorResponse({ status: 400, message: "We could not parse the JSON body of your request.", type: "invalid_request_error" }));
      }
      let streaming = false;
      const response = await route({
        record,
        signal,
        stream(generate, headers) {
          streaming = true;
          const source: Bun.DirectUnderlyingSource = {
            type: "direct",
            async pull(controller) {
              let ending: StreamEnding = undefined;
              const events = generate();
              for (;;) {
                const next = await events.next();
                if (next.done) {
                  ending = next.value;
                  break;
                }
                if (signal.aborted) return void (await events.return(undefined));
                await controller.write(next.value);
                await controller.flush();
              }
              complete = true;
              if (ending !== "drop") return controller.close();
              // Bun writes flushed bytes on a later turn of the event loop and discards them if the
              // stream fails first; waiting lets the client receive what was "sent" before the cut.
              await Bun.sleep(DROP_GRACE_MS);
              controller.close(new Error("connection dropped on purpose"));
            },
          };
          // The DOM lib in tsconfig hides Bun's overload for direct streams, which flush on demand.
          return new Response(new ReadableStream(source as unknown as UnderlyingDefaultSource<Uint8Array>), { headers });
        },
      });
      return streaming ? response : answered(response);
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    requests,
    requestsTo: (path) => requests.filter((r) => r.path === path),
    waitForAbort(count = 1) {
      return new Promise<void>((resolve) => {
        abortWaiters.push({ count, resolve });
        notifyAbort();
      });
    },
    clearRequests() {
      requests.length = 0;
    },
    stop() {
      stopping.abort();
      void server.stop(true);
    },
  };
}

export function errorResponse(reply: ErrorReply): Response {
  return Response.json(
    { error: { message: reply.message ?? `Scripted failure ${reply.status}`, type: reply.type ?? "server_error", param: null, code: null } },
    { status: reply.status, headers: { "retry-after-ms": String(reply.retryAfterMs ?? 0) } },
  );
}

export function isFailure<T extends object>(behaviour: T | FailureReply): behaviour is FailureReply {
  return "hang" in behaviour || "raw" in behaviour || "status" in behaviour;
}

/** Answers a hang (once the client gives up), a raw body or a scripted error. */
export async function failureResponse(reply: FailureReply, signal: AbortSignal): Promise<Response> {
  if ("hang" in reply) {
    if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    return new Response(null, { status: 499 });
  }
  if ("raw" in reply) {
    const body = typeof reply.raw === "string" ? reply.raw : JSON.stringify(reply.raw);
    return new Response(body, { status: reply.status ?? 200, headers: { "content-type": reply.contentType ?? "application/json" } });
  }
  return errorResponse(reply);
}

/** Waits, but no longer than until the client hangs up (so a cancelled stream stops promptly). */
function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Words of a text, for deterministic token counts and bag-of-words scores. */
export function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** Deterministic permutation of 0..n-1 that differs from the identity whenever n > 1. */
function scrambledOrder(n: number): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  let seed = n;
  for (let i = n - 1; i > 0; i--) {
    seed = fnv1a(String(seed));
    const j = seed % (i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  if (n > 1 && order.every((v, i) => v === i)) order.push(order.shift()!);
  return order;
}

// ---------------------------------------------------------------------------------------------
// The OpenAI-compatible gateway

/**
 * Hashed bag-of-words embedding, L2-normalised and rounded to float32 (so that base64 and float
 * answers decode to the same numbers). A text with no words maps to the first axis.
 */
export function fakeEmbedding(text: string, dimension = DEFAULT_FAKE_EMBEDDING_DIMENSION): number[] {
  const v = new Array<number>(dimension).fill(0);
  for (const word of words(text)) {
    const h = fnv1a(word);
    v[h % dimension]! += fnv1a(`${word}#sign`) & 1 ? 1 : -1;
  }
  const norm = Math.hypot(...v);
  if (norm === 0) return v.map((_, i) => (i === 0 ? 1 : 0));
  return v.map((x) => Math.fround(x / norm));
}

/** Little-endian float32 bytes in base64, as OpenAI sends them. */
function encodeFloat32Base64(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((x, i) => bytes.writeFloatLE(x, i * 4));
  return bytes.toString("base64");
}

const chatRequestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(z.looseObject({ role: z.string(), content: z.string() })).min(1),
  stream: z.boolean().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  temperature: z.number().optional(),
  max_tokens: z.number().optional(),
  response_format: z.looseObject({ type: z.string() }).optional(),
});
export type ChatCompletionRequest = z.infer<typeof chatRequestSchema>;

const embeddingsRequestSchema = z.looseObject({
  model: z.string(),
  input: z.union([z.string(), z.array(z.string()).min(1)]),
  encoding_format: z.enum(["float", "base64"]).optional(),
});
export type EmbeddingsRequest = z.infer<typeof embeddingsRequestSchema>;

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

export interface ChatReply {
  /** The whole reply; defaults to the echo described above. Ignored when `chunks` is given. */
  content?: string;
  /** Streamed deltas, in order; defaults to `content` split word by word. */
  chunks?: string[];
  finishReason?: "stop" | "length" | "content_filter";
  /** null leaves usage out of the response. */
  usage?: Usage | null;
  /** Pause before each streamed chunk, overriding the gateway default. */
  tokenDelayMs?: number;
  /** Streams only: drop the connection after this many content chunks. */
  dropAfterChunks?: number;
  /** Streams only: send an OpenAI error event (and end the stream) after this many content chunks. */
  errorEventAfterChunks?: number;
}

export interface EmbeddingsReply {
  /** One vector per input; defaults to fakeEmbedding of each input. */
  vectors?: number[][];
  /** Return `data` out of order (each item keeps its `index`). */
  shuffle?: boolean;
  /** Answer in this encoding whatever was asked, like gateways that ignore encoding_format. */
  encoding?: "float" | "base64";
  usage?: Usage | null;
}

export type ChatBehaviour = ChatReply | FailureReply;
export type EmbeddingsBehaviour = EmbeddingsReply | FailureReply;
/** `call` counts the requests this handler has seen, from 0. */
export type ChatHandler = (request: ChatCompletionRequest, call: number) => ChatBehaviour | Promise<ChatBehaviour>;
export type EmbeddingsHandler = (request: EmbeddingsRequest, call: number) => EmbeddingsBehaviour | Promise<EmbeddingsBehaviour>;

export interface FakeLlmGatewayOptions {
  embeddingDimension?: number;
  /** Pause before each streamed chunk. */
  tokenDelayMs?: number;
  /** Pause before answering each chat request, streamed or not: a model's time to its first token. */
  chatLatencyMs?: number;
  /** Pause before answering each embeddings request, whatever its batch size. */
  embeddingsLatencyMs?: number;
  /** When set, requests must carry `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
}

export interface FakeLlmGateway extends LoopbackServer {
  /** http://127.0.0.1:<port>/v1, what an OpenAI client takes as baseURL. */
  readonly baseURL: string;
  onChat(handler: ChatHandler): void;
  onEmbeddings(handler: EmbeddingsHandler): void;
  chatRequests(): RecordedRequest[];
  embeddingRequests(): RecordedRequest[];
  /** Back to the default handlers, with no recorded requests. */
  reset(): void;
}

export const CHAT_PATH = "/v1/chat/completions";
export const EMBEDDINGS_PATH = "/v1/embeddings";

export function defaultChatReply(request: ChatCompletionRequest): ChatReply {
  const lastUser = request.messages.findLast((m) => m.role === "user")?.content ?? "";
  const json = request.response_format?.type === "json_object";
  return { content: json ? JSON.stringify({ echo: lastUser }) : `Echo: ${lastUser}` };
}

const defaultEmbeddingsReply = (): EmbeddingsReply => ({});

function invalidRequest(message: string): Response {
  return errorResponse({ status: 400, message, type: "invalid_request_error" });
}

export function startFakeLlmGateway(options: FakeLlmGatewayOptions = {}): FakeLlmGateway {
  const dimension = options.embeddingDimension ?? DEFAULT_FAKE_EMBEDDING_DIMENSION;
  let chatHandler: ChatHandler = defaultChatReply;
  let embeddingsHandler: EmbeddingsHandler = defaultEmbeddingsReply;
  let chatCalls = 0;
  let embeddingsCalls = 0;
  let completionIds = 0;

  const chatRoute: Route = async (ctx) => {
    const parsed = chatRequestSchema.safeParse(ctx.record.body);
    if (!parsed.success) return invalidRequest(`Invalid chat request: ${parsed.error.issues[0]?.message}`);
    const request = parsed.data;
    if (options.chatLatencyMs) await sleepUnlessAborted(options.chatLatencyMs, ctx.signal);
    const reply = await chatHandler(request, chatCalls++);
    if (isFailure(reply)) return failureResponse(reply, ctx.signal);

    const defaults = defaultChatReply(request);
    const chunks = reply.chunks ?? tokenize(reply.content ?? defaults.content!);
    const content = chunks.join("");
    const usage: Usage | null =
      reply.usage === undefined
        ? { prompt_tokens: request.messages.reduce((n, m) => n + words(m.content).length, 0), completion_tokens: chunks.length }
        : reply.usage;
    const finishReason = reply.finishReason ?? "stop";
    const id = `chatcmpl-fake-${++completionIds}`;
    const created = Math.floor(Date.now() / 1000);
    const base = { id, created, model: request.model, system_fingerprint: null };

    if (!request.stream) {
      return Response.json({
        ...base,
        object: "chat.completion",
        choices: [{ index: 0, message: { role: "assistant", content, refusal: null }, logprobs: null, finish_reason: finishReason }],
        ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
      });
    }

    const includeUsage = request.stream_options?.include_usage === true;
    const delay = reply.tokenDelayMs ?? options.tokenDelayMs ?? 0;
    const sse = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
    const chunk = (delta: object, finish: string | null) => ({
      ...base,
      object: "chat.completion.chunk",
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {}),
    });
    return ctx.stream(
      async function* (): AsyncGenerator<string, StreamEnding> {
        yield sse(chunk({ role: "assistant", content: "", refusal: null }, null));
        for (const [i, piece] of chunks.entries()) {
          if (i === reply.dropAfterChunks) return "drop";
          if (i === reply.errorEventAfterChunks) {
            yield sse({ error: { message: "The model failed mid-stream", type: "server_error", param: null, code: null } });
            return;
          }
          if (delay > 0) await sleepUnlessAborted(delay, ctx.signal);
          yield sse(chunk({ content: piece }, null));
        }
        yield sse(chunk({}, finishReason));
        if (includeUsage && usage) {
          yield sse({ ...base, object: "chat.completion.chunk", choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } });
        }
        yield "data: [DONE]\n\n";
      },
      { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" },
    );
  };

  const embeddingsRoute: Route = async (ctx) => {
    const parsed = embeddingsRequestSchema.safeParse(ctx.record.body);
    if (!parsed.success) return invalidRequest(`Invalid embeddings request: ${parsed.error.issues[0]?.message}`);
    const request = parsed.data;
    if (options.embeddingsLatencyMs) await sleepUnlessAborted(options.embeddingsLatencyMs, ctx.signal);
    const reply = await embeddingsHandler(request, embeddingsCalls++);
    if (isFailure(reply)) return failureResponse(reply, ctx.signal);

    const inputs = typeof request.input === "string" ? [request.input] : request.input;
    const vectors = reply.vectors ?? inputs.map((text) => fakeEmbedding(text, dimension));
    const encoding = reply.encoding ?? request.encoding_format ?? "float";
    const data = vectors.map((v, index) => ({ object: "embedding", index, embedding: encoding === "base64" ? encodeFloat32Base64(v) : v }));
    const ordered = reply.shuffle ? scrambledOrder(data.length).map((i) => data[i]!) : data;
    const promptTokens = inputs.reduce((n, text) => n + words(text).length, 0);
    const usage = reply.usage === undefined ? { prompt_tokens: promptTokens } : reply.usage;
    return Response.json({
      object: "list",
      data: ordered,
      model: request.model,
      ...(usage ? { usage: { prompt_tokens: usage.prompt_tokens, total_tokens: usage.prompt_tokens } } : {}),
    });
  };

  const server = startLoopbackServer(
    { [CHAT_PATH]: chatRoute, [EMBEDDINGS_PATH]: embeddingsRoute },
    options.apiKey === undefined ? {} : { apiKey: options.apiKey },
  );

  return {
    ...server,
    baseURL: `${server.url}/v1`,
    onChat(handler) {
      chatHandler = handler;
      chatCalls = 0;
    },
    onEmbeddings(handler) {
      embeddingsHandler = handler;
      embeddingsCalls = 0;
    },
    chatRequests: () => server.requestsTo(CHAT_PATH),
    embeddingRequests: () => server.requestsTo(EMBEDDINGS_PATH),
    reset() {
      chatHandler = defaultChatReply;
      embeddingsHandler = defaultEmbeddingsReply;
      chatCalls = 0;
      embeddingsCalls = 0;
      server.clearRequests();
    },
  };
}

/** Splits text into word-sized deltas whose concatenation is the text. */
function tokenize(text: string): string[] {
  return text.match(/\s+|\S+\s*/g) ?? [""];
}
