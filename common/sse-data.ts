/**
 * The `data` of each event of a Server-Sent Events stream, from text that arrives in pieces cut
 * anywhere (inside a line, between CR and LF): the one decoder of both the LLM gateway's streams
 * (common/llm/gateway.ts) and the chat's own (api/sse-client.ts). As the HTML standard's event
 * stream parsing: lines end in LF, CRLF or CR; the `data` lines of one event are joined with LF, a
 * `data` line without a colon being an empty one, and the event is dispatched at a blank line;
 * comments (`:`) and other fields are ignored.
 *
 * At the end of the stream the standard drops an event not closed by a blank line, and so does
 * `atEnd: "discard"`, the default: the chat's stream always closes its events, so an unclosed one
 * is a stream cut short. `atEnd: "dispatch"` delivers it instead, for the LLM gateway: a server that
 * closes the stream right after its last `data:` line must not lose the reply's last chunk, and a
 * chunk cut short still fails there as JSON that does not parse.
 *
 * Pure: no I/O.
 */
export interface SseDataDecoder {
  /** The events completed by this piece of text. */
  push(text: string): string[];
  /** What the end of the stream completes: a line ended by a last CR, and with `atEnd: "dispatch"` the event left open. */
  end(): string[];
}

export interface SseDataDecoderOptions {
  atEnd?: "discard" | "dispatch";
}

export function createSseDataDecoder(options: SseDataDecoderOptions = {}): SseDataDecoder {
  const dispatchAtEnd = options.atEnd === "dispatch";
  let buffer = "";
  const data: string[] = [];
  // A CR at the end of a piece may be the first half of a CRLF.
  let pendingCr = false;

  const line = (text: string, out: string[]) => {
    if (text === "") {
      // Nearly every event is one data line: no join, no new array.
      if (data.length === 1) out.push(data[0]!);
      else if (data.length > 1) out.push(data.join("\n"));
      data.length = 0;
    } else if (text.startsWith("data:")) {
      data.push(text.charCodeAt(5) === 32 ? text.slice(6) : text.slice(5));
    } else if (text === "data") {
      data.push("");
    }
  };

  return {
    push(piece) {
      let text = pendingCr ? `\r${piece}` : piece;
      pendingCr = text.endsWith("\r");
      if (pendingCr) text = text.slice(0, -1);
      if (text.includes("\r")) text = text.replace(/\r\n?/g, "\n");
      buffer += text;
      const out: string[] = [];
      let start = 0;
      for (let end = buffer.indexOf("\n"); end !== -1; end = buffer.indexOf("\n", start)) {
        line(buffer.slice(start, end), out);
        start = end + 1;
      }
      buffer = buffer.slice(start);
      return out;
    },
    end() {
      const out: string[] = [];
      if (pendingCr || (dispatchAtEnd && buffer !== "")) line(buffer, out);
      if (dispatchAtEnd) line("", out);
      pendingCr = false;
      buffer = "";
      data.length = 0;
      return out;
    },
  };
}
