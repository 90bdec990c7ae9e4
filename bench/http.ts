/**
 * Requests per second of GET /health and of a rejected POST /character/processing (400, malformed
 * JSON), beside a bare Bun.serve route, measured with wrk on loopback in the same run.
 * Usage: bun bench/http.ts [--seconds 5] [--runs 3]
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startService, type ServiceProcess } from "../tests/support/process.ts";
import { formatSummary, machineHeader, markdownTable, summarise } from "./support.ts";

const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const SECONDS = flag("seconds", 5);
const RUNS = flag("runs", 3);
const CONNECTIONS = 32;

if (!Bun.which("wrk")) {
  console.error("wrk is not installed (apt-get install wrk)");
  process.exit(2);
}

async function wrk(url: string, script?: string): Promise<number> {
  const argv = ["wrk", "-t1", `-c${CONNECTIONS}`, `-d${SECONDS}s`, "--latency", ...(script ? ["-s", script] : []), url];
  const out = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe" }).stdout.toString();
  const match = /Requests\/sec:\s+([\d.]+)/.exec(out);
  if (!match) throw new Error(`wrk printed no rate:\n${out}`);
  if (/Non-2xx or 3xx responses/.test(out) && !script) throw new Error(`unexpected errors:\n${out}`);
  return Number(match[1]);
}

const dir = await mkdtemp(join(tmpdir(), "bench-http-"));
const postScript = join(dir, "post.lua");
await writeFile(postScript, `wrk.method = "POST"\nwrk.body = "{\\"book_id\\": "\nwrk.headers["Content-Type"] = "application/json"\n`);
const bareScript = join(dir, "bare.ts");
await writeFile(
  bareScript,
  `const s = Bun.serve({ port: Number(process.env.PORT), hostname: "127.0.0.1", fetch: () => new Response("ok", { headers: { "content-type": "text/plain" } }) });\n`,
);

let api: ServiceProcess | undefined;
let bare: ServiceProcess | undefined;
try {
  // The API needs an LLM setting to start; these endpoints never call it.
  api = await startService("api/server.ts", { LLM_GATEWAY_URL: "http://127.0.0.1:9/v1", LOG_LEVEL: "error" });
  bare = await startService(bareScript);
  const rows: Record<string, number[]> = { bare: [], health: [], rejected: [] };
  for (let run = 0; run < RUNS; run++) {
    rows.bare!.push(await wrk(`${bare.url}/health`));
    rows.health!.push(await wrk(`${api.url}/health`));
    rows.rejected!.push(await wrk(`${api.url}/character/processing`, postScript));
  }
  const bareMedian = summarise(rows.bare!).median;
  console.log(`## HTTP\n\n${machineHeader()} · wrk -t1 -c${CONNECTIONS} -d${SECONDS}s, ${RUNS} runs, median (min–max)\n`);
  console.log(
    markdownTable(
      ["Route", "Requests/s", "vs bare Bun.serve"],
      [
        ["bare `Bun.serve` returning ok", formatSummary(summarise(rows.bare!)), "1.00"],
        ["`GET /health`", formatSummary(summarise(rows.health!)), (summarise(rows.health!).median / bareMedian).toFixed(2)],
        ["`POST /character/processing`, malformed JSON → 400", formatSummary(summarise(rows.rejected!)), (summarise(rows.rejected!).median / bareMedian).toFixed(2)],
      ],
    ),
  );
} finally {
  await api?.stop();
  await bare?.stop();
  await rm(dir, { recursive: true, force: true });
}
