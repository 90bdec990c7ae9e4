/**
 * Section 6. Requests per second of GET /health and of a rejected POST /character/processing (400,
 * malformed JSON) on the API server process, beside a bare Bun.serve route in its own process,
 * measured with wrk on loopback in the same run, turn by turn.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startService, type ServiceProcess } from "../tests/support/process.ts";
import { formatSummary, freshDataDir, markdownTable, reps, summarise, type BenchContext, type BenchSection } from "./support.ts";

const CONNECTIONS = 32;

async function wrk(seconds: number, url: string, script?: string): Promise<number> {
  const argv = ["wrk", "-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, ...(script ? ["-s", script] : []), url];
  const proc = Bun.spawn(argv, { stdout: "pipe", stderr: "pipe" });
  const [out] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  const match = /Requests\/sec:\s+([\d.]+)/.exec(out);
  if (!match) throw new Error(`wrk printed no rate:\n${out}`);
  if (/Non-2xx or 3xx responses/.test(out) && !script) throw new Error(`unexpected errors:\n${out}`);
  return Number(match[1]);
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
    // The API needs an LLM setting to start; these endpoints never call it.
    api = await startService("api/server.ts", { DATA_DIR: dataDir, LLM_GATEWAY_URL: "http://127.0.0.1:9/v1", LOG_LEVEL: "error" });
    bare = await startService(bareScript);
    const rates: Record<"bare" | "health" | "rejected", number[]> = { bare: [], health: [], rejected: [] };
    // One untimed second of each warms the JIT of both servers.
    await wrk(1, `${bare.url}/health`);
    await wrk(1, `${api.url}/health`);
    for (let run = 0; run < runs; run++) {
      ctx.progress(`http: run ${run + 1}/${runs}`);
      rates.bare.push(await wrk(seconds, `${bare.url}/health`));
      rates.health.push(await wrk(seconds, `${api.url}/health`));
      rates.rejected.push(await wrk(seconds, `${api.url}/character/processing`, postScript));
    }
    const bareMedian = summarise(rates.bare).median;
    const row = (label: string, values: number[]) => [label, formatSummary(summarise(values)), (summarise(values).median / bareMedian).toFixed(2)];
    return {
      title: "HTTP",
      body: [
        `\`wrk -t1 -c${CONNECTIONS} -d${seconds}s\` on loopback, the three targets in turn, median (min–max) of ${runs} runs. ` +
          "The API server runs on embedded defaults; the bare server is `Bun.serve` answering `ok` with the same content type, in its own process. " +
          "wrk shares the machine's cores with the server it measures.",
        "",
        markdownTable(
          ["Route", "requests/s", "÷ bare Bun.serve"],
          [
            row("bare `Bun.serve` returning ok", rates.bare),
            row("`GET /health`", rates.health),
            row("`POST /character/processing`, malformed JSON → 400", rates.rejected),
          ],
        ),
      ].join("\n"),
    };
  } finally {
    await api?.stop();
    await bare?.stop();
    await rm(dataDir, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }
}
