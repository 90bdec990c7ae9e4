/**
 * The part of `bun:test` the core suites use, on top of `Deno.test`, so the same test files run
 * under Deno unchanged (deno.json maps `bun:test` here). Bun's `expect` mirrors Jest's, so the
 * npm `expect` package supplies the matchers, plus the one Bun-only matcher the suites use. A suite
 * that starts using another part of `bun:test` fails to load under Deno until it is added here.
 *
 * Tests are registered flat, named "describe > … > test" as Bun's reporter names them, rather than
 * as t.step children, so Deno counts each test once in its summary, as Bun does.
 */
import { expect as jestExpect } from "expect";

type TestFn = () => unknown;

// The project type-checks with Bun's types only, so the two Deno calls used here are declared.
declare const Deno: {
  test(definition: {
    name: string;
    fn: () => Promise<void>;
    ignore: boolean;
    sanitizeOps: boolean;
    sanitizeResources: boolean;
  }): void;
  inspect(value: unknown): string;
};

jestExpect.extend({
  toStartWith(received: unknown, prefix: string) {
    const pass = typeof received === "string" && received.startsWith(prefix);
    return {
      pass,
      message: () => `expected ${JSON.stringify(received)} ${pass ? "not " : ""}to start with ${JSON.stringify(prefix)}`,
    };
  },
});

interface BunOnlyMatchers<R> {
  toStartWith(prefix: string): R;
}
type Matchers = ReturnType<typeof jestExpect> & BunOnlyMatchers<void> & { not: BunOnlyMatchers<void> };

export const expect = jestExpect as typeof jestExpect & ((actual: unknown) => Matchers);

const scopes: string[] = [];
let skippedDepth = 0;

function register(name: string, fn: TestFn): void {
  Deno.test({
    name: [...scopes, name].join(" > "),
    ignore: skippedDepth > 0,
    // Bun checks neither pending timers nor open resources at a test's end; the suites are
    // written to that contract, so Deno's leak checks would fail tests Bun passes.
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      await fn();
    },
  });
}

function runDescribe(name: string, body: () => void, skip: boolean): void {
  scopes.push(name);
  if (skip) skippedDepth++;
  try {
    body();
  } finally {
    if (skip) skippedDepth--;
    scopes.pop();
  }
}

/** Bun's `.each` titles: `%s` and `%p` take the row's values in turn, `$key` a field of an object row. */
function eachTitle(template: string, row: unknown, args: unknown[]): string {
  let next = 0;
  const titled = template.replace(/%[sp]/g, (flag) => {
    const value = args[next++];
    return flag === "%s" ? String(value) : Deno.inspect(value);
  });
  if (row === null || typeof row !== "object" || Array.isArray(row)) return titled;
  const fields = row as Record<string, unknown>;
  return titled.replace(/\$(\w+)/g, (whole, key: string) => (key in fields ? String(fields[key]) : whole));
}

function each<Row>(rows: readonly Row[]) {
  return (template: string, fn: (...args: never[]) => unknown) => {
    rows.forEach((row) => {
      const args: unknown[] = Array.isArray(row) ? row : [row];
      register(eachTitle(template, row, args), () => (fn as (...a: unknown[]) => unknown)(...args));
    });
  };
}

export const test = Object.assign(register, { each });

export const describe = Object.assign((name: string, body: () => void) => runDescribe(name, body, false), {
  skipIf: (condition: boolean) => (name: string, body: () => void) => runDescribe(name, body, condition),
});
