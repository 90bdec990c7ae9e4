import { expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../support/process.ts";

const BENCH = join(REPO_ROOT, "bench");
/** Every file of bench/ that a person could run, that is all but the shared helpers. */
const SCRIPTS = readdirSync(BENCH).filter((f) => f.endsWith(".ts") && f !== "support.ts").sort();

test.each(SCRIPTS)("bun bench/%s --help prints its usage and exits 0, running nothing", async (script) => {
  const proc = Bun.spawn([process.execPath, join(BENCH, script), "--help"], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ exitCode, stderr }).toEqual({ exitCode: 0, stderr: "" });
  expect(stdout).toStartWith("usage: ");
});
