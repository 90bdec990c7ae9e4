import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { SSE_HEADERS, SSE_KEEPALIVE, SSE_OPENING, formatSseEvent, sseResponse, type SseData } from "../../api/sse.ts";

/** Splits an event stream into lines the way the SSE specification does: CRLF, CR and LF all end a line. */
const sseLines = (text: string) => text.split(/\r\n|\r|\n/);

describe("formatSseEvent", () => {
  test("writes one data line and a blank line", () => {
    expect(formatSseEvent({ token: "Hello" })).toBe('data: {"token":"Hello"}\n\n');
  });

  test("any token, line breaks, 'data:' and lone surrogates included, stays one data line that parses back to itself", () => {
    const token = fc.oneof(
      fc.string({ unit: "binary" }),
      fc.array(fc.constantFrom("\n", "\r", "\r\n", "data: ", "event: x", ":", "\u2028", "}", '"'), { maxLength: 12 }).map((parts) => parts.join("")),
    );
    fc.assert(
      fc.property(token, (t) => {
        const lines = sseLines(formatSseEvent({ token: t }));
        expect(lines.length).toBe(3);
        expect(lines.slice(1)).toEqual(["", ""]);
        expect(lines[0]!.startsWith("data: ")).toBe(true);
        expect(JSON.parse(lines[0]!.slice(6))).toEqual({ token: t });
      }),
      { numRuns: 500 },
    );
  });
});

describe("sseResponse", () => {
  test("streams every event the iterator yields, in order, with event-stream headers, then ends", async () => {
    async function* events(): AsyncGenerator<SseData, void> {
      yield { token: "a\n" };
      yield { token: "b" };
      yield { done: true };
    }
    const res = sseResponse(events());
    expect(Object.fromEntries(res.headers)).toMatchObject(SSE_HEADERS);
    expect(await res.text()).toBe(`${SSE_OPENING}data: {"token":"a\\n"}\n\ndata: {"token":"b"}\n\ndata: {"done":true}\n\n`);
  });

  test("a client that leaves is reported, and the iterator is closed so its cleanup runs", async () => {
    const seen: string[] = [];
    let release!: () => void;
    const waiting = new Promise<void>((resolve) => (release = resolve));
    async function* events(): AsyncGenerator<SseData, void> {
      try {
        yield { token: "first" };
        await waiting;
        yield { token: "never read" };
      } finally {
        seen.push("cleanup");
      }
    }
    const res = sseResponse(events(), {
      onCancel: () => {
        seen.push("cancel");
        release();
      },
    });
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe(SSE_OPENING);
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: {"token":"first"}\n\n');
    await reader.cancel();
    expect(seen).toEqual(["cancel", "cleanup"]);
  });

  test("starts at once and, while no event is ready, sends a keep-alive comment every keepAliveMs", async () => {
    const ready = Promise.withResolvers<void>();
    async function* events(): AsyncGenerator<SseData, void> {
      await ready.promise;
      yield { done: true };
    }
    const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => sseResponse(events(), { keepAliveMs: 100 }) });
    try {
      // The headers arrive while the first event is still being prepared.
      const res = await fetch(`http://127.0.0.1:${server.port}/`);
      expect(res.headers.get("content-type")).toBe(SSE_HEADERS["content-type"]);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      while (text.split(SSE_KEEPALIVE).length < 3) text += decoder.decode((await reader.read()).value);
      ready.resolve();
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value);
      expect(text.startsWith(SSE_OPENING + SSE_KEEPALIVE + SSE_KEEPALIVE)).toBe(true);
      expect(text.endsWith('data: {"done":true}\n\n')).toBe(true);
      expect(text.replaceAll(SSE_KEEPALIVE, "")).toBe(`${SSE_OPENING}data: {"done":true}\n\n`);
    } finally {
      await server.stop(true);
    }
  });
});
