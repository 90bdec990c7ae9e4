import { describe, expect, test } from "bun:test";
import { MAX_RETRY_AFTER_MS, UpstreamError, retryAfterMs, upstreamErrorFromResponse, withRetries } from "../../common/upstream.ts";

describe("Retry-After", () => {
  const now = Date.parse("2026-11-25T12:00:00Z");
  test.each([
    ["retry-after-ms in milliseconds", { "retry-after-ms": "1500" }, 1500],
    ["retry-after in seconds", { "retry-after": "2" }, 2000],
    ["retry-after as an HTTP date", { "retry-after": "Wed, 25 Nov 2026 12:00:03 GMT" }, 3000],
    ["a date already past means now", { "retry-after": "Wed, 25 Nov 2026 11:00:00 GMT" }, 0],
    ["retry-after-ms wins over retry-after", { "retry-after-ms": "10", "retry-after": "5" }, 10],
    ["no header", {}, undefined],
    ["an empty header", { "retry-after": " " }, undefined],
    ["a negative number", { "retry-after": "-1" }, undefined],
    ["nonsense", { "retry-after": "soon" }, undefined],
  ] as const)("%s", (_, headers, expected) => {
    expect(retryAfterMs(new Headers(headers as Record<string, string>), now)).toBe(expected);
  });

  test("a non-2xx response's error carries the wait it asked for", async () => {
    const error = await upstreamErrorFromResponse("llm", new Response("slow down", { status: 429, headers: { "retry-after": "7" } }));
    expect([error.status, error.retryAfterMs, error.retryable]).toEqual([429, 7000, true]);
  });
});

describe("withRetries", () => {
  const failing = (errors: UpstreamError[]) => {
    let call = 0;
    return async () => {
      const error = errors[call++];
      if (error) throw error;
      return "done";
    };
  };
  const busy = (retryAfterMs?: number) => new UpstreamError("llm", "http", "busy", { status: 429, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) });

  test("waits as long as the service asked before the next try", async () => {
    const waits: number[] = [];
    const result = await withRetries(failing([busy(1234), busy(0)]), { maxRetries: 2, sleep: async (ms) => void waits.push(ms) });
    expect(result).toBe("done");
    expect(waits).toEqual([1234, 0]);
  });

  test("backs off exponentially, with jitter, when the service says nothing or asks for too long", async () => {
    const waits: number[] = [];
    await withRetries(failing([busy(), busy(MAX_RETRY_AFTER_MS + 1)]), { maxRetries: 2, baseDelayMs: 100, sleep: async (ms) => void waits.push(ms) });
    expect(waits[0]).toBeGreaterThanOrEqual(50);
    expect(waits[0]).toBeLessThanOrEqual(100);
    expect(waits[1]).toBeGreaterThanOrEqual(100);
    expect(waits[1]).toBeLessThanOrEqual(200);
  });

  test("a failure that is not worth another try is thrown at once", async () => {
    const waits: number[] = [];
    const refused = new UpstreamError("llm", "http", "bad key", { status: 401 });
    await expect(withRetries(failing([refused]), { maxRetries: 3, sleep: async (ms) => void waits.push(ms) })).rejects.toBe(refused);
    expect(waits).toEqual([]);
  });
});
