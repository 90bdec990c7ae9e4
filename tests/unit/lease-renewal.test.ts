import { describe, expect, test } from "bun:test";
import { keepRenewing } from "../../common/lease-renewal.ts";

/** Longer than any test: renewals happen only when the test asks for them. */
const NEVER_MS = 3_600_000;

type Outcome = "held" | "lost" | "failed";

/** A renewal loop whose renewals answer `outcomes` in turn, counting what it reports. */
function renewing(outcomes: readonly Outcome[], everyMs = NEVER_MS) {
  const seen = { renewals: 0, lost: 0, errors: 0 };
  const renewal = keepRenewing({
    everyMs,
    renew: async () => {
      const outcome = outcomes[seen.renewals++] ?? "held";
      if (outcome === "failed") throw new Error("store unavailable");
      return outcome === "held";
    },
    onLost: () => seen.lost++,
    onError: () => seen.errors++,
  });
  return { seen, renewal };
}

describe("keeping a lease alive", () => {
  test.each([
    ["a lease still held is renewed each time, and nothing is reported", ["held", "held", "held"], { renewals: 3, lost: 0, errors: 0 }],
    ["a lost lease is reported once, and no renewal follows", ["held", "lost", "held"], { renewals: 2, lost: 1, errors: 0 }],
    ["a failed renewal is reported, and the next one is tried all the same", ["failed", "failed", "held"], { renewals: 3, lost: 0, errors: 2 }],
    ["a lease lost after a failed renewal is reported lost", ["failed", "lost"], { renewals: 2, lost: 1, errors: 1 }],
  ] as const)("%s", async (_, outcomes, expected) => {
    const { seen, renewal } = renewing(outcomes);
    for (let i = 0; i < outcomes.length; i++) await renewal.renewNow();
    renewal.stop();
    expect(seen).toEqual(expected);
  });

  test("once stopped it renews no more, and a renewal in flight reports nothing", async () => {
    let answer: (held: boolean) => void = () => {};
    let renewals = 0;
    let lost = 0;
    const renewal = keepRenewing({
      everyMs: NEVER_MS,
      renew: () => (renewals++, new Promise<boolean>((resolve) => (answer = resolve))),
      onLost: () => lost++,
    });
    const inFlight = renewal.renewNow();
    renewal.stop();
    answer(false);
    await inFlight;
    await renewal.renewNow();
    expect({ renewals, lost }).toEqual({ renewals: 1, lost: 0 });
  });

  test("renews on its own every everyMs until stopped", async () => {
    const { seen, renewal } = renewing([], 20);
    await Bun.sleep(110);
    renewal.stop();
    const renewed = seen.renewals;
    await Bun.sleep(60);
    expect(renewed).toBeGreaterThanOrEqual(2);
    expect(renewed).toBeLessThanOrEqual(5);
    expect(seen.renewals).toBe(renewed);
  });
});
