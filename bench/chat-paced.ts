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
 *   bun bench/chat-paced.ts [--token-interval-ms 10] [--runtime bun] [--stores embedded|postgres|production] [--turns N]
 * `--runtime` names the API's runtime (bench/chat.ts API_RUNTIMES: bun today).
 */
import { loadavg } from "node:os";
import { apiRuntime, EMBEDDED, liveStores, pacedMessage, startGatewayProcess, withChatApi, type ApiRuntime, type ChatApi, type Stores } from "./chat.ts";
import { answerHelp, markdownTable, option, processCpuNanoseconds, reps, type BenchContext, type BenchSection } from "./support.ts";

export const DEFAULT_TOKEN_INTERVAL_MS = 10;
const SHORT_REPLY = 20;
const LONG_REPLY = 200;
const SESSIONS = [1, 32];
/** Unpaced first turns before any is measured, for the JIT (as the chat section's warm-up, shorter). */
const PACED_WARMUP = 100;
/** Unpaced streams through each floor before it is measured. */
const FLOOR_WARMUP = 100;

// ---------------------------------------------------------------------------------------------
// The two floors, in a process of their own (`--proxy <gateway URL>`)

function serveProxies(gatewayURL: string) {
  const upstream = (request: Request) =>
    request.text().then((body) => fetch(`${gatewayURL}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body }));
  const encoder = new TextEncoder();
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    routes: {
      "/pass": { POST: async (request) => new Response((await upstream(request)).body, { headers: { "content-type": "text/event-stream" } }) },
      "/reframe": {
        POST: async (request) => {
          const body = (await upstream(request)).body!;
          const decoder = new TextDecoder();
          let buffered = "";
          const reframe = new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, out) {
              buffered += decoder.decode(chunk, { stream: true });
              let end: number;
              while ((end = buffered.indexOf("\n\n")) >= 0) {
                const event = buffered.slice(0, end);
                buffered = buffered.slice(end + 2);
                if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
                const token = (JSON.parse(event.slice(6)) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;
                if (token) out.enqueue(encoder.encode(`data: ${JSON.stringify({ token })}\n\n`));
              }
            },
          });
          return new Response(body.pipeThrough(reframe), { headers: { "content-type": "text/event-stream" } });
        },
      },
    },
  });
  console.log(`http://127.0.0.1:${server.port}`);
  void (async () => {
    for await (const _ of Bun.stdin.stream());
    process.exit(0);
  })();
}

async function startProxyProcess(gatewayURL: string): Promise<{ url: string; pid: number; stop(): void }> {
  const child = Bun.spawn([process.execPath, import.meta.path, "--proxy", gatewayURL], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const reader = child.stdout.getReader();
  let out = "";
  while (!out.includes("\n")) out += new TextDecoder().decode((await reader.read()).value);
  reader.releaseLock();
  return { url: out.trim(), pid: child.pid, stop: () => child.kill() };
}

// ---------------------------------------------------------------------------------------------
// Measuring

/** How long a process is watched doing nothing, for the CPU it spends anyway (timers, the engine's threads). */
const IDLE_WATCH_MS = 3_000;

/** CPU ms per second that process `pid` spends while nothing is asked of it. */
async function idleCpuRate(pid: number): Promise<number> {
  const before = await processCpuNanoseconds(pid);
  const start = performance.now();
  await Bun.sleep(IDLE_WATCH_MS);
  const after = await processCpuNanoseconds(pid);
  if (before === undefined || after === undefined) throw new Error("CPU times are read from /proc: Linux only");
  return (after - before) / 1e6 / ((performance.now() - start) / 1000);
}

/**
 * CPU ms of process `pid` per call of `run` (`count` calls, `concurrency` at a time), all of it: what
 * the process spends idle over a paced stream's seconds (reported beside, see idleCpuRate) is part of
 * it, as it is of a real stream's; subtracting it made the one-session rows noisier, not truer.
 */
async function cpuPerCall(pid: number, count: number, concurrency: number, run: (i: number) => Promise<unknown>): Promise<number> {
  const before = await processCpuNanoseconds(pid);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await run(next++);
    }),
  );
  const after = await processCpuNanoseconds(pid);
  if (before === undefined || after === undefined) throw new Error("CPU times are read from /proc: Linux only");
  return (after - before) / 1e6 / count;
}

/** Per token and at zero tokens, from the CPU per call at SHORT_REPLY and LONG_REPLY tokens. */
function split(short: number, long: number) {
  const perToken = (long - short) / (LONG_REPLY - SHORT_REPLY);
  return { perTokenUs: perToken * 1000, ownMs: short - SHORT_REPLY * perToken };
}

interface Row {
  sessions: number;
  turn: "first" | "follow-up";
  shortMs: number;
  longMs: number;
}

async function measurePaced(api: ChatApi, intervalMs: number, turns: (sessions: number) => number, progress: (line: string) => void): Promise<{ rows: Row[]; idleRate: number }> {
  for (let i = 0; i < PACED_WARMUP; i++) await api.exchange(`Tell me about the storm. (warm-up ${i})`);
  const idleRate = await idleCpuRate(api.pid);
  const rows: Row[] = [];
  for (const sessions of SESSIONS) {
    const count = turns(sessions);
    const cpu: Record<"first" | "follow-up", Partial<Record<"short" | "long", number>>> = { first: {}, "follow-up": {} };
    for (const [length, tokens] of [["short", SHORT_REPLY], ["long", LONG_REPLY]] as const) {
      progress(`chat, paced: ${sessions} sessions, ${tokens}-token replies`);
      const ids = Array.from({ length: count }, () => api.takeSession());
      const say = (turn: string, i: number) => pacedMessage(intervalMs, tokens, `What happened to the Albatross in the storm? (${turn} ${sessions}.${tokens}.${i})`);
      cpu.first[length] = await cpuPerCall(api.pid, count, sessions, (i) => api.exchange(say("first", i), {}, ids[i]));
      cpu["follow-up"][length] = await cpuPerCall(api.pid, count, sessions, (i) => api.exchange(say("follow-up", i), {}, ids[i]));
    }
    for (const turn of ["first", "follow-up"] as const) rows.push({ sessions, turn, shortMs: cpu[turn].short!, longMs: cpu[turn].long! });
  }
  return { rows, idleRate };
}

async function measureFloors(proxyPid: number, proxyURL: string, intervalMs: number, turns: (sessions: number) => number, progress: (line: string) => void) {
  const floors: Record<"pass" | "reframe", Record<number, { shortMs: number; longMs: number }>> = { pass: {}, reframe: {} };
  const idleRate = await idleCpuRate(proxyPid);
  for (const path of ["pass", "reframe"] as const) {
    // Unpaced streams first, so the proxy's process is as warm as the API after its warm-up turns.
    for (let i = 0; i < FLOOR_WARMUP; i++) {
      const res = await fetch(`${proxyURL}/${path}`, { method: "POST", body: JSON.stringify({ model: "bench", stream: true, messages: [{ role: "user", content: pacedMessage(0, LONG_REPLY, `warm-up ${i}`) }] }) });
      await res.text();
    }
    for (const sessions of SESSIONS) {
      progress(`chat, paced: the ${path === "pass" ? "pass-through" : "minimal proxy"} at ${sessions} streams`);
      const stream = (tokens: number) => async (i: number) => {
        const res = await fetch(`${proxyURL}/${path}`, {
          method: "POST",
          body: JSON.stringify({ model: "bench", stream: true, messages: [{ role: "user", content: pacedMessage(intervalMs, tokens, `floor ${i}`) }] }),
        });
        const text = await res.text();
        if (!text.includes(`tok${tokens - 1} `)) throw new Error(`the ${path} stream was cut short`);
      };
      const count = turns(sessions);
      floors[path][sessions] = {
        shortMs: await cpuPerCall(proxyPid, count, sessions, stream(SHORT_REPLY)),
        longMs: await cpuPerCall(proxyPid, count, sessions, stream(LONG_REPLY)),
      };
    }
  }
  return { floors, idleRate };
}

export interface PacedOptions {
  intervalMs: number;
  runtime: ApiRuntime;
  stores: (gateway: { indexesURL: string }) => Promise<Stores | string>;
  turns: (sessions: number) => number;
  progress: (line: string) => void;
}

export async function pacedChat(options: PacedOptions): Promise<string> {
  const gateway = await startGatewayProcess();
  const proxy = await startProxyProcess(gateway.baseURL);
  try {
    const stores = await options.stores(gateway);
    if (typeof stores === "string") return `(Skipped: ${stores}.)`;
    // Both floors first, on a quiet gateway; then the API.
    const { floors, idleRate: proxyIdle } = await measureFloors(proxy.pid, proxy.url, options.intervalMs, options.turns, options.progress);
    const sessionsNeeded = PACED_WARMUP + SESSIONS.reduce((n, s) => n + 2 * options.turns(s), 0);
    const { rows, idleRate: apiIdle } = await withChatApi(stores, gateway.baseURL, sessionsNeeded, options.runtime, (api) => measurePaced(api, options.intervalMs, options.turns, options.progress));
    const table = rows.map((row) => {
      const api = split(row.shortMs, row.longMs);
      const reframe = floors.reframe[row.sessions]!;
      const proxyPerToken = split(reframe.shortMs, reframe.longMs).perTokenUs;
      return [
        String(row.sessions),
        row.turn,
        row.shortMs.toFixed(2),
        row.longMs.toFixed(2),
        api.perTokenUs.toFixed(0),
        proxyPerToken.toFixed(0),
        (api.perTokenUs / proxyPerToken).toFixed(2),
        api.ownMs.toFixed(2),
      ];
    });
    const floorRows = (["pass", "reframe"] as const).flatMap((path) =>
      SESSIONS.map((sessions) => {
        const f = floors[path][sessions]!;
        return [path === "pass" ? "bare pass-through" : "minimal parse-and-reframe proxy", String(sessions), f.shortMs.toFixed(2), f.longMs.toFixed(2), split(f.shortMs, f.longMs).perTokenUs.toFixed(0)];
      }),
    );
    return [
      `The API (\`${options.runtime.name}\`, ${stores.label}) with the loopback gateway sending each reply's tokens ${options.intervalMs} ms apart; ` +
        `${PACED_WARMUP} unpaced warm-up turns first. Each row: sessions first turns (or their follow-ups, the second turn of the same sessions), ` +
        `that many at a time, with ${SHORT_REPLY}- and with ${LONG_REPLY}-token replies; the API's CPU (all threads, /proc) per exchange. ` +
        `Per streamed token = the difference ÷ ${LONG_REPLY - SHORT_REPLY}; the turn's own work = the ${SHORT_REPLY}-token exchange less its tokens. ` +
        `Idle, each process spends CPU anyway (watched ${IDLE_WATCH_MS / 1000} s before its rows: the API ${apiIdle.toFixed(2)}, the floors' process ${proxyIdle.toFixed(2)} ms per second); ` +
        `a 200-token stream lasts ${((LONG_REPLY * options.intervalMs) / 1000).toFixed(1)} s, so at one session that is part of each figure, as it is of a real stream's. ` +
        `Load average ${loadavg().map((x) => x.toFixed(1)).join(", ")} at the end.`,
      "",
      markdownTable(
        ["sessions", "turn", `API CPU ms, ${SHORT_REPLY} tokens`, `API CPU ms, ${LONG_REPLY} tokens`, "API CPU µs per streamed token", "minimal proxy µs per token", "÷ proxy", "turn's own work ms"],
        table,
      ),
      "",
      "The floors, same gateway, same pacing, their own processes:",
      "",
      markdownTable(["path", "streams at a time", `CPU ms per ${SHORT_REPLY}-token stream`, `CPU ms per ${LONG_REPLY}-token stream`, "µs per token"], floorRows),
    ].join("\n");
  } finally {
    proxy.stop();
    gateway.stop();
  }
}

const storesNamed = (name: string) => async (gateway: { indexesURL: string }) =>
  name === "embedded" ? EMBEDDED : liveStores(name === "production" ? gateway.indexesURL : undefined);

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
    "usage: bun bench/chat-paced.ts [--token-interval-ms 10] [--runtime bun] [--stores embedded|postgres|production] [--turns N]\n\n" +
      "Chat with the gateway pacing its tokens: API CPU per streamed token and the turn's own work, beside a bare pass-through and a minimal proxy.",
  );
  const turns = Number(option("--turns") ?? 10);
  console.log(
    await pacedChat({
      intervalMs: Number(option("--token-interval-ms") ?? DEFAULT_TOKEN_INTERVAL_MS),
      runtime: apiRuntime(option("--runtime") ?? "bun"),
      stores: storesNamed(option("--stores") ?? "postgres"),
      turns: (sessions) => Math.max(sessions, turns),
      progress: (line) => console.error(line),
    }),
  );
}
