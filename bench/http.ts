/**
 * Section 6. Requests per second of GET /health and of a rejected POST /character/processing (400,
 * malformed JSON) on the API server process, beside a bare Bun.serve route in its own process,
 * measured with wrk on loopback in the same run, turn by turn.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startService, type ServiceProcess } from "../tests/support/process.ts";
import { runsInBench, cpuNanoseconds, formatSummary, freshDataDir, markdownTable, reps, summarise, type BenchContext, type BenchSection } from "./support.ts";

const CONNECTIONS = 32;

interface Load {
  rate: number;
  /** The server's CPU time per request: on a shared machine it moves far less than the rate. */
  cpuMicros: number | undefined;
}

async function wrk(seconds: number, server: ServiceProcess, path: string, script?: string): Promise<Load> {
  const argv = ["wrk", "-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, ...(script ? ["-s", script] : []), `${server.url}${path}`];
  const cpuBefore = await cpuNanoseconds(server.proc.pid);
  const proc = Bun.spawn(argv, { stdout: "pipe", stderr: "pipe" });
  const [out] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  const cpuAfter = await cpuNanoseconds(server.proc.pid);
  const rate = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const count = /(\d+) requests in/.exec(out);
  if (!rate || !count) throw new Error(`wrk printed no rate:\n${out}`);
  if (/Non-2xx or 3xx responses/.test(out) && !script) throw new Error(`unexpected errors:\n${out}`);
  const cpuMicros = cpuBefore !== undefined && cpuAfter !== undefined ? (cpuAfter - cpuBefore) / 1000 / Number(count[1]) : undefined;
  return { rate: Number(rate[1]), cpuMicros };
}

export async function httpSection(ctx: BenchContext): Promise<BenchSection> {
  if (!Bun.which("wrk")) return { title: "HTTP", body: "Skipped: `wrk` is not installed (`apt-get install wrk`)." };
  const seconds = reps(ctx, 5, 2);
  const runs = reps(ctx, 3, 1);
  const dir = await mkdtemp(join(tmpdir(), "bench-http-"));
  const postScript = join(dir, "post.lua");
  await writeFile(postScript, `wrk.method = "POST"\nwrk.body = "{\\"book_id\\": "\nwrk.headers["Content-Type"] = "application/json"\n`);
  const bareScript = join(dir, "bare.ts");
  await writeFile(
    bareScript,
    `Bun.serve({ port: Number(process.env.PORT), hostname: "127.0.0.1", fetch: () => new Response("ok", { headers: { "content-type": "text/plain; charset=utf-8" } }) });\n`,
  );
  const dataDir = await freshDataDir();
  let api: ServiceProcess | undefined;
  let bare: ServiceProcess | undefined;
  try {
    // The API needs an LLM setting to start; these endpoints never call it. It is started `runs`
    // times to time its start-up (spawn to the first 200 from /health, polled every 100 ms), and the
    // last one serves the load.
    const startups: number[] = [];
    for (let run = 0; run < runs; run++) {
      await api?.stop();
      const started = performance.now();
      api = await startService("api/server.ts", { DATA_DIR: dataDir, LLM_GATEWAY_URL: "http://127.0.0.1:9/v1", LOG_LEVEL: "error" });
      startups.push((performance.now() - started) / 1000);
    }
    bare = await startService(bareScript);
    const loads: Record<"bare" | "health" | "rejected", Load[]> = { bare: [], health: [], rejected: [] };
    // One untimed second of each warms the JIT of both servers.
    await wrk(1, bare, "/health");
    await wrk(1, api!, "/health");
    for (let run = 0; run < runs; run++) {
      ctx.progress(`http: run ${run + 1}/${runs}`);
      loads.bare.push(await wrk(seconds, bare, "/health"));
      loads.health.push(await wrk(seconds, api!, "/health"));
      loads.rejected.push(await wrk(seconds, api!, "/character/processing", postScript));
    }
    const rate = (l: Load[]) => summarise(l.map((x) => x.rate));
    const cpu = (l: Load[]) => (l.every((x) => x.cpuMicros !== undefined) ? summarise(l.map((x) => x.cpuMicros!)) : undefined);
    const bareRate = rate(loads.bare).median;
    const bareCpu = cpu(loads.bare)?.median;
    const row = (label: string, l: Load[]) => {
      const c = cpu(l);
      return [
        label,
        formatSummary(rate(l)),
        (rate(l).median / bareRate).toFixed(2),
        c ? formatSummary(c, 1) : "–",
        c && bareCpu ? (bareCpu / c.median).toFixed(2) : "–",
      ];
    };
    return {
      title: "HTTP",
      body: [
        `\`wrk -t1 -c${CONNECTIONS} -d${seconds}s\` on loopback, the three targets in turn, median (min–max) of ${runs} runs. ` +
          "The API server runs on embedded defaults; the bare server is `Bun.serve` answering `ok` with the same content type, in its own process. " +
          "wrk shares the machine's cores with the server it measures, and the rate moves with whatever else the machine runs; " +
          "the server's CPU time per request (from /proc, Linux only) moves much less.",
        "",
        markdownTable(
          ["Route", "requests/s", "÷ bare Bun.serve", "server CPU µs per request", "bare ÷ this, CPU"],
          [
            row("bare `Bun.serve` returning ok", loads.bare),
            row("`GET /health`", loads.health),
            row("`POST /character/processing`, malformed JSON → 400", loads.rejected),
          ],
        ),
        "",
        `API server start-up (spawn to the first 200 from \`/health\`, on a migrated embedded data dir, with a gateway configured): ${formatSummary(summarise(startups), 2)} s over ${runs} starts.`,
      ].join("\n"),
    };
  } finally {
    await api?.stop();
    await bare?.stop();
    await rm(dataDir, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) runsInBench("http");
