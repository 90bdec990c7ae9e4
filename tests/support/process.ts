import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Starts project entry points as real child processes, the way an operator would, for tests that
 * must see the process itself (start-up errors, signals, the HTTP server on a real port).
 */

export const REPO_ROOT = join(import.meta.dir, "..", "..");

export interface RunResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs `bun <entry> [args]` to completion with only the given variables (plus PATH and HOME). */
export async function runEntry(entry: string, env: Record<string, string>, timeoutMs = 60_000, args: readonly string[] = []): Promise<RunResult> {
  const proc = Bun.spawn([process.execPath, entry, ...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdout: "pipe",
    stderr: "pipe",
    timeout: timeoutMs,
  });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { exitCode, stdout, stderr };
}

// Below the kernel's ephemeral range (32768–60999 by default): a port the system hands to a server
// the service under test starts itself (`port: 0`, its local stores) can not be the one chosen here
// after the probe lets it go. One handed out by the system was, once: workerd then found its port taken.
const FREE_PORT_FIRST = 20_000;
const FREE_PORT_LAST = 32_000;

/** A port nothing listens on now, and that no `port: 0` server started later will be given. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = FREE_PORT_FIRST + Math.floor(Math.random() * (FREE_PORT_LAST - FREE_PORT_FIRST));
    try {
      const probe = Bun.serve({ port, hostname: "127.0.0.1", fetch: () => new Response() });
      await probe.stop(true);
      return port;
    } catch {
      // Taken: another one.
    }
  }
}

/** How often a starting service is asked for /health: when it became ready is known to within this. */
const READY_POLL_MS = 10;

/**
 * Waits until `${url}/health` answers 200 and returns the milliseconds since `since` (the spawn);
 * throws, with `logs()`, when the process exits first or `timeoutMs` passes. The caller stops it.
 */
export async function waitForHealth(url: string, proc: { exitCode: number | null }, since: number, timeoutMs: number, what: string, logs: () => string): Promise<number> {
  const deadline = since + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${what} exited with ${proc.exitCode} before it was ready:\n${logs()}`);
    try {
      if ((await fetch(`${url}/health`)).ok) return performance.now() - since;
    } catch {
      // not listening yet
    }
    if (performance.now() > deadline) throw new Error(`${what} was not ready after ${timeoutMs} ms:\n${logs()}`);
    await Bun.sleep(READY_POLL_MS);
  }
}

export interface ServiceProcess {
  url: string;
  dataDir: string;
  proc: ReturnType<typeof Bun.spawn>;
  /** Milliseconds from the spawn to the first 200 from /health. */
  readyMs: number;
  /** Everything the process wrote so far: its log lines (stdout), then what it wrote to stderr. */
  logs(): string;
  /** The same, stream by stream. */
  output(): { stdout: string; stderr: string };
  stop(signal?: NodeJS.Signals): Promise<number>;
}

/**
 * Starts a long-running entry point on a free port with a fresh DATA_DIR and waits until /health
 * answers. The port goes in PORT, or in `portVariable` (the worker listens on METRICS_PORT).
 */
export async function startService(
  entry: string,
  env: Record<string, string> = {},
  readyTimeoutMs = 90_000,
  portVariable = "PORT",
  args: readonly string[] = [],
  /** Flags for the runtime itself, before the entry (`--cpu-prof`). */
  runtimeArgs: readonly string[] = [],
  /** The runtime's executable: this Bun unless another is named (`deno`). */
  runtime: string = process.execPath,
): Promise<ServiceProcess> {
  const port = await freePort();
  const dataDir = await mkdtemp(join(tmpdir(), "service-data-"));
  const spawnedAt = performance.now();
  const proc = Bun.spawn([runtime, ...runtimeArgs, entry, ...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", [portVariable]: String(port), DATA_DIR: dataDir, ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = { stdout: "", stderr: "" };
  for (const stream of ["stdout", "stderr"] as const) {
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of proc[stream] as ReadableStream<Uint8Array>) output[stream] += decoder.decode(chunk, { stream: true });
    })();
  }
  const logs = () => output.stdout + output.stderr;
  const url = `http://127.0.0.1:${port}`;
  let readyMs: number;
  try {
    readyMs = await waitForHealth(url, proc, spawnedAt, readyTimeoutMs, entry, logs);
  } catch (err) {
    proc.kill();
    throw err;
  }
  return {
    url,
    dataDir,
    proc,
    readyMs,
    logs,
    output: () => ({ ...output }),
    async stop(signal = "SIGTERM") {
      proc.kill(signal);
      const code = await proc.exited;
      await rm(dataDir, { recursive: true, force: true });
      return code;
    },
  };
}

/** Everything a spawned process writes to stdout and stderr, interleaved as it arrives. */
export function collectOutput(proc: { stdout: ReadableStream<Uint8Array>; stderr: ReadableStream<Uint8Array> }): () => string {
  let output = "";
  for (const stream of [proc.stdout, proc.stderr]) {
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) output += decoder.decode(chunk, { stream: true });
    })();
  }
  return () => output;
}
