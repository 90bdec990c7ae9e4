/**
 * Section `runtimes`: the API on Bun, Deno and workerd side by side, on this machine, in one run.
 *
 * - The bundle each runtime's own bundler builds: `wrangler deploy --dry-run --outdir` (what a Workers
 *   deploy uploads), `deno bundle` of the Deno entry, and `bun build` of the Bun server for comparison;
 *   each as configured and minified, raw and gzip.
 * - Cold start: spawn → first 200 from `GET /health`, for each runtime as an operator starts it.
 * - The API's CPU per chat exchange with the gateway pacing tokens as a model does (bench/chat-paced.ts),
 *   first and follow-up turns at 1 and 32 sessions, on every runtime, beside the minimal proxy.
 *
 * The runtimes are bench/chat.ts API_RUNTIMES: Bun on its TCP drivers, Bun on the edge drivers, Deno,
 * workerd under `wrangler dev`, and workerd alone on the deploy bundle.
 *
 *   bun bench/runtimes.ts [--quick] [--only bundles,cold-start,chat] [--runtimes bun,deno,…] [--starts 10] [--turns 20] [--token-interval-ms 10]
 * or in `bun run bench` (section `runtimes`).
 */
import { gzipSync } from "bun";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "../common/db/migrate.ts";
import { buildWorkerdBundle } from "../tests/support/edge-runtime.ts";
import { REPO_ROOT } from "../tests/support/process.ts";
import { API_RUNTIMES, apiRuntime, edgeStores, liveStores, startGatewayProcess, withChatApi, type ApiRuntime, type Stores } from "./chat.ts";
import { DEFAULT_TOKEN_INTERVAL_MS, floorRuntimeOf, floorsTable, type FloorRuntime, LONG_REPLY, measureFloors, measurePaced, pacedSessionsNeeded, proxyPerTokenUs, SESSIONS, SHORT_REPLY, split, startFloorsProcess, type Floors, type PacedApi } from "./chat-paced.ts";
import { answerHelp, formatSummary, machineHeader, markdownTable, option, removeDataDirTemplate, reps, summarise, type BenchContext, type BenchSection } from "./support.ts";

const PARTS = ["bundles", "cold-start", "chat"] as const;
type Part = (typeof PARTS)[number];

const BIN = join(REPO_ROOT, "node_modules", ".bin");

export interface RuntimesOptions {
  quick: boolean;
  parts: readonly Part[];
  runtimes: readonly ApiRuntime[];
  /** Measured cold starts per runtime (after one that is not). */
  starts: number;
  /** Turns per chat row (at least the row's sessions). */
  turns: number;
  intervalMs: number;
  progress(line: string): void;
}

// ---------------------------------------------------------------------------------------------
// Versions

function output(command: string[]): string {
  return Bun.spawnSync(command, { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1", WRANGLER_SEND_METRICS: "false" } }).stdout.toString().trim();
}

/** The runtimes' and bundlers' versions, as they print them. */
export function versions(): string {
  const deno = output([join(BIN, "deno"), "--version"]);
  return [
    `Bun ${Bun.version}`,
    `Deno ${/^deno (\S+)/.exec(deno)?.[1] ?? "?"} (V8 ${/v8 (\S+)/.exec(deno)?.[1] ?? "?"})`,
    `wrangler ${output([join(BIN, "wrangler"), "--version"]).split("\n")[0]}`,
    `workerd ${output([join(BIN, "workerd"), "--version"]).replace(/^workerd /, "")}`,
    `Node ${output(["node", "--version"]).replace(/^v/, "")} (wrangler's)`,
  ].join(" · ");
}

// ---------------------------------------------------------------------------------------------
// Bundles

interface Bundle {
  runtime: string;
  command: string;
  files: number;
  rawBytes: number;
  gzipBytes: number;
  seconds: number;
  /** What the bundler itself printed about the size, when it does (wrangler's "Total Upload"). */
  reported?: string;
}

/** The files a bundler wrote (source maps and wrangler's README aside): count, bytes, gzip bytes. */
async function measureOutput(dir: string): Promise<Pick<Bundle, "files" | "rawBytes" | "gzipBytes">> {
  const files = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((f) => f.isFile() && !f.name.endsWith(".map") && f.name !== "README.md");
  let rawBytes = 0;
  let gzipBytes = 0;
  for (const f of files) {
    const bytes = await readFile(join(f.parentPath, f.name));
    rawBytes += bytes.byteLength;
    gzipBytes += gzipSync(bytes).byteLength;
  }
  return { files: files.length, rawBytes, gzipBytes };
}

async function run(command: readonly string[], env: Record<string, string> = {}): Promise<string> {
  const proc = Bun.spawn([...command], { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NO_COLOR: "1", ...env }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${command.join(" ")} exited with ${code}:\n${stdout}${stderr}`);
  return stdout + stderr;
}

async function buildBundles(progress: (line: string) => void): Promise<Bundle[]> {
  const dir = await mkdtemp(join(tmpdir(), "bench-bundles-"));
  const builds: { runtime: string; command: string; build(out: string): Promise<string> }[] = [];
  for (const minify of [false, true]) {
    const flag = minify ? ["--minify"] : [];
    builds.push(
      { runtime: "workerd", command: `wrangler deploy --dry-run --outdir <dir>${minify ? " --minify" : ""}`, build: (out) => buildWorkerdBundle(out, flag) },
      {
        runtime: "deno",
        // The entry imports Swagger UI's files as text and bytes: raw imports are still behind a flag.
        command: `deno bundle --unstable-raw-imports${minify ? " --minify" : ""} -o <dir>/deno.js api/edge/deno.ts`,
        build: (out) => run([join(BIN, "deno"), "bundle", "--unstable-raw-imports", ...flag, "-o", join(out, "deno.js"), "api/edge/deno.ts"], { DENO_NO_UPDATE_CHECK: "1" }),
      },
      {
        runtime: "bun",
        command: `bun build --target bun${minify ? " --minify" : ""} --outdir <dir> api/server.ts`,
        build: (out) => run([process.execPath, "build", "--target", "bun", ...flag, "--outdir", out, "api/server.ts"]),
      },
    );
  }
  try {
    const bundles: Bundle[] = [];
    for (const [i, b] of builds.entries()) {
      progress(`runtimes: ${b.command}`);
      const out = join(dir, String(i));
      const start = performance.now();
      const printed = await b.build(out);
      const seconds = (performance.now() - start) / 1000;
      const reported = /Total Upload: ([\d.]+ KiB) \/ gzip: ([\d.]+ KiB)/.exec(printed);
      bundles.push({ runtime: b.runtime, command: b.command, seconds, ...(await measureOutput(out)), ...(reported ? { reported: `${reported[1]} / gzip ${reported[2]}` } : {}) });
    }
    return bundles;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const kib = (bytes: number) => (bytes / 1024).toFixed(0);

function bundlesText(bundles: readonly Bundle[]): string {
  const wrangler = bundles.find((b) => b.reported && !b.command.includes("--minify"));
  return [
    "Each runtime's own bundler on this checkout, as configured (wrangler.jsonc, deno.json) and minified. Sizes are the files written, source maps aside; gzip is each file gzipped at the default level, summed. " +
      "The Workers and Deno bundles carry Swagger UI's files (1.9 MB raw: the docs page needs no CDN; wrangler writes them as modules beside the code, `deno bundle` inlines them); " +
      "Bun's build does not (Bun reads them, and PGlite's data files, from node_modules at run time), and it holds the embedded stores the edge bundles leave out." +
      (wrangler?.reported ? ` wrangler's own figure for its bundle: ${wrangler.reported}.` : ""),
    "",
    markdownTable(
      ["runtime", "build command", "files", "raw KiB", "gzip KiB", "build s"],
      bundles.map((b) => [b.runtime, `\`${b.command}\``, String(b.files), kib(b.rawBytes), kib(b.gzipBytes), b.seconds.toFixed(1)]),
    ),
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// Stores

/** The stores of a runtime on the edge drivers (through the bridges) or not (Postgres and Redis over TCP); Qdrant and Typesense stand-ins either way. */
const storesFor = (edge: boolean, indexesURL: string): Promise<Stores | string> => (edge ? edgeStores(indexesURL) : liveStores(indexesURL));

/** The API's variables for `stores` (Postgres stores: no data dir), their database migrated (no world seeded: /health needs none). */
async function migratedEnv(stores: Stores, gatewayURL: string): Promise<Record<string, string>> {
  const db = await stores.open("");
  try {
    await migrate(db);
  } finally {
    await db.close();
  }
  return { LLM_GATEWAY_URL: gatewayURL, LOG_LEVEL: "error", ...stores.env };
}

// ---------------------------------------------------------------------------------------------
// Cold start

async function coldStarts(runtimes: readonly ApiRuntime[], starts: number, gateway: { baseURL: string; indexesURL: string }, progress: (line: string) => void): Promise<Map<string, number[]> | string> {
  const opened: Stores[] = [];
  const envs = new Map<boolean, Record<string, string>>();
  try {
    for (const edge of new Set(runtimes.map((r) => r.edge))) {
      const stores = await storesFor(edge, gateway.indexesURL);
      if (typeof stores === "string") return stores;
      opened.push(stores);
      envs.set(edge, await migratedEnv(stores, gateway.baseURL));
    }
    const times = new Map<string, number[]>(runtimes.map((r) => [r.name, []]));
    // Round by round, every runtime once per round, so that whatever else the machine does falls on all alike; round 0 is not counted.
    for (let round = 0; round <= starts; round++) {
      for (const runtime of runtimes) {
        progress(`runtimes: cold start ${round}/${starts} of ${runtime.name}`);
        const api = await runtime.start(envs.get(runtime.edge)!);
        await api.stop();
        if (round > 0) times.get(runtime.name)!.push(api.readyMs);
      }
    }
    return times;
  } finally {
    await Promise.all(opened.map((stores) => stores.cleanup(undefined, [])));
  }
}

function coldStartText(runtimes: readonly ApiRuntime[], times: Map<string, number[]>, starts: number): string {
  return [
    `Spawn → first 200 from \`GET /health\` (asked every 10 ms), median (min–max) of ${starts} starts after one that is not counted (it fills the disk cache, Deno's module cache and the like), ` +
      "every runtime once per round. Each runs on its stores as in the chat rows below, the database migrated. " +
      "`wrangler dev` bundles the Worker with esbuild before it starts workerd (two of them: its proxy and the Worker's), so its figure is a developer's restart, not a Worker's; `workerd-bundle` is workerd alone loading the deploy bundle, built beforehand.",
    "",
    markdownTable(
      ["runtime", "started as", "cold start ms"],
      runtimes.map((r) => [r.name, r.command, formatSummary(summarise(times.get(r.name)!), 0)]),
    ),
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// Chat, paced

interface RuntimeChat {
  runtime: ApiRuntime;
  paced: PacedApi;
}

/** Each runtime's floors, measured before the runtimes and (but in --quick) after them. */
type FloorsByRuntime = Map<FloorRuntime, Floors[]>;

function chatText(results: readonly RuntimeChat[], floorsBy: FloorsByRuntime, intervalMs: number, turns: number): string {
  const floorOf = (on: FloorRuntime, sessions: number) => {
    const floors = floorsBy.get(on) ?? [];
    return floors.reduce((sum, f) => sum + proxyPerTokenUs(f, sessions), 0) / floors.length;
  };
  const rows = results.flatMap(({ runtime, paced }) =>
    paced.rows.map((row) => {
      const api = split(row.shortMs, row.longMs);
      const tooling = row.toolingShortMs + row.toolingLongMs > 0 ? `${row.toolingShortMs.toFixed(2)} / ${row.toolingLongMs.toFixed(2)}` : "–";
      return [
        runtime.name,
        String(row.sessions),
        row.turn,
        row.shortMs.toFixed(2),
        row.longMs.toFixed(2),
        api.perTokenUs.toFixed(0),
        (api.perTokenUs / floorOf(floorRuntimeOf(runtime), row.sessions)).toFixed(2),
        floorsBy.has("bun") ? (api.perTokenUs / floorOf("bun", row.sessions)).toFixed(2) : "–",
        api.ownMs.toFixed(2),
        tooling,
      ];
    }),
  );
  const when = (floors: readonly Floors[]) => (floors.length === 1 ? "before the runtimes" : "before and after the runtimes, the mean of the two");
  const proxyLine = [...floorsBy]
    .map(([on, floors]) => `on ${on} (${when(floors)}) ${SESSIONS.map((s) => `${floors.map((f) => proxyPerTokenUs(f, s).toFixed(0)).join(" and ")} µs per token at ${s} stream${s > 1 ? "s" : ""}`).join(", ")}`)
    .join("; ");
  return [
    `The API's CPU per chat exchange (all its processes' threads, from /proc) with the loopback gateway sending each reply's tokens ${intervalMs} ms apart, as bench/chat-paced.ts measures it: ` +
      `after 100 unpaced warm-up turns, ${turns} first turns per row (at least as many as sessions) in fresh sessions, that many at a time, then their follow-ups, with ${SHORT_REPLY}- and with ${LONG_REPLY}-token replies. ` +
      `Per streamed token = the difference ÷ ${LONG_REPLY - SHORT_REPLY}; the turn's own work = the ${SHORT_REPLY}-token exchange less its tokens; ÷ proxy is against the minimal parse-and-reframe proxy ` +
      `(bench/floors/proxy.ts: SSE in, one JSON token event out per token) on the same gateway, served by the API's own runtime (Bun for both Bun rows, workerd for both workerd rows) and by Bun: ${proxyLine}. ` +
      "Every runtime runs the production shape: Qdrant and Typesense clients against the loopback stand-ins. `bun` is on Postgres (Bun SQL) and Redis over TCP; every other row on the edge drivers: " +
      "the Neon driver over a WebSocket bridge to Postgres and Upstash REST over a REST bridge to Redis, both bridges in a process of their own (their CPU is counted nowhere, as a provider's is not), with the edge defaults (metrics summed through the key-value store). " +
      "On workerd a single statement is one request to the bridge's SQL-over-HTTP endpoint (a WebSocket there belongs to the request that opened it, so a connection would be opened per request). " +
      "For `workerd` (`wrangler dev`) the API's CPU is the Worker's workerd process; wrangler's proxy workerd, in front of it on the public port, and wrangler's Node processes are dev tooling a deployed Worker has not: " +
      "their CPU is in the last column (ms per exchange at 20 / 200 tokens), not in the API's. `workerd-bundle` is workerd alone serving the deploy bundle.",
    "",
    markdownTable(
      ["runtime", "sessions", "turn", `API CPU ms, ${SHORT_REPLY} tokens`, `API CPU ms, ${LONG_REPLY} tokens`, "µs per streamed token", "÷ minimal proxy, same runtime", "÷ minimal proxy on Bun", "turn's own work ms", "wrangler dev's tooling ms"],
      rows,
    ),
    "",
    `Idle CPU of each runtime's API processes after the warm-up, ms per second (part of every figure, as it is of a real stream's: a ${LONG_REPLY}-token stream lasts ${((LONG_REPLY * intervalMs) / 1000).toFixed(1)} s): ` +
      results.map(({ runtime, paced }) => `${runtime.name} ${paced.idleRate.toFixed(1)}${paced.toolingIdleRate > 0 ? ` (its tooling ${paced.toolingIdleRate.toFixed(1)})` : ""}`).join(", ") +
      `. Load average ${loadavg().map((x) => x.toFixed(1)).join(", ")} at the end.`,
    "",
    ...[...floorsBy].flatMap(([on, floors]) => [
      `The floors on ${on}, same gateway and pacing, a process of their own:`,
      "",
      ...floors.flatMap((f, i) => [...(floors.length > 1 ? [i === 0 ? "Before the runtimes:" : "After them:", ""] : []), floorsTable(f), ""]),
    ]),
  ].join("\n").trimEnd();
}

// ---------------------------------------------------------------------------------------------

export async function runtimesReport(options: RuntimesOptions): Promise<string> {
  const missing = options.runtimes.flatMap((r) => {
    const why = r.missing?.();
    return why ? [`${r.name}: ${why}`] : [];
  });
  if (missing.length > 0) return `(Skipped: ${missing.join("; ")}.)`;
  const parts: string[] = [versions()];
  if (options.parts.includes("bundles")) parts.push("", "**Bundle size**", "", bundlesText(await buildBundles(options.progress)));
  if (!options.parts.includes("cold-start") && !options.parts.includes("chat")) return parts.join("\n");
  const gateway = await startGatewayProcess();
  try {
    if (options.parts.includes("cold-start")) {
      const times = await coldStarts(options.runtimes, options.starts, gateway, options.progress);
      parts.push("", "**Cold start**", "", typeof times === "string" ? `(Skipped: ${times}.)` : coldStartText(options.runtimes, times, options.starts));
    }
    if (options.parts.includes("chat")) {
      // The floors on every runtime the rows need, and on Bun: the minimal proxy each is compared with.
      const floorRuntimes = [...new Set<FloorRuntime>(["bun", ...options.runtimes.map(floorRuntimeOf)])];
      const proxies = await Promise.all(floorRuntimes.map((on) => startFloorsProcess(gateway.baseURL, on)));
      try {
        const turns = (sessions: number) => Math.max(sessions, options.turns);
        const floorsBy: FloorsByRuntime = new Map();
        for (const proxy of proxies) floorsBy.set(proxy.runtime, [await measureFloors(proxy, options.intervalMs, turns, options.progress)]);
        const results: RuntimeChat[] = [];
        for (const runtime of options.runtimes) {
          const stores = await storesFor(runtime.edge, gateway.indexesURL);
          if (typeof stores === "string") return [...parts, "", `(Chat skipped: ${stores}.)`].join("\n");
          options.progress(`runtimes: paced chat on ${runtime.name}`);
          const paced = await withChatApi(stores, gateway.baseURL, pacedSessionsNeeded(turns), runtime, (api) => measurePaced(api, options.intervalMs, turns, (line) => options.progress(`${runtime.name}: ${line}`)));
          results.push({ runtime, paced });
        }
        // Again after the runtimes, whose minutes the machine's other work moves too.
        if (!options.quick) for (const proxy of proxies) floorsBy.get(proxy.runtime)!.push(await measureFloors(proxy, options.intervalMs, turns, options.progress));
        parts.push("", "**API CPU per chat exchange, paced tokens**", "", chatText(results, floorsBy, options.intervalMs, options.turns));
      } finally {
        for (const proxy of proxies) proxy.stop();
      }
    }
    return parts.join("\n");
  } finally {
    gateway.stop();
  }
}

export async function runtimesSection(ctx: BenchContext): Promise<BenchSection> {
  const body = await runtimesReport({
    quick: ctx.quick,
    parts: PARTS,
    runtimes: Object.values(API_RUNTIMES),
    starts: reps(ctx, 10, 2),
    turns: reps(ctx, 20, 2),
    intervalMs: DEFAULT_TOKEN_INTERVAL_MS,
    progress: ctx.progress,
  });
  return { title: "The API on Bun, Deno and workerd", body };
}

const USAGE = `
usage: bun bench/runtimes.ts [--quick] [--only ${PARTS.join(",")}] [--runtimes ${Object.keys(API_RUNTIMES).join(",")}] [--starts 10] [--turns 20] [--token-interval-ms ${DEFAULT_TOKEN_INTERVAL_MS}]

The API on Bun, Deno and workerd side by side: each runtime's bundle (raw and gzip), its cold start to the
first /health, and the API's CPU per chat exchange with the gateway pacing tokens (first and follow-up
turns at 1 and 32 sessions, beside a minimal proxy). Also the section \`runtimes\` of \`bun run bench\`.

  --quick              2 cold starts and 2 turns per row instead of 10 and 20; the floors measured once
  --only               some parts: bundles, cold-start, chat
  --runtimes           some of bench/chat.ts API_RUNTIMES (all by default)
  --starts, --turns    cold starts per runtime; turns per chat row (at least its sessions)
  --token-interval-ms  the gateway's pacing`;

if (import.meta.main) {
  answerHelp(USAGE);
  const quick = process.argv.includes("--quick");
  const only = option("--only")?.split(",") ?? [...PARTS];
  const unknown = only.filter((p) => !(PARTS as readonly string[]).includes(p));
  if (unknown.length > 0) {
    console.error(`unknown part ${unknown.join(", ")}; parts: ${PARTS.join(", ")}`);
    process.exit(2);
  }
  const started = performance.now();
  try {
    const body = await runtimesReport({
      quick,
      parts: only as Part[],
      runtimes: (option("--runtimes")?.split(",") ?? Object.keys(API_RUNTIMES)).map((name) => apiRuntime(name.trim())),
      starts: Number(option("--starts") ?? (quick ? 2 : 10)),
      turns: Number(option("--turns") ?? (quick ? 2 : 20)),
      intervalMs: Number(option("--token-interval-ms") ?? DEFAULT_TOKEN_INTERVAL_MS),
      progress: (line) => console.error(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${line}`),
    });
    console.log(`${machineHeader()} · load average at the end ${loadavg().map((x) => x.toFixed(1)).join(", ")}\n\n${body}`);
  } finally {
    await removeDataDirTemplate();
  }
}
