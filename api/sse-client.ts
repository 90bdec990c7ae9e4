import { ChatEvent } from "../common/contract/schemas.ts";

/**
 * The client side of `POST /character/chat`: reads a `text/event-stream` body as it arrives, the
 * way a browser's EventSource does (lines end in LF, CR or CRLF; `data:` lines of one event are
 * joined with LF; comments and other fields are ignored; an event is dispatched at a blank line and
 * an unfinished last event is dropped), and yields each event's data.
 */
export async function* readSseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string, void> {
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  const take = (line: string): string | undefined => {
    if (line === "") {
      const event = data.length > 0 ? data.join("\n") : undefined;
      data = [];
      return event;
    }
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    if (field !== "data") return undefined;
    const value = colon === -1 ? "" : line.slice(colon + 1);
    data.push(value.startsWith(" ") ? value.slice(1) : value);
    return undefined;
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    for (;;) {
      const end = buffer.search(/[\r\n]/);
      // A CR at the end of what has arrived may be the first half of a CRLF.
      if (end === -1 || (buffer[end] === "\r" && end === buffer.length - 1)) break;
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
      const event = take(line);
      if (event !== undefined) yield event;
    }
  }
  if (buffer.endsWith("\r")) {
    const event = take(buffer.slice(0, -1));
    if (event !== undefined) yield event;
  }
}

/** The chat events of a reply stream, checked against the API's event schema. */
export async function* readChatEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ChatEvent, void> {
  for await (const data of readSseData(body)) yield ChatEvent.parse(JSON.parse(data));
}
