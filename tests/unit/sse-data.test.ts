import { describe, expect, test } from "bun:test";
import { createSseDataDecoder, type SseDataDecoderOptions } from "../../common/sse-data.ts";

/** Every event's data, the text fed in the given pieces and then ended. */
function decode(pieces: readonly string[], options: SseDataDecoderOptions = {}): string[] {
  const decoder = createSseDataDecoder(options);
  return [...pieces.flatMap((piece) => decoder.push(piece)), ...decoder.end()];
}

describe("the data of a Server-Sent Events stream", () => {
  test.each([
    ["one event", ["data: {\"a\":1}\n\n"], ['{"a":1}']],
    ["two events in one piece", ["data: 1\n\ndata: 2\n\n"], ["1", "2"]],
    ["an event cut inside its line", ["da", "ta: hel", "lo\n", "\n"], ["hello"]],
    ["CRLF line ends", ["data: 1\r\n\r\ndata: 2\r\n\r\n"], ["1", "2"]],
    ["a CRLF cut between CR and LF", ["data: 1\r", "\n\r", "\ndata: 2\r\n\r\n"], ["1", "2"]],
    ["CR line ends", ["data: 1\r\rdata: 2\r\r"], ["1", "2"]],
    ["several data lines of one event, joined by LF", ["data: a\ndata: b\n\n"], ["a\nb"]],
    ["no space after the colon", ["data:x\n\n"], ["x"]],
    ["comments and other fields ignored", [": keep-alive\n\nevent: message\nid: 7\ndata: x\nretry: 10\n\n"], ["x"]],
    ["blank lines with no data make no event", ["\n\n\n"], []],
    ["the [DONE] marker is data like any other", ["data: [DONE]\n\n"], ["[DONE]"]],
    ["a data line without a colon is an empty data line", ["data\ndata: x\n\ndata\n\n"], ["\nx", ""]],
    ["a last CR ends its line at the end of the stream", ["data: 1\r\r"], ["1"]],
    ["an event left open at the end is dropped, as the standard says", ["data: 1\n\ndata: last"], ["1"]],
    ["an event left open after its last line end is dropped too", ["data: last\n"], []],
    ["an empty stream", [], []],
  ] as const)("%s", (_, pieces, events) => {
    expect(decode(pieces)).toEqual([...events]);
  });

  test.each([
    ["an event left open at the end is delivered", ["data: last"], ["last"]],
    ["an event left open after its last line end is delivered", ["data: a\ndata: b\n"], ["a\nb"]],
    ["a line cut by the end of the stream is read as a whole line", ["data: 1\n\nda", "ta: 2"], ["1", "2"]],
    ["nothing left open delivers nothing more", ["data: 1\n\n"], ["1"]],
  ] as const)("with atEnd dispatch (the LLM gateway's streams), %s", (_, pieces, events) => {
    expect(decode(pieces, { atEnd: "dispatch" })).toEqual([...events]);
  });

  test("the same events whatever the pieces' boundaries", () => {
    const text = 'data: {"choices":[{"delta":{"content":"a\\nb"}}]}\r\n\r\n: ping\n\ndata: x\ndata: y\n\ndata: [DONE]\n\n';
    const whole = decode([text]);
    for (let size = 1; size <= 7; size++) {
      const pieces = Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));
      expect(decode(pieces)).toEqual(whole);
    }
    expect(whole).toEqual(['{"choices":[{"delta":{"content":"a\\nb"}}]}', "x\ny", "[DONE]"]);
  });
});
