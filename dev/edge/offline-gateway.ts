import type { ChatMessage, LlmPurpose } from "../../common/llm/index.ts";
import { createOfflineLanguageModel } from "../../common/llm/offline.ts";
import { DISCOVERY_MARKER, EXTRACTION_MARKER, PERSONA_MARKER } from "../../common/llm/prompt-format.ts";

/**
 * The offline provider (common/llm/offline.ts) behind an OpenAI-compatible gateway on loopback. The
 * edge API talks to a model only through a gateway (the offline provider runs on Bun only), so on a
 * laptop with no model this is what LLM_GATEWAY_URL points at: replies are composed from the book as
 * `npm start` composes them, and query embeddings are the same lexical vectors the worker indexed the
 * book with (the worker runs the offline provider itself).
 *
 *   POST /v1/chat/completions  whole, or streamed as `chat.completion.chunk` events then `[DONE]`
 *   POST /v1/embeddings        float vectors
 *
 * A gateway request does not say what the call is for, which picks the offline provider's answer;
 * it is told from the request as the project's callers make it: a stream is a chat reply, a payload
 * marker is a character pass, JSON mode otherwise is the query rewrite, and the rest is the summary.
 */

export interface OfflineGateway {
  /** What LLM_GATEWAY_URL is set to: `http://127.0.0.1:{port}/v1`. */
  readonly baseURL: string;
  stop(): Promise<void>;
}

interface CompletionRequest {
  messages: ChatMessage[];
  stream?: boolean;
  response_format?: { type?: string };
}

function isMessage(value: unknown): value is ChatMessage {
  const m = value as ChatMessage | null;
  return typeof m === "object" && m !== null && ["system", "user", "assistant"].includes(m.role) && typeof m.content === "string";
}

function purposeOf(request: CompletionRequest): LlmPurpose {
  if (request.stream) return "chat";
  const last = request.messages.at(-1)?.content ?? "";
  if (last.includes(EXTRACTION_MARKER)) return "extract";
  if (last.includes(PERSONA_MARKER)) return "persona";
  if (last.includes(DISCOVERY_MARKER)) return "characters";
  return request.response_format?.type === "json_object" ? "rewrite" : "summary";
}

const error = (status: number, message: string) => Response.json({ error: { message, type: "invalid_request_error" } }, { status });

export function startOfflineGateway(options: { port?: number; hostname?: string } = {}): OfflineGateway {
  let usage = { prompt_tokens: 0, completion_tokens: 0 };
  const llm = createOfflineLanguageModel({ onUsage: (_purpose, u) => (usage = { prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens }) });
  const model = "offline";

  const complete = async (request: CompletionRequest, signal: AbortSignal): Promise<Response> => {
    const purpose = purposeOf(request);
    if (!request.stream) {
      const content = await llm.complete(request.messages, { purpose, signal });
      return Response.json({ id: crypto.randomUUID(), object: "chat.completion", model, choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }], usage });
    }
    const id = crypto.randomUUID();
    const chunk = (body: object) => `data: ${JSON.stringify({ id, object: "chat.completion.chunk", model, ...body })}\n\n`;
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        try {
          controller.enqueue(encoder.encode(chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] })));
          for await (const piece of llm.stream(request.messages, { purpose, signal })) {
            controller.enqueue(encoder.encode(chunk({ choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })));
          }
          controller.enqueue(encoder.encode(chunk({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })));
          controller.enqueue(encoder.encode(chunk({ choices: [], usage })));
          controller.enqueue(encoder.encode("data: [DONE]\n\n"));
          controller.close();
        } catch (err) {
          controller.error(err);
        }
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
  };

  const server = Bun.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
    async fetch(req) {
      const { pathname } = new URL(req.url);
      if (req.method !== "POST") return error(405, `${req.method} is not served`);
      let body: unknown;
      try {
        body = await req.json();
      } catch {
        return error(400, "the body is not JSON");
      }
      try {
        if (pathname === "/v1/chat/completions") {
          const request = body as CompletionRequest;
          if (!Array.isArray(request?.messages) || !request.messages.every(isMessage)) return error(400, "messages must be an array of {role, content}");
          return await complete(request, req.signal);
        }
        if (pathname === "/v1/embeddings") {
          const input = (body as { input?: unknown })?.input;
          const texts = typeof input === "string" ? [input] : input;
          if (!Array.isArray(texts) || !texts.every((t): t is string => typeof t === "string")) return error(400, "input must be a string or an array of strings");
          const vectors = await llm.embed(texts, { signal: req.signal });
          return Response.json({ object: "list", model, data: vectors.map((embedding, index) => ({ object: "embedding", index, embedding })), usage: { prompt_tokens: 0, total_tokens: 0 } });
        }
      } catch (err) {
        // The offline provider refuses a request it cannot answer as a gateway's 400 would.
        return error(400, err instanceof Error ? err.message : String(err));
      }
      return error(404, `no route ${pathname}`);
    },
  });
  return { baseURL: `http://127.0.0.1:${server.port}/v1`, stop: () => server.stop(true) };
}
