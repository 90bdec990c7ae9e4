import { expect, test } from "bun:test";
import { formatSseEvent } from "../../api/sse.ts";
import { readChatEvents, readSseData } from "../../api/sse-client.ts";

function streamOf(chunks: readonly string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

async function collect<T>(events: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const event of events) out.push(event);
  return out;
}

/** Every way of cutting the text in two, which is where a parser that assumes whole lines breaks. */
function splitsOf(text: string): string[][] {
  return Array.from({ length: text.length + 1 }, (_, i) => [text.slice(0, i), text.slice(i)]);
}

const reply = [
  formatSseEvent({ token: "I" }),
  formatSseEvent({ token: " sew\n\ndata: {\"done\":true}" }),
  formatSseEvent({ token: " with linen — ✂️" }),
  formatSseEvent({ done: true, full_response: "I sew\n\ndata: {\"done\":true} with linen — ✂️", sources: [{ chunk_index: 3, score: 0.5 }] }),
].join("");

test("the chat events of a reply are read in order however the stream is cut, even inside a line or a character", async () => {
  const bytes = new TextEncoder().encode(reply);
  for (let cut = 0; cut <= bytes.length; cut++) {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes.slice(0, cut));
        controller.enqueue(bytes.slice(cut));
        controller.close();
      },
    });
    const events = await collect(readChatEvents(stream));
    expect(events.map((e) => ("token" in e ? e.token : "done" in e ? "<done>" : "<error>"))).toEqual([
      "I",
      " sew\n\ndata: {\"done\":true}",
      " with linen — ✂️",
      "<done>",
    ]);
  }
});

test("lines may end in CRLF, CR or LF, a CRLF split across chunks ends one line, and data lines of one event are joined", async () => {
  const text = "data: one\r\ndata: more\r\n\r\ndata: two\r\rdata: three\n\ndata: first\ndata:second\n\n";
  for (const chunks of splitsOf(text)) {
    expect(await collect(readSseData(streamOf(chunks)))).toEqual(["one\nmore", "two", "three", "first\nsecond"]);
  }
});

test("comments, other fields and blank events are ignored, and an event cut off by the end of the stream is dropped", async () => {
  const text = ": keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: kept\n\n\n\ndata: unfinished";
  expect(await collect(readSseData(streamOf([text])))).toEqual(["kept"]);
});

test("an event that is not one of the chat events fails loudly instead of being printed", async () => {
  await expect(collect(readChatEvents(streamOf([formatSseEvent({ tokens: "x" })])))).rejects.toThrow();
  await expect(collect(readChatEvents(streamOf(["data: not json\n\n"])))).rejects.toThrow();
});
