import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, REPO_ROOT } from "./process.ts";

/**
 * The API on an edge runtime, as an operator starts it: Deno through deno.json's `api` task, workerd
 * through `wrangler dev` with wrangler.jsonc (both binaries from the project's devDependencies).
 */

export type EdgeRuntime = "deno" | "workerd";
export const EDGE_RUNTIMES: readonly EdgeRuntime[] = ["deno", "workerd"];

const BINARIES: Record<EdgeRuntime, string> = {
  deno: join(REPO_ROOT, "node_modules", ".bin", "deno"),
  workerd: join(REPO_ROOT, "node_modules", ".bin", "wrangler"),
};

/** Why the runtime cannot be started here (its binary is not installed), or undefined when it can. */
export function edgeRuntimeMissing(runtime: EdgeRuntime): string | undefined {
  return existsSync(BINARIES[runtime]) ? undefined : `${BINARIES[runtime]} is not installed (npm ci installs it)`;
}

export interface EdgeService {
  url: string;
  logs(): string;
  stop(): Promise<void>;
}

/** A cold start of a workerd dev server (wrangler bundles first) takes seconds on a busy machine. */
const READY_TIMEOUT_MS = 90_000;

/** Starts the API on the runtime with these variables and waits for its first answer to /health. */
export async function startEdgeRuntime(runtime: EdgeRuntime, env: Record<string, string>): Promise<EdgeService> {
  const port = await freePort();
  const scratch = await mkdtemp(join(tmpdir(), `edge-${runtime}-`));
  const base = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NO_COLOR: "1" };
  let command: string[];
  let processEnv: Record<string, string>;
  if (runtime === "deno") {
    command = [BINARIES.deno, "task", "--quiet", "api"];
    processEnv = { ...base, DENO_NO_UPDATE_CHECK: "1", ...env, HOST: "127.0.0.1", PORT: String(port) };
  } else {
    // A Worker sees only what wrangler gives it: the variables go in through an env file.
    const envFile = join(scratch, "worker.env");
    await writeFile(envFile, Object.entries(env).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join("\n"));
    command = [
      BINARIES.workerd,
      "dev",
      "--ip", "127.0.0.1",
      "--port", String(port),
      "--inspector-port", String(await freePort()),
      "--env-file", envFile,
      "--persist-to", join(scratch, "state"),
      "--show-interactive-dev-session=false",
    ];
    processEnv = { ...base, WRANGLER_SEND_METRICS: "false", WRANGLER_LOG_PATH: join(scratch, "logs"), CI: "1" };
  }
  const proc = Bun.spawn(command, { cwd: REPO_ROOT, env: processEnv, stdout: "pipe", stderr: "pipe" });
  let output = "";
  for (const stream of [proc.stdout, proc.stderr]) {
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) output += decoder.decode(chunk, { stream: true });
    })();
  }
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.exited;
    await rm(scratch, { recursive: true, force: true });
  };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (proc.exitCode !== null) {
      await stop();
      throw new Error(`${runtime} exited with ${proc.exitCode} before it was ready:\n${output}`);
    }
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${runtime} was not ready after ${READY_TIMEOUT_MS} ms:\n${output}`);
    }
    await Bun.sleep(200);
  }
  return { url, logs: () => output, stop };
}
