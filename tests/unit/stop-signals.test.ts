import { describe, expect, test } from "bun:test";
import { DEFAULT_REPEAT_GRACE_MS, onStopSignals } from "../../common/stop-signals.ts";

type Signal = "SIGINT" | "SIGTERM";

/** Runs signals at given times through onStopSignals with a fake clock, returning what happened. */
function run(arrivals: [Signal, number][]): string[] {
  const listeners = new Map<Signal, () => void>();
  const events: string[] = [];
  let clock = 0;
  onStopSignals((signal) => events.push(`stop ${signal}`), {
    target: { on: (signal, listener) => listeners.set(signal, listener) },
    now: () => clock,
    exit: (code) => events.push(`exit ${code}`),
  });
  for (const [signal, at] of arrivals) {
    clock = at;
    listeners.get(signal)!();
  }
  return events;
}

describe("stop signals of a service", () => {
  test.each([
    ["one SIGTERM stops gracefully", [["SIGTERM", 0]], ["stop SIGTERM"]],
    ["one SIGINT stops gracefully", [["SIGINT", 0]], ["stop SIGINT"]],
    ["Ctrl-C under npm (twice at once: the terminal's and npm's) stops gracefully once", [["SIGINT", 0], ["SIGINT", 3]], ["stop SIGINT"]],
    ["a SIGTERM forwarded just after a SIGINT is the same stop", [["SIGINT", 0], ["SIGTERM", DEFAULT_REPEAT_GRACE_MS - 1]], ["stop SIGINT"]],
    ["a second Ctrl-C later stops at once with 130", [["SIGINT", 0], ["SIGINT", 3], ["SIGINT", DEFAULT_REPEAT_GRACE_MS + 500]], ["stop SIGINT", "exit 130"]],
    ["a later SIGTERM stops at once with 143", [["SIGINT", 0], ["SIGTERM", DEFAULT_REPEAT_GRACE_MS]], ["stop SIGINT", "exit 143"]],
  ] as [string, [Signal, number][], string[]][])("%s", (_, arrivals, expected) => {
    expect(run(arrivals)).toEqual(expected);
  });
});
