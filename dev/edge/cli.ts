// npm run edge:deno / npm run edge:workerd: the API on an edge runtime, on this machine, with the
// stores it needs started beside it (dev/edge/local-stores.ts) and the Bun ingest worker pointed at
// the same stores. Ctrl-C stops everything. See docs/operations.md ("The edge on this machine").
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Subprocess } from "bun";
import { loadConfig } from "../../common/config.ts";
import { DEFAULT_DATA_DIR, DEFAULT_HOST } from "../../common/config-defaults.ts";
import { buildDeps } from "../../common/deps.ts";
import { FRONTEND_WRITES_FLAG } from "../../common/db/frontend-rows.ts";
import { openLocalChat, type LocalChat } from "../../common/local/sessions.ts";
import { onStopSignals } from "../../common/stop-signals.ts";
import { SAMPLE_BOOK, seedSampleBook } from "../../ingest/sample-book.ts";
import { startLocalStores, type LocalStores } from "./local-stores.ts";


/** How long a stopped process group has to exit before it is killed. */
const STOP_GRACE_MS = 5_000;

/**
 * Stops a child and everything it started. The API runs in a process group of its own (`setsid`):
 * npm and `deno task` do not pass a signal on to their children, and workerd, once its wrangler is
 * gone, does not stop on SIGTERM, so the whole group gets SIGTERM, then SIGKILL after STOP_GRACE_MS.
 */
async function stopGroup(child: Subprocess): Promise<void> {
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-child.pid, name);
    } catch {
      // Not a group leader (the worker), or already gone.
      child.kill(name);
    }
  };
  signal("SIGTERM");
  await Promise.race([child.exited, Bun.sleep(STOP_GRACE_MS)]);
  // The group may outlive its leader: whatever is left of it goes too.
  signal("SIGKILL");
  await child.exited;
}

const ROOT = resolve(import.meta.dir, "..", "..");
const BIN = join(ROOT, "node_modules", ".bin");
const RUNTIMES = ["deno", "workerd"] as const;
type Runtime = (typeof RUNTIMES)[number];
/** wrangler dev's own default port; Deno's the project's API port. */
const DEFAULT_PORTS: Record<Runtime, number> = { deno: 3000, workerd: 8787 };
const READY_TIMEOUT_MS = 120_000;

const USAGE = `Usage: npm run edge:deno [-- ${FRONTEND_WRITES_FLAG}]
       npm run edge:workerd [-- ${FRONTEND_WRITES_FLAG}]

The API on Deno, or on workerd (wrangler dev), with the ingest worker (Bun) and local stores:
  Postgres   DATABASE_URL's server (on this machine), else PGlite under DATA_DIR (./.data)/edge/pg
  Redis      REDIS_URL's server, else the in-process store
  Indexes    a Qdrant and Typesense stand-in, in memory
  Model      LLM_GATEWAY_URL (+ LLM_API_KEY), else the offline provider
behind the Neon, Upstash, Qdrant, Typesense and OpenAI interfaces the edge API speaks. On an empty
database the sample story is ingested first (on DATABASE_URL's only with ${FRONTEND_WRITES_FLAG}).
The API listens on HOST:PORT (127.0.0.1:3000 on Deno, :8787 on workerd). Ctrl-C stops everything.`;

/** A child's lines, each behind its name, so the three logs read apart. */
function relay(child: Subprocess<"ignore", "pipe", "pipe">, name: string): void {
  for (const stream of [child.stdout, child.stderr]) {
    void (async () => {
      let rest = "";
      const decoder = new TextDecoder();
      for await (const chunk of stream) {
        const lines = (rest + decoder.decode(chunk, { stream: true })).split("\n");
        rest = lines.pop() ?? "";
        for (const line of lines) if (line.trim()) console.log(`${name} | ${line}`);
      }
      if (rest.trim()) console.log(`${name} | ${rest}`);
    })();
  }
}

async function waitForHealth(url: string, child: Subprocess, what: string): Promise<void> {
  const deadline = performance.now() + READY_TIMEOUT_MS;
  while (performance.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited (${child.exitCode ?? child.signalCode}) before answering`);
    try {
      if ((await fetch(`${url}/health`, { signal: AbortSignal.timeout(1_000) })).ok) return;
    } catch {
      // Not listening yet.
    }
    await Bun.sleep(200);
  }
  throw new Error(`${what} did not answer ${url}/health within ${READY_TIMEOUT_MS / 1000} s`);
}

/** The sample story on an empty database, through the same stores the worker uses, and a session with its main character. */
async function seed(stores: LocalStores, env: Record<string, string>, writeFrontendTables: boolean): Promise<{ chat: LocalChat | null; note: string }> {
  const deps = await buildDeps(loadConfig({ ...env, ...stores.workerEnv, LOG_LEVEL: "warn" }), { metricsRoles: ["worker"] });
  try {
    const outcome = await seedSampleBook(deps, { writeFrontendTables });
    const note =
      outcome.status === "ingested"
        ? `"${SAMPLE_BOOK.title}" ingested: ${outcome.result.characters.map((c) => c.character.name).join(", ")}`
        : outcome.status === "present"
          ? `"${SAMPLE_BOOK.title}" (ingested at an earlier start)`
          : `not added: ${outcome.reason}`;
    const chat = await openLocalChat(deps.db, {}, { writeFrontendTables }).catch(() => null);
    return { chat, note };
  } finally {
    await deps.close();
  }
}

export async function main(argv: readonly string[], env: Record<string, string | undefined>): Promise<number> {
  const { values, positionals } = parseArgs({ args: [...argv], allowPositionals: true, options: { help: { type: "boolean" }, "write-frontend-tables": { type: "boolean" } } });
  const runtime = positionals[0] as Runtime | undefined;
  if (values.help || !runtime || !RUNTIMES.includes(runtime) || positionals.length > 1) {
    console.log(USAGE);
    return values.help ? 0 : 2;
  }
  const given = (name: string) => (env[name]?.trim() ? env[name]!.trim() : undefined);
  const host = given("HOST") ?? DEFAULT_HOST;
  const port = Number(given("PORT") ?? DEFAULT_PORTS[runtime]);
  const dataDir = resolve(given("DATA_DIR") ?? DEFAULT_DATA_DIR);
  const base = { PATH: env.PATH ?? "", HOME: env.HOME ?? "", NO_COLOR: "1", ...(given("LOG_LEVEL") ? { LOG_LEVEL: given("LOG_LEVEL")! } : {}), ...(given("LOG_FORMAT") ? { LOG_FORMAT: given("LOG_FORMAT")! } : {}) };

  const stores = await startLocalStores({
    ...(given("DATABASE_URL") ? { databaseUrl: given("DATABASE_URL")! } : { dataDir: join(dataDir, "edge") }),
    ...(given("REDIS_URL") ? { redisUrl: given("REDIS_URL")! } : {}),
    ...(given("LLM_GATEWAY_URL") ? { llmGatewayUrl: given("LLM_GATEWAY_URL")!, ...(given("LLM_API_KEY") ? { llmApiKey: given("LLM_API_KEY")! } : {}) } : {}),
  });
  const children: Subprocess[] = [];
  const scratch = await mkdtemp(join(tmpdir(), "edge-local-"));
  let stopping: Promise<void> | undefined;
  const stopAll = () =>
    (stopping ??= (async () => {
      await Promise.all(children.map(stopGroup));
      await stores.stop();
      await rm(scratch, { recursive: true, force: true });
    })());
  onStopSignals(() => void stopAll().then(() => process.exit(0)));

  try {
    const { chat, note } = await seed(stores, base, stores.embeddedDatabase || values["write-frontend-tables"] === true);

    const worker = Bun.spawn([join(BIN, "bun"), "run", join(ROOT, "ingest", "worker.ts")], {
      cwd: ROOT,
      // Its /metrics and /health on a port of its own beside the API's.
      env: { ...base, ...stores.workerEnv, HOST: "127.0.0.1", METRICS_PORT: String(port + 1) },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    children.push(worker);
    relay(worker, "worker");

    let api: Subprocess<"ignore", "pipe", "pipe">;
    if (runtime === "deno") {
      api = Bun.spawn(["setsid", join(BIN, "deno"), "task", "--quiet", "api"], {
        cwd: ROOT,
        env: { ...base, DENO_NO_UPDATE_CHECK: "1", ...stores.apiEnv, HOST: host, PORT: String(port) },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
    } else {
      // A Worker sees only what wrangler gives it: the variables go in through an env file.
      const envFile = join(scratch, "worker.env");
      await writeFile(envFile, Object.entries(stores.apiEnv).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join("\n"));
      api = Bun.spawn(["setsid", "npm", "run", "--silent", "api:workerd", "--", "--env-file", envFile, "--persist-to", join(scratch, "state")], {
        cwd: ROOT,
        env: { ...base, HOST: host, PORT: String(port), WRANGLER_LOG_PATH: join(scratch, "logs") },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
    }
    children.push(api);
    relay(api, "api");
    const url = `http://${host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host}:${port}`;
    await waitForHealth(url, api, `the API on ${runtime}`);

    const lines = [
      "",
      `The edge API on ${runtime === "deno" ? "Deno" : "workerd"} is ready.`,
      "",
      `  API          ${url}`,
      `  Swagger UI   ${url}/docs`,
      `  Worker       http://127.0.0.1:${port + 1}/health (Bun)`,
      ...stores.summary.map((line) => `  ${line}`),
      `  Sample book  ${note}`,
      "",
    ];
    if (chat) {
      const body = JSON.stringify({ user_id: chat.user_id, character_id: chat.character_id, book_id: chat.book_id, session_id: chat.session_id, user_message: SAMPLE_BOOK.question });
      lines.push(`Chat with ${chat.character_name} ("${chat.book_title}"):`, "", `  curl -N ${url}/character/chat -H 'content-type: application/json' -d '${body}'`, "");
    }
    lines.push("Ctrl-C stops the API, the worker and the stores.");
    console.log(lines.join("\n"));
    // Whichever child ends first ends the whole: one alone is not the edge.
    const first = await Promise.race(children.map((c, i) => c.exited.then(() => i)));
    console.error(`${first === 0 ? "the worker" : "the API"} exited; stopping`);
    await stopAll();
    return 1;
  } catch (err) {
    console.error(`edge: ${err instanceof Error ? err.message : String(err)}`);
    await stopAll();
    return 1;
  }
}

if (import.meta.main) process.exit(await main(process.argv.slice(2), process.env));
