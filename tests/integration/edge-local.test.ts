// npm run edge:deno and npm run edge:workerd as a new user types them: the local stores, the worker
// and the API on the runtime, the sample story seeded, and the chat it prints streaming a reply. Once
// with nothing given (PGlite, the in-process store, the offline provider), and on Deno once with this
// machine's Postgres and Redis given.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseSseEvents } from "../support/chat.ts";
import { edgeRuntimeMissing } from "../support/edge-runtime.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";
import { collectOutput, freePort, REPO_ROOT } from "../support/process.ts";
import { probeRedis, testRedisUrl } from "../support/redis.ts";

// Seeding, then wrangler bundling the Worker: tens of seconds on a busy machine.
setDefaultTimeout(240_000);

const READY = /The edge API on \w+ is ready\./;

interface Started {
  output(): string;
  stop(): Promise<number>;
}

async function startEdge(script: "edge:deno" | "edge:workerd", env: Record<string, string>, args: readonly string[]): Promise<Started> {
  // setsid: npm, bun, the worker, deno or wrangler and workerd are one process group, stopped together if need be.
  const proc = Bun.spawn(["setsid", "npm", "run", "--silent", script, ...(args.length > 0 ? ["--", ...args] : [])], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", CI: "1", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = collectOutput(proc);
  const stop = async () => {
    // Ctrl-C, as a user stops it: the command stops its children itself.
    proc.kill("SIGINT");
    const code = await Promise.race([proc.exited, Bun.sleep(20_000).then(() => undefined)]);
    if (code === undefined) {
      process.kill(-proc.pid, "SIGKILL");
      return proc.exited;
    }
    return code;
  };
  const deadline = Date.now() + 200_000;
  while (!READY.test(output())) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`npm run ${script} did not get ready:\n${output()}`);
    }
    await Bun.sleep(250);
  }
  // The banner is printed whole, in one write.
  await Bun.sleep(100);
  return { output, stop };
}

/** The curl the banner prints, sent: the chat's events. */
async function chatAsPrinted(output: string) {
  const match = /curl -N (\S+) -H 'content-type: application\/json' -d '([^']+)'/.exec(output);
  expect(match).not.toBeNull();
  const res = await fetch(match![1]!, { method: "POST", headers: { "content-type": "application/json" }, body: match![2]! });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/event-stream");
  return parseSseEvents(await res.text());
}

const scratch: string[] = [];
afterAll(async () => {
  for (const dir of scratch) await rm(dir, { recursive: true, force: true });
});

async function runAndChat(script: "edge:deno" | "edge:workerd", given: Record<string, string>, args: readonly string[] = []): Promise<string> {
  const dataDir = await mkdtemp(join(tmpdir(), "edge-local-"));
  scratch.push(dataDir);
  const port = String(await freePort());
  const edge = await startEdge(script, { DATA_DIR: dataDir, PORT: port, ...given }, args);
  try {
    const events = await chatAsPrinted(edge.output());
    const tokens = events.filter((e) => "token" in e);
    expect(tokens.length).toBeGreaterThan(1);
    expect(events.at(-1)).toHaveProperty("done", true);
    expect(edge.output()).toContain('Sample book  "The Mending Room" ingested');
    expect(edge.output()).not.toContain("dependency unreachable");
  } finally {
    expect(await edge.stop()).toBe(0);
  }
  // Ctrl-C stops everything the command started: no process is left with its environment (PORT
  // reaches every one, workerd's too).
  expect(await processesWith(`PORT=${port}`)).toEqual([]);
  return edge.output();
}

/** The processes whose environment holds `entry` (Linux: /proc/<pid>/environ), as "pid command". */
async function processesWith(entry: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of (await readdir("/proc")).filter((name) => /^\d+$/.test(name))) {
    try {
      const environ = (await readFile(`/proc/${pid}/environ`, "utf8")).split("\0");
      if (environ.includes(entry)) found.push(`${pid} ${(await readFile(`/proc/${pid}/cmdline`, "utf8")).replaceAll("\0", " ").slice(0, 120)}`);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

for (const runtime of ["deno", "workerd"] as const) {
  const missing = edgeRuntimeMissing(runtime);
  if (missing) console.log(`skipping npm run edge:${runtime}: ${missing}`);
  test.skipIf(missing !== undefined)(`npm run edge:${runtime} with nothing configured serves a chat that streams, on PGlite and the in-process store`, async () => {
    const output = await runAndChat(`edge:${runtime}`, {});
    expect(output).toContain("Postgres     embedded (PGlite");
    expect(output).toContain("Redis        in-process store");
  });
}

const postgres = await probePostgres();
const redis = await probeRedis();
describe.skipIf(!postgres.reachable || !redis.reachable || edgeRuntimeMissing("deno") !== undefined)("with this machine's Postgres and Redis", () => {
  let testDb: TestDatabase | undefined;
  afterAll(async () => {
    await testDb?.drop();
  });

  test("npm run edge:deno given DATABASE_URL and REDIS_URL serves a chat that streams, on those servers", async () => {
    if (!postgres.reachable) throw new Error("unreachable: the suite is skipped without Postgres");
    testDb = await createTestDatabase(postgres.url);
    // A database of its own, so the fixed queue key is not shared with other suites.
    const redisUrl = `${testRedisUrl.replace(/\/\d*$/, "")}/12`;
    const output = await runAndChat("edge:deno", { DATABASE_URL: testDb.url, REDIS_URL: redisUrl }, ["--write-frontend-tables"]);
    expect(output).toContain(`Redis        ${redisUrl}`);
    expect(output).not.toContain("PGlite");
  });
});
