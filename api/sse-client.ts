import { ChatEvent } from "../common/contract/schemas.ts";
import { createSseDataDecoder } from "../common/sse-data.ts";

/**
 * The client side of `POST /character/chat`: reads a `text/event-stream` body as it arrives, the
 * way a browser's EventSource does (common/sse-data.ts: an unfinished last event is dropped), and
 * yields each event's data.
 */
export async function* readSseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string, void> {
  const text = new TextDecoder();
  const decoder = createSseDataDecoder();
  for await (const chunk of body) yield* decoder.push(text.decode(chunk, { stream: true }));
  yield* decoder.push(text.decode());
  yield* decoder.end();
}

/** The chat events of a reply stream, checked against the API's event schema. */
export async function* readChatEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ChatEvent, void> {
  for await (const data of readSseData(body)) yield ChatEvent.parse(JSON.parse(data));
}
