/**
 * The two floors a chat's streaming is compared with, as one web-standard fetch handler that Bun,
 * Deno and workerd each serve (bench/chat-paced.ts starts them): `POST /pass` hands the gateway's
 * stream back untouched; `POST /reframe`, the minimal proxy, parses each SSE event and sends one
 * `data: {"token": …}` event per token. Both forward the request body to the gateway's completions.
 */

export interface FloorEnv {
  GATEWAY_URL: string;
}

const SSE = { "content-type": "text/event-stream" };

function reframe(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let buffered = "";
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, out) {
        buffered += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffered.indexOf("\n\n")) >= 0) {
          const event = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
          const token = (JSON.parse(event.slice(6)) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;
          if (token) out.enqueue(encoder.encode(`data: ${JSON.stringify({ token })}\n\n`));
        }
      },
    }),
  );
}

export default {
  async fetch(request: Request, env: FloorEnv): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (request.method !== "POST" || (path !== "/pass" && path !== "/reframe")) return new Response("not found", { status: 404 });
    const upstream = await fetch(`${env.GATEWAY_URL}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: await request.text() });
    if (!upstream.body) return new Response("the gateway sent no body", { status: 502 });
    return new Response(path === "/pass" ? upstream.body : reframe(upstream.body), { headers: SSE });
  },
};
