/**
 * Chat with the gateway pacing its tokens as a model does (one every `--token-interval-ms`, 10 ms by
 * default: one wake-up per token), where the chat section's gateway sends a reply all at once and so
 * hides what each token costs. For first and follow-up turns at 1 and 32 concurrent sessions, the API's
 * CPU per exchange is measured with replies of SHORT_REPLY and LONG_REPLY tokens; the difference over
 * the extra tokens is the API's CPU per streamed token, and what remains at zero tokens is the turn's own
 * work (everything but the streaming). In the same run, two floors take the same paced streams from the
 * same gateway: a bare pass-through (Bun's fetch body handed to its Response) and a minimal
 * parse-and-reframe proxy (SSE in, one `data: {"token": …}` event out per token), each its own process,
 * their CPU per token measured alike.
 *
 * In `npm run bench` (section `chat-paced`), or alone:
 *   bun bench/chat-paced.ts [--token-interval-ms 10] [--runtime bun] [--stores embedded|postgres|production|edge] [--turns N]
 * `--runtime` names the API's runtime (bench/chat.ts API_RUNTIMES: bun, bun-edge-drivers, deno, workerd,
 * workerd-bundle); the section `runtimes` (bench/runtimes.ts) runs them side by side.
 */
import { rmSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, REPO_ROOT } from "../tests/support/process.ts";
import floors from "./floors/proxy.ts";
import { API_RUNTIMES, apiRuntime, edgeStores, EMBEDDED, liveStores, pacedMessage, startGatewayProcess, withChatApi, type ApiRuntime, type ChatApi, type Stores } from "./chat.ts";
import { answerHelp, exitWithParent, markdownTable, option, processCpuNanoseconds, reps, spawnChild, spawnCommand, type BenchContext, type BenchSection } from "./support.ts";

const BIN = join(REPO_ROOT, "node_modules", ".bin");

export const DEFAULT_TOKEN_INTERVAL_MS = 10;
export const SHORT_REPLY = 20;
export const LONG_REPLY = 200;
export const SESSIONS = [1, 32];
/** Unpaced first turns before any is measured, for the JIT (as the chat section's warm-up, shorter). */
const PACED_WARMUP = 100;
/** Unpaced streams through each floor before it is measured. */
const FLOOR_WARMUP = 100;

// ---------------------------------------------------------------------------------------------
// The two floors (bench/floors/proxy.ts), in a process of their own on the API's runtime

/** The runtime the floors run on: each API runtime is compared with the minimal proxy on its own. */
export type FloorRuntime = "bun" | "deno" | "workerd";
export const floorRuntimeOf = (runtime: Pick<ApiRuntime, "name">): FloorRuntime =>
  runtime.name.startsWith("workerd") ? "workerd" : runtime.name === "deno" ? "deno" : "bun";

/** `bun bench/chat-paced.ts --proxy <gateway URL>`: the floors on Bun. */
function serveProxies(gatewayURL: string) {
  const env = { GATEWAY_URL: gatewayURL };
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: (request) => floors.fetch(request, env) });
  console.log(`http://127.0.0.1:${server.port}`);
  exitWithParent();
}

export interface FloorsProcess {
  runtime: FloorRuntime;
  url: string;
  pid: number;
  stop(): void;
}

/** A workerd configuration serving the floors' module (`main.js` in its folder) on `port`. */
const floorsWorkerdConfig = (gatewayURL: string, port: number) => `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .floors), (name = "internet", network = (allow = ["public", "private", "local"]))],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const floors :Workerd.Worker = (
  modules = [(name = "main.js", esModule = embed "main.js")],
  compatibilityDate = "2025-06-01",
  bindings = [(name = "GATEWAY_URL", text = ${JSON.stringify(gatewayURL)})],
);
`;

/** The floors' process on `runtime`, streaming from the gateway at `gatewayURL`. */
export async function startFloorsProcess(gatewayURL: string, runtime: FloorRuntime = "bun"): Promise<FloorsProcess> {
  const base = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NO_COLOR: "1" };
  if (runtime === "bun") {
    const child = await spawnChild(import.meta.path, ["--proxy", gatewayURL], 1);
    return { runtime, url: child.lines[0]!, pid: child.pid, stop: child.stop };
  }
  if (runtime === "deno") {
    const child = await spawnCommand([join(BIN, "deno"), "run", "--allow-net", "--allow-env", join(import.meta.dir, "floors", "deno.ts")], 1, { ...base, DENO_NO_UPDATE_CHECK: "1", GATEWAY_URL: gatewayURL });
    return { runtime, url: child.lines[0]!, pid: child.pid, stop: child.stop };
  }
  // workerd runs JavaScript: the module as Bun transpiles it, in a folder of its own with the configuration.
  const dir = await mkdtemp(join(tmpdir(), "bench-floors-"));
  const port = await freePort();
  await writeFile(join(dir, "main.js"), new Bun.Transpiler({ loader: "ts" }).transformSync(await Bun.file(join(import.meta.dir, "floors", "proxy.ts")).text()));
  await writeFile(join(dir, "floors.capnp"), floorsWorkerdConfig(gatewayURL, port));
  const child = Bun.spawn([join(BIN, "workerd"), "serve", join(dir, "floors.capnp")], { env: base, stdout: "ignore", stderr: "inherit" });
  const url = `http://127.0.0.1:${port}`;
  const stop = () => {
    child.kill();
    rmSync(dir, { recursive: true, force: true });
  };
  for (let tries = 0; ; tries++) {
    if ((await fetch(url).catch(() => undefined))?.status === 404) break;
    if (tries > 300 || child.exitCode !== null) {
      stop();
      throw new Error("workerd did not serve the floors");
    }
    await Bun.sleep(20);
  }
  return { runtime, url, pid: child.pid, stop };
}

// ---------------------------------------------------------------------------------------------
// Measuring

/** How long a process is watched doing nothing, for the CPU it spends anyway (timers, the engine's threads). */
const IDLE_WATCH_MS = 3_000;

/** CPU nanoseconds so far of some processes (undefined off Linux). */
type CpuReader = () => Promise<number | undefined>;

async function readCpu(cpu: CpuReader): Promise<number> {
  const ns = await cpu();
  if (ns === undefined) throw new Error("CPU times are read from /proc: Linux only");
  return ns;
}

/** CPU ms per second that the processes spend while nothing is asked of them. */
async function idleCpuRate(cpu: CpuReader): Promise<number> {
  const before = await readCpu(cpu);
  const start = performance.now();
  await Bun.sleep(IDLE_WATCH_MS);
  return ((await readCpu(cpu)) - before) / 1e6 / ((performance.now() - start) / 1000);
}

/**
 * CPU ms of each of `cpus` per call of `run` (`count` calls, `concurrency` at a time), all of it: what
 * the processes spend idle over a paced stream's seconds (reported beside, see idleCpuRate) is part of
 * it, as it is of a real stream's; subtracting it made the one-session rows noisier, not truer.
 */
async function cpuPerCall(cpus: readonly CpuReader[], count: number, concurrency: number, run: (i: number) => Promise<unknown>): Promise<number[]> {
  const before = await Promise.all(cpus.map(readCpu));
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await run(next++);
    }),
  );
  const after = await Promise.all(cpus.map(readCpu));
  return after.map((ns, i) => (ns - before[i]!) / 1e6 / count);
}

const processCpu = (pid: number): CpuReader => () => processCpuNanoseconds(pid);

/** Per token and at zero tokens, from the CPU per call at SHORT_REPLY and LONG_REPLY tokens. */
export function split(short: number, long: number) {
  const perToken = (long - short) / (LONG_REPLY - SHORT_REPLY);
  return { perTokenUs: perToken * 1000, ownMs: short - SHORT_REPLY * perToken };
}

export interface PacedRow {
  sessions: number;
  turn: "first" | "follow-up";
  /** The API's CPU ms per exchange with SHORT_REPLY and LONG_REPLY tokens. */
  shortMs: number;
  longMs: number;
  /** The same for the runtime's tooling in front of it (ChatApi.toolingCpuNs). */
  toolingShortMs: number;
  toolingLongMs: number;
}

export interface PacedApi {
  rows: PacedRow[];
  /** Idle CPU ms per second: the API's processes, the runtime's tooling. */
  idleRate: number;
  toolingIdleRate: number;
}

/** Sessions withChatApi must seed for measurePaced. */
export const pacedSessionsNeeded = (turns: (sessions: number) => number) => PACED_WARMUP + SESSIONS.reduce((n, s) => n + 2 * turns(s), 0);

export async function measurePaced(api: ChatApi, intervalMs: number, turns: (sessions: number) => number, progress: (line: string) => void): Promise<PacedApi> {
  for (let i = 0; i < PACED_WARMUP; i++) await api.exchange(`Tell me about the storm. (warm-up ${i})`);
  const [idleRate, toolingIdleRate] = await Promise.all([idleCpuRate(api.cpuNs), idleCpuRate(api.toolingCpuNs)]);
  const rows: PacedRow[] = [];
  for (const sessions of SESSIONS) {
    const count = turns(sessions);
    const cpu: Record<"first" | "follow-up", Partial<Record<"short" | "long", number[]>>> = { first: {}, "follow-up": {} };
    for (const [length, tokens] of [["short", SHORT_REPLY], ["long", LONG_REPLY]] as const) {
      progress(`chat, paced: ${sessions} sessions, ${tokens}-token replies`);
      const ids = Array.from({ length: count }, () => api.takeSession());
      const say = (turn: string, i: number) => pacedMessage(intervalMs, tokens, `What happened to the Albatross in the storm? (${turn} ${sessions}.${tokens}.${i})`);
      cpu.first[length] = await cpuPerCall([api.cpuNs, api.toolingCpuNs], count, sessions, (i) => api.exchange(say("first", i), {}, ids[i]));
      cpu["follow-up"][length] = await cpuPerCall([api.cpuNs, api.toolingCpuNs], count, sessions, (i) => api.exchange(say("follow-up", i), {}, ids[i]));
    }
    for (const turn of ["first", "follow-up"] as const) {
      const [shortMs, toolingShortMs] = cpu[turn].short!;
      const [longMs, toolingLongMs] = cpu[turn].long!;
      rows.push({ sessions, turn, shortMs: shortMs!, longMs: longMs!, toolingShortMs: toolingShortMs!, toolingLongMs: toolingLongMs! });
    }
  }
  return { rows, idleRate, toolingIdleRate };
}

export type FloorPath = "pass" | "reframe";

export interface Floors {
  /** CPU ms per SHORT_REPLY- and LONG_REPLY-token stream, by path and streams at a time. */
  byPath: Record<FloorPath, Record<number, { shortMs: number; longMs: number }>>;
  /** The floors' process's idle CPU ms per second. */
  idleRate: number;
}

export async function measureFloors(proxy: FloorsProcess, intervalMs: number, turns: (sessions: number) => number, progress: (line: string) => void): Promise<Floors> {
  const byPath: Floors["byPath"] = { pass: {}, reframe: {} };
  const cpu = processCpu(proxy.pid);
  const idleRate = await idleCpuRate(cpu);
  for (const path of ["pass", "reframe"] as const) {
    // Unpaced streams first, so the proxy's process is as warm as the API after its warm-up turns.
    for (let i = 0; i < FLOOR_WARMUP; i++) {
      const res = await fetch(`${proxy.url}/${path}`, { method: "POST", body: JSON.stringify({ model: "bench", stream: true, messages: [{ role: "user", content: pacedMessage(0, LONG_REPLY, `warm-up ${i}`) }] }) });
      await res.text();
    }
    for (const sessions of SESSIONS) {
      progress(`chat, paced: the ${path === "pass" ? "pass-through" : "minimal proxy"} on ${proxy.runtime} at ${sessions} streams`);
      const stream = (tokens: number) => async (i: number) => {
        const res = await fetch(`${proxy.url}/${path}`, {
          method: "POST",
          body: JSON.stringify({ model: "bench", stream: true, messages: [{ role: "user", content: pacedMessage(intervalMs, tokens, `floor ${i}`) }] }),
        });
        const text = await res.text();
        if (!text.includes(`tok${tokens - 1} `)) throw new Error(`the ${path} stream was cut short`);
      };
      const count = turns(sessions);
      const [shortMs] = await cpuPerCall([cpu], count, sessions, stream(SHORT_REPLY));
      const [longMs] = await cpuPerCall([cpu], count, sessions, stream(LONG_REPLY));
      byPath[path][sessions] = { shortMs: shortMs!, longMs: longMs! };
    }
  }
  return { byPath, idleRate };
}

/** The floors as a table: CPU per stream at both lengths and per token, by path and streams at a time. */
export function floorsTable(floors: Floors): string {
  const rows = (["pass", "reframe"] as const).flatMap((path) =>
    SESSIONS.map((sessions) => {
      const f = floors.byPath[path][sessions]!;
      return [path === "pass" ? "bare pass-through" : "minimal parse-and-reframe proxy", String(sessions), f.shortMs.toFixed(2), f.longMs.toFixed(2), split(f.shortMs, f.longMs).perTokenUs.toFixed(0)];
    }),
  );
  return markdownTable(["path", "streams at a time", `CPU ms per ${SHORT_REPLY}-token stream`, `CPU ms per ${LONG_REPLY}-token stream`, "µs per token"], rows);
}

/** The minimal proxy's CPU µs per token at `sessions` streams at a time. */
export const proxyPerTokenUs = (floors: Floors, sessions: number) => {
  const reframe = floors.byPath.reframe[sessions]!;
  return split(reframe.shortMs, reframe.longMs).perTokenUs;
};

export interface PacedOptions {
  intervalMs: number;
  runtime: ApiRuntime;
  stores: (gateway: { indexesURL: string }) => Promise<Stores | string>;
  turns: (sessions: number) => number;
  progress: (line: string) => void;
}

export async function pacedChat(options: PacedOptions): Promise<string> {
  const gateway = await startGatewayProcess();
  const proxy = await startFloorsProcess(gateway.baseURL, floorRuntimeOf(options.runtime));
  try {
    const stores = await options.stores(gateway);
    if (typeof stores === "string") return `(Skipped: ${stores}.)`;
    // Both floors first, on a quiet gateway; then the API.
    const floors = await measureFloors(proxy, options.intervalMs, options.turns, options.progress);
    const paced = await withChatApi(stores, gateway.baseURL, pacedSessionsNeeded(options.turns), options.runtime, (api) => measurePaced(api, options.intervalMs, options.turns, options.progress));
    const hasTooling = paced.rows.some((row) => row.toolingLongMs > 0);
    const table = paced.rows.map((row) => {
      const api = split(row.shortMs, row.longMs);
      const proxyPerToken = proxyPerTokenUs(floors, row.sessions);
      return [
        String(row.sessions),
        row.turn,
        row.shortMs.toFixed(2),
        row.longMs.toFixed(2),
        api.perTokenUs.toFixed(0),
        proxyPerToken.toFixed(0),
        (api.perTokenUs / proxyPerToken).toFixed(2),
        api.ownMs.toFixed(2),
        ...(hasTooling ? [`${row.toolingShortMs.toFixed(2)} / ${row.toolingLongMs.toFixed(2)}`] : []),
      ];
    });
    return [
      `The API (\`${options.runtime.name}\`: ${options.runtime.command}; ${stores.label}) with the loopback gateway sending each reply's tokens ${options.intervalMs} ms apart; ` +
        `${PACED_WARMUP} unpaced warm-up turns first. Each row: sessions first turns (or their follow-ups, the second turn of the same sessions), ` +
        `that many at a time, with ${SHORT_REPLY}- and with ${LONG_REPLY}-token replies; the API's CPU (all threads, /proc) per exchange. ` +
        `Per streamed token = the difference ÷ ${LONG_REPLY - SHORT_REPLY}; the turn's own work = the ${SHORT_REPLY}-token exchange less its tokens. ` +
        `Idle, each process spends CPU anyway (watched ${IDLE_WATCH_MS / 1000} s before its rows: the API ${paced.idleRate.toFixed(2)}, the floors' process ${floors.idleRate.toFixed(2)} ms per second); ` +
        `a 200-token stream lasts ${((LONG_REPLY * options.intervalMs) / 1000).toFixed(1)} s, so at one session that is part of each figure, as it is of a real stream's. ` +
        (hasTooling ? `The runtime's local tooling in front of the API (not counted in its figures) is in the last column, CPU ms per exchange at ${SHORT_REPLY} / ${LONG_REPLY} tokens. ` : "") +
        `Load average ${loadavg().map((x) => x.toFixed(1)).join(", ")} at the end.`,
      "",
      markdownTable(
        [
          "sessions", "turn", `API CPU ms, ${SHORT_REPLY} tokens`, `API CPU ms, ${LONG_REPLY} tokens`, "API CPU µs per streamed token", "minimal proxy µs per token", "÷ proxy", "turn's own work ms",
          ...(hasTooling ? ["tooling CPU ms (not the API's)"] : []),
        ],
        table,
      ),
      "",
      `The floors (bench/floors/proxy.ts) on ${proxy.runtime}, same gateway, same pacing, a process of their own:`,
      "",
      floorsTable(floors),
    ].join("\n");
  } finally {
    proxy.stop();
    gateway.stop();
  }
}

/** `--stores`: embedded, postgres, production, or edge (the edge runtimes' only stores, and their default). */
const storesNamed = (name: string) => async (gateway: { indexesURL: string }) =>
  name === "edge" ? edgeStores(gateway.indexesURL) : name === "embedded" ? EMBEDDED : liveStores(name === "production" ? gateway.indexesURL : undefined);

export async function pacedChatSection(ctx: BenchContext): Promise<BenchSection> {
  const body = await pacedChat({
    intervalMs: DEFAULT_TOKEN_INTERVAL_MS,
    runtime: apiRuntime("bun"),
    stores: storesNamed("postgres"),
    turns: (sessions) => Math.max(sessions, reps(ctx, 10, 2)),
    progress: ctx.progress,
  });
  return { title: "Chat, paced tokens", body };
}

if (import.meta.main && process.argv.includes("--proxy")) serveProxies(process.argv[process.argv.indexOf("--proxy") + 1]!);
else if (import.meta.main) {
  answerHelp(
    `usage: bun bench/chat-paced.ts [--token-interval-ms 10] [--runtime ${Object.keys(API_RUNTIMES).join("|")}] [--stores embedded|postgres|production|edge] [--turns N]\n\n` +
      "Chat with the gateway pacing its tokens: API CPU per streamed token and the turn's own work, beside a bare pass-through and a minimal proxy.\n" +
      "--stores defaults to postgres, and to edge (the Neon and Upstash bridges) for a runtime on the edge drivers.",
  );
  const turns = Number(option("--turns") ?? 10);
  const runtime = apiRuntime(option("--runtime") ?? "bun");
  console.log(
    await pacedChat({
      intervalMs: Number(option("--token-interval-ms") ?? DEFAULT_TOKEN_INTERVAL_MS),
      runtime,
      stores: storesNamed(option("--stores") ?? (runtime.edge ? "edge" : "postgres")),
      turns: (sessions) => Math.max(sessions, turns),
      progress: (line) => console.error(line),
    }),
  );
}
