import { expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { collectOutput, freePort, REPO_ROOT, waitForHealth } from "../support/process.ts";

// wrangler bundles the Worker before it serves it: seconds on a busy machine.
setDefaultTimeout(120_000);

const UNREACHABLE = "http://127.0.0.1:9";

test("npm run api:workerd serves on PORT and HOST, with no interactive session and none of wrangler's banner or network noise, and names each service it cannot reach in one line", async () => {
  const scratch = await mkdtemp(join(tmpdir(), "api-workerd-"));
  // Production services only, none reached: building the app does no I/O, and /health checks none.
  const envFile = join(scratch, "worker.env");
  await writeFile(
    envFile,
    [
      "DATABASE_URL=postgres://u:p@127.0.0.1:9/none",
      `UPSTASH_REDIS_REST_URL=${UNREACHABLE}`,
      "UPSTASH_REDIS_REST_TOKEN=token",
      `QDRANT_URL=${UNREACHABLE}`,
      `TYPESENSE_URL=${UNREACHABLE}`,
      "TYPESENSE_API_KEY=key",
      `LLM_GATEWAY_URL=${UNREACHABLE}/v1`,
    ].join("\n"),
  );
  const port = await freePort();
  // setsid: npm, its shell, wrangler and workerd are one process group, stopped together.
  const proc = Bun.spawn(["setsid", "npm", "run", "--silent", "api:workerd", "--", "--env-file", envFile, "--inspector-port", String(await freePort())], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NO_COLOR: "1", CI: "1", WRANGLER_LOG_PATH: join(scratch, "logs"), PORT: String(port), HOST: "127.0.0.1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = collectOutput(proc);
  try {
    await waitForHealth(`http://127.0.0.1:${port}`, proc, performance.now(), 90_000, "npm run api:workerd", output);
    expect(await (await fetch(`http://127.0.0.1:${port}/health`)).text()).toBe("ok");
    expect(output()).toContain(`Ready on http://127.0.0.1:${port}`);
    // wrangler's own noise stays out: no banner, no Request.cf fetch with its stack traces.
    expect(output()).not.toContain("wrangler 4.");
    expect(output()).not.toContain("getaddrinfo");
    expect(output()).not.toContain("Request.cf");
    // A Worker has no start-up hook: its first request probes the services, after its response.
    const variables = ["DATABASE_URL", "UPSTASH_REDIS_REST_URL", "QDRANT_URL", "TYPESENSE_URL", "LLM_GATEWAY_URL"];
    const deadline = Date.now() + 30_000;
    while (!variables.every((v) => output().includes(`variable=${v} `)) && Date.now() < deadline) await Bun.sleep(200);
    for (const variable of variables) {
      expect(output().split("\n").filter((line) => line.includes("dependency unreachable") && line.includes(`variable=${variable} `))).toHaveLength(1);
    }
  } finally {
    try {
      process.kill(-proc.pid, "SIGTERM");
    } catch {
      // Already gone.
    }
    await proc.exited;
    await rm(scratch, { recursive: true, force: true });
  }
});
