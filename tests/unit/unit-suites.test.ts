// `npm run test:unit` runs tests/unit alone, on a machine with no PostgreSQL or Redis, in seconds: every
// suite here must stay pure logic. This reads each suite, and the test-only code it imports, for what
// would make it more than that, so that such a suite is written under tests/integration instead.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..", "..");

/** What a pure suite never does, with the words it is found by. */
const IMPURE: Array<[string, RegExp]> = [
  ["starts a server", /\bBun\.(?:serve|listen)\(|\bcreateServer\(/],
  ["runs a process", /\bBun\.spawn(?:Sync)?\(|\bnode:child_process\b/],
  ["opens a database (PGlite, PostgreSQL or the composition root's)", /\bcreatePgliteDatabase\(|\bcreatePostgresDatabase\(|\bcreateNeonDatabase\(|\bbuildDeps(?:OrExit)?\(|\bprobePostgres\(/],
  ["talks to Redis", /\bcreateRedisKeyValueStore\(|\bcreateUpstashKeyValueStore\(|\bprobeRedis\(/],
];

/** The relative imports of a file: static, bare and dynamic. */
function localImports(source: string): string[] {
  const found = [...source.matchAll(/(?:\bfrom\s*|^\s*import\s*|\bimport\(\s*)["'](\.[^"']+)["']/gm)].map((m) => m[1]!);
  return [...new Set(found)];
}

/** The files under tests/ a suite imports, itself first, followed transitively (the source under test is not followed). */
function testCodeOf(suite: string): string[] {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of localImports(readFileSync(join(ROOT, file), "utf8"))) {
      const target = posix.normalize(posix.join(dirname(file), specifier));
      if (target.startsWith("tests/") && target.endsWith(".ts") && existsSync(join(ROOT, target))) visit(target);
    }
  };
  visit(suite);
  return [...seen];
}

const suites = readdirSync(join(ROOT, "tests", "unit"))
  .filter((name) => name.endsWith(".test.ts"))
  .map((name) => relative(ROOT, join(ROOT, "tests", "unit", name)).split("\\").join("/"))
  .sort();

describe("the unit suites", () => {
  test("are found", () => {
    expect(suites).toContain("tests/unit/layers.test.ts");
    expect(testCodeOf("tests/unit/embedded-text.test.ts")).toContain("tests/support/temp-dirs.ts");
  });

  test("start no server or process and open no database or Redis, themselves or through test-only code", () => {
    const impure = suites.flatMap((suite) =>
      testCodeOf(suite).flatMap((file) => {
        // This file names the words it looks for.
        if (file === "tests/unit/unit-suites.test.ts") return [];
        const source = readFileSync(join(ROOT, file), "utf8");
        return IMPURE.filter(([, words]) => words.test(source)).map(([what]) => `${suite}${file === suite ? "" : ` (through ${file})`} ${what}`);
      }),
    );
    expect(impure).toEqual([]);
  });
});
