import { describe, expect, test } from "bun:test";
import { nextDelay, retry, type RetryOptions } from "../../common/retry.ts";

/** Runs retry over an operation that fails its first `failures` calls ("failure N"), on a fake clock that only the waits move. */
async function run(failures: number, options: Partial<RetryOptions>) {
  let clock = 0;
  const waits: number[] = [];
  const retried: [attempt: number, delayMs: number][] = [];
  const attempts: number[] = [];
  const outcome = await retry(
    async (attempt) => {
      attempts.push(attempt);
      if (attempts.length <= failures) throw new Error(`failure ${attempts.length}`);
      return "done";
    },
    {
      firstDelayMs: 100,
      ...options,
      sleep: async (ms) => {
        waits.push(ms);
        clock += ms;
      },
      now: () => clock,
      onRetry: (_, attempt, delayMs) => retried.push([attempt, delayMs]),
    },
  ).catch((error: Error) => error.message);
  return { outcome, calls: attempts.length, waits, attempts, retried };
}

describe("retry", () => {
  test.each([
    ["a first try that succeeds waits for nothing", 0, { attempts: 3 }, "done", 1, []],
    ["each wait is twice the one before", 3, { attempts: 4 }, "done", 4, [100, 200, 400]],
    ["the doubling stops at maxDelayMs", 5, { attempts: 6, maxDelayMs: 300 }, "done", 6, [100, 200, 300, 300, 300]],
    ["the failure of the last of `attempts` tries is thrown", Infinity, { attempts: 3 }, "failure 3", 3, [100, 200]],
    ["a failure shouldRetry refuses is thrown at once", Infinity, { attempts: 3, shouldRetry: () => false }, "failure 1", 1, []],
    ["with the signal aborted a failure is thrown at once", Infinity, { attempts: 3, signal: AbortSignal.abort() }, "failure 1", 1, []],
    ["no try starts once the window has closed", Infinity, { windowMs: 1_000, maxDelayMs: 400 }, "failure 4", 4, [100, 200, 400]],
    [
      "a wait the failure asks for replaces the back-off, which doubles behind it all the same",
      2,
      { attempts: 3, delayOf: (error: unknown) => ((error as Error).message === "failure 1" ? 5 : undefined) },
      "done",
      3,
      [5, 200],
    ],
    ["after the caller's own failed try, the first call is a retry that waits first", Infinity, { attempts: 3, alreadyFailed: { error: new Error("failure 0") } }, "failure 2", 2, [100, 200]],
    ["the caller's failure is thrown when the window leaves no retry", Infinity, { windowMs: 50, alreadyFailed: { error: new Error("failure 0") } }, "failure 0", 0, []],
  ] as const)("%s", async (_, failures, options, outcome, calls, waits) => {
    const result = await run(failures, options);
    expect([result.outcome, result.calls, result.waits]).toEqual([outcome, calls, [...waits]]);
  });

  test("fn is given the tries made before it, and onRetry the number of the try that failed with the wait that follows", async () => {
    expect(await run(2, { attempts: 3 })).toMatchObject({ attempts: [0, 1, 2], retried: [[1, 100], [2, 200]] });
    expect(await run(1, { attempts: 3, alreadyFailed: { error: new Error("failure 0") } })).toMatchObject({ attempts: [1, 2], retried: [[1, 100], [2, 200]] });
  });

  test("with jitter each wait is drawn from half to all of its back-off", async () => {
    const { waits } = await run(3, { attempts: 4, jitter: true });
    expect(waits.map((ms, i) => ms / (100 * 2 ** i)).every((share) => share >= 0.5 && share <= 1)).toBe(true);
  });
});

describe("nextDelay", () => {
  test.each([
    ["doubles the delay", 250, undefined, 500],
    ["stops at the bound", 3_000, 5_000, 5_000],
    ["stays at the bound once there", 5_000, 5_000, 5_000],
  ] as const)("%s", (_, previous, max, expected) => {
    expect(nextDelay(previous, max)).toBe(expected);
  });
});
