import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { SSE_HEADERS, formatSseEvent, sseResponse, type SseData } from "../api/sse.ts";

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
    expect(await res.text()).toBe('data: {"token":"a\\n"}\n\ndata: {"token":"b"}\n\ndata: {"done":true}\n\n');
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
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: {"token":"first"}\n\n');
    await reader.cancel();
    expect(seen).toEqual(["cancel", "cleanup"]);
  });
});
