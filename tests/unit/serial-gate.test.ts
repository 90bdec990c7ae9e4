import { expect, test } from "bun:test";
import { createSerialGate } from "../../ingest/phases/book-nlp/serial-gate.ts";

test("a gate runs its tasks one at a time, in the order they arrived, and a failing task lets the next one through", async () => {
  const gate = createSerialGate();
  const log: string[] = [];
  const task = (name: string, fail = false) => async () => {
    log.push(`${name} start`);
    await Bun.sleep(5);
    log.push(`${name} end`);
    if (fail) throw new Error(name);
    return name;
  };
  const results = await Promise.allSettled([gate.run(task("a")), gate.run(task("b", true)), gate.run(task("c"))]);
  expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
  expect(log).toEqual(["a start", "a end", "b start", "b end", "c start", "c end"]);
});
