import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, REPO_ROOT } from "../support/process.ts";

// `npm start` itself (npm, the shell it runs the script in, bun), as a process manager starts it; the
// first start runs initdb for the embedded Postgres and ingests the sample story.
setDefaultTimeout(180_000);

const READY_TIMEOUT_MS = 120_000;
const STOP_BOUND_MS = 30_000;
const npm = Bun.which("npm");
if (!npm) console.warn("skipping the npm start signal tests: npm is not installed");

/** Pids of the processes below `pid`, from /proc (the tree npm → sh → bun). */
async function descendants(pid: number): Promise<number[]> {
  const parents = new Map<number, number>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    // The command name (field 2) is in parentheses and may hold spaces; the parent pid follows it.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (stat) parents.set(Number(entry), ppid);
  }
  const found: number[] = [];
  const visit = (parent: number) => {
    for (const [child, ppid] of parents) {
      if (ppid === parent) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    // A zombie is gone for every purpose here but still answers signal 0.
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

async function answers(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/health`, { signal: AbortSignal.timeout(5_000) })).ok;
  } catch {
    return false;
  }
}

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "npm-start-signals-"));
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

describe.skipIf(!npm)("npm start under a process manager", () => {
  test.each(["SIGTERM", "SIGINT"] as const)("%s sent to the npm process stops the whole tree and frees the port", async (signal) => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const proc = Bun.spawn([npm!, "start"], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", PORT: String(port), DATA_DIR: dataDir, LOG_FORMAT: "json" },
      stdout: "pipe",
      stderr: "pipe",
    });
    let stdout = "";
    void (async () => {
      for await (const chunk of proc.stdout) stdout += new TextDecoder().decode(chunk);
    })();
    let tree: number[] = [];
    try {
      const deadline = Date.now() + READY_TIMEOUT_MS;
      while (!stdout.includes(`"msg":"ready"`)) {
        if (proc.exitCode !== null) throw new Error(`npm start exited with ${proc.exitCode}:\n${stdout}`);
        if (Date.now() > deadline) throw new Error(`npm start was not ready:\n${stdout}`);
        await Bun.sleep(100);
      }
      tree = await descendants(proc.pid);
      expect(tree.length).toBeGreaterThan(0);
      expect(await answers(url)).toBe(true);

      process.kill(proc.pid, signal);
      // Generous bounds for a loaded machine, only so that a tree that never stops fails the test
      // instead of hanging it: npm waits on a shell that waits on a bun that never got the signal.
      const npmExited = await Promise.race([proc.exited.then(() => true), Bun.sleep(STOP_BOUND_MS).then(() => false)]);
      for (let waited = 0; waited < STOP_BOUND_MS && tree.some(alive); waited += 100) await Bun.sleep(100);
      expect({ npmExited, left: tree.filter(alive) }).toEqual({ npmExited: true, left: [] });
      expect(await answers(url)).toBe(false);
      expect(stdout).toContain(`"msg":"stopped"`);
    } finally {
      proc.kill("SIGKILL");
      for (const pid of tree.filter(alive)) process.kill(pid, "SIGKILL");
    }
  });
});
