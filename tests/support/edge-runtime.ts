import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { collectOutput, freePort, REPO_ROOT, waitForHealth } from "./process.ts";

/**
 * The API on an edge runtime, as an operator starts it: Deno through deno.json's `api` task, workerd
 * through `wrangler dev` with wrangler.jsonc (both binaries from the project's devDependencies). And
 * `workerd-bundle`, for the benchmarks: the bundle `wrangler deploy` would upload, served by workerd
 * alone (no wrangler, no dev proxy in front), as close to a deployed Worker as this machine gets.
 */

export type EdgeRuntime = "deno" | "workerd" | "workerd-bundle";
/** What the end-to-end suite runs the API on: the two commands an operator is given. */
export const EDGE_RUNTIMES: readonly EdgeRuntime[] = ["deno", "workerd"];

const BIN = join(REPO_ROOT, "node_modules", ".bin");
const DENO = join(BIN, "deno");
const WRANGLER = join(BIN, "wrangler");
const WORKERD = join(BIN, "workerd");
const BINARIES: Record<EdgeRuntime, readonly string[]> = { deno: [DENO], workerd: [WRANGLER], "workerd-bundle": [WRANGLER, WORKERD] };

/** Why the runtime cannot be started here (its binary is not installed), or undefined when it can. */
export function edgeRuntimeMissing(runtime: EdgeRuntime): string | undefined {
  const missing = BINARIES[runtime].find((binary) => !existsSync(binary));
  return missing && `${missing} is not installed (npm ci installs it)`;
}

/** wrangler's environment: no telemetry, no prompts, its logs kept apart. */
const wranglerEnv = (scratch: string) => ({ PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NO_COLOR: "1", WRANGLER_SEND_METRICS: "false", WRANGLER_LOG_PATH: join(scratch, "logs"), CI: "1" });

/**
 * `wrangler deploy --dry-run --outdir <outDir>` (plus `args`, e.g. `--minify`): the Worker's bundle as a
 * deploy uploads it, nothing sent. Returns what wrangler printed.
 */
export async function buildWorkerdBundle(outDir: string, args: readonly string[] = []): Promise<string> {
  const proc = Bun.spawn([WRANGLER, "deploy", "--dry-run", "--outdir", outDir, ...args], { cwd: REPO_ROOT, env: wranglerEnv(outDir), stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`wrangler deploy --dry-run exited with ${code}:\n${stdout}${stderr}`);
  await rm(join(outDir, "logs"), { recursive: true, force: true });
  return stdout;
}

/** wrangler.jsonc (its comments are whole lines). */
async function wranglerConfig(): Promise<{ main: string; compatibility_date: string; compatibility_flags?: string[]; vars?: Record<string, string> }> {
  const text = await readFile(join(REPO_ROOT, "wrangler.jsonc"), "utf8");
  return JSON.parse(text.split("\n").filter((line) => !line.trimStart().startsWith("//")).join("\n"));
}

/**
 * A workerd configuration serving the bundle in `bundleDir` on `port`, with wrangler.jsonc's
 * compatibility date, flags and vars and `env` as text bindings (what a Worker's `env` holds).
 */
async function workerdConfig(bundleDir: string, env: Record<string, string>, port: number): Promise<string> {
  const config = await wranglerConfig();
  const main = config.main.replace(/^.*\//, "").replace(/\.ts$/, ".js");
  // The main module first: workerd takes the first as the Worker's.
  const files = [main, ...(await readdir(bundleDir)).filter((f) => f !== main && (f.endsWith(".js") || f.endsWith(".css") || f.endsWith(".png")))];
  // As wrangler.jsonc's rules type them: Swagger UI's files are Text, its icon Data.
  const modules = files.map((f) => `(name = ${JSON.stringify(f)}, ${f === main ? "esModule" : f.endsWith(".png") ? "data" : "text"} = embed ${JSON.stringify(f)})`);
  const bindings = Object.entries({ ...config.vars, ...env }).map(([k, v]) => `(name = ${JSON.stringify(k)}, text = ${JSON.stringify(v)})`);
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .api),
    # The stores, indexes and gateway are on loopback, which a Worker's default outbound refuses.
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const api :Workerd.Worker = (
  modules = [${modules.join(", ")}],
  compatibilityDate = ${JSON.stringify(config.compatibility_date)},
  compatibilityFlags = ${JSON.stringify(config.compatibility_flags ?? [])},
  bindings = [${bindings.join(", ")}],
);
`;
}

/** deno.json's `api` task as a command line, `--inspect` added to its `deno run`. */
async function denoTaskWithInspector(port: number): Promise<string[]> {
  const task = (JSON.parse(await readFile(join(REPO_ROOT, "deno.json"), "utf8")) as { tasks: { api: string } }).tasks.api.split(/\s+/);
  const run = task.indexOf("run");
  return [DENO, ...task.slice(1, run + 1), `--inspect=127.0.0.1:${port}`, ...task.slice(run + 1)];
}

export interface EdgeStartOptions {
  /** workerd-bundle: a bundle buildWorkerdBundle made already (built into a scratch dir otherwise). */
  bundleDir?: string;
  /** deno and workerd-bundle: the V8 inspector on this loopback port, for a CPU profile (bench/chat.ts --profile). */
  inspectorPort?: number;
}

export interface EdgeService {
  url: string;
  /** The process started: `deno task` (the server is its child), or wrangler (workerd runs under it). */
  pid: number;
  /** Milliseconds from the spawn to the first 200 from /health (for workerd, wrangler's bundling included). */
  readyMs: number;
  logs(): string;
  stop(): Promise<void>;
}

/** A cold start of a workerd dev server (wrangler bundles first) takes seconds on a busy machine. */
const READY_TIMEOUT_MS = 90_000;

/** Starts the API on the runtime with these variables and waits for its first answer to /health. */
export async function startEdgeRuntime(runtime: EdgeRuntime, env: Record<string, string>, options: EdgeStartOptions = {}): Promise<EdgeService> {
  const port = await freePort();
  const scratch = await mkdtemp(join(tmpdir(), `edge-${runtime}-`));
  const base = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NO_COLOR: "1" };
  let command: string[];
  let processEnv: Record<string, string>;
  /** What stop() removes besides the scratch dir. */
  let configFile: string | undefined;
  if (runtime === "deno") {
    // The task's own command, with the inspector flag after `run` when one is asked for.
    command = options.inspectorPort === undefined ? [DENO, "task", "--quiet", "api"] : await denoTaskWithInspector(options.inspectorPort);
    processEnv = { ...base, DENO_NO_UPDATE_CHECK: "1", ...env, HOST: "127.0.0.1", PORT: String(port) };
  } else if (runtime === "workerd") {
    // A Worker sees only what wrangler gives it: the variables go in through an env file.
    const envFile = join(scratch, "worker.env");
    await writeFile(envFile, Object.entries(env).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join("\n"));
    command = [
      WRANGLER,
      "dev",
      "--ip", "127.0.0.1",
      "--port", String(port),
      "--inspector-port", String(await freePort()),
      "--env-file", envFile,
      "--persist-to", join(scratch, "state"),
      "--show-interactive-dev-session=false",
    ];
    processEnv = wranglerEnv(scratch);
  } else {
    const bundleDir = options.bundleDir ?? join(scratch, "bundle");
    if (!options.bundleDir) await buildWorkerdBundle(bundleDir);
    // workerd resolves `embed` paths from the configuration's own directory.
    configFile = join(bundleDir, `workerd-${port}.capnp`);
    await writeFile(configFile, await workerdConfig(bundleDir, env, port));
    command = [WORKERD, "serve", configFile, ...(options.inspectorPort === undefined ? [] : [`--inspector-addr=127.0.0.1:${options.inspectorPort}`])];
    processEnv = base;
  }
  const spawnedAt = performance.now();
  const proc = Bun.spawn(command, { cwd: REPO_ROOT, env: processEnv, stdout: "pipe", stderr: "pipe" });
  const output = collectOutput(proc);
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.exited;
    await Promise.all([rm(scratch, { recursive: true, force: true }), configFile && rm(configFile, { force: true })]);
  };
  let readyMs: number;
  try {
    readyMs = await waitForHealth(url, proc, spawnedAt, READY_TIMEOUT_MS, runtime, output);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, pid: proc.pid, readyMs, logs: output, stop };
}
