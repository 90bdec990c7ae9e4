/**
 * The `data` of each event of a Server-Sent Events stream, from text that arrives in pieces cut
 * anywhere (inside a line, between CR and LF). Lines end in LF, CRLF or CR; the `data:` lines of one
 * event are joined with LF and the event ends at a blank line; comments (`:`) and other fields are
 * ignored. At the end of the stream an event not closed by a blank line is still delivered.
 *
 * Pure: no I/O.
 */
export interface SseDataDecoder {
  /** The events completed by this piece of text. */
  push(text: string): string[];
  /** The event left open when the stream ends, if any. */
  end(): string[];
}

export function createSseDataDecoder(): SseDataDecoder {
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
      if (pendingCr || buffer !== "") line(buffer, out);
      pendingCr = false;
      buffer = "";
      line("", out);
      return out;
    },
  };
}
