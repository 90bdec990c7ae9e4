import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeLlmGateway, type FakeLlmGateway } from "../support/fake-llm-gateway.ts";
import { runEntry, startService, type ServiceProcess } from "../support/process.ts";

const PROMTOOL = ["/usr/bin/promtool", "/usr/local/bin/promtool"].find(existsSync);
if (!PROMTOOL) console.warn("skipping the promtool check of /metrics: promtool is absent (apt-get install prometheus)");

describe("the API server process", () => {
  let gateway: FakeLlmGateway;
  let api: ServiceProcess;

  beforeAll(async () => {
    gateway = startFakeLlmGateway();
    api = await startService("api/server.ts", { LLM_GATEWAY_URL: gateway.baseURL, LOG_LEVEL: "warn" });
  });
  afterAll(async () => {
    await api?.stop();
    gateway?.stop();
  });

  test("answers /health with ok", async () => {
    const res = await fetch(`${api.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("ok");
  });

  test("refuses a malformed submission with 400 and an error body", async () => {
    const res = await fetch(`${api.url}/character/processing`, { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "body is not valid JSON" });
  });

  test("refuses a request body over the documented 1 MiB limit with 413", async () => {
    const res = await fetch(`${api.url}/character/processing`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ book_id: "x".repeat(2 * 1024 * 1024) }),
    });
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toStartWith("application/json");
    expect(await res.json()).toEqual({ error: "request body is larger than 1048576 bytes" });
  });

  test("serves the Swagger UI and its assets", async () => {
    expect((await fetch(`${api.url}/docs`)).status).toBe(200);
    expect((await fetch(`${api.url}/docs/assets/swagger-ui-bundle.js`)).status).toBe(200);
  });

  test.skipIf(!PROMTOOL)("serves /metrics that promtool accepts", async () => {
    await fetch(`${api.url}/health`);
    const body = await (await fetch(`${api.url}/metrics`)).text();
    expect(body).toContain('http_requests_total{method="GET",endpoint="/health",status_code="200"}');
    const dir = await mkdtemp(join(tmpdir(), "metrics-"));
    const file = join(dir, "metrics.txt");
    await writeFile(file, body);
    const check = Bun.spawnSync([PROMTOOL!, "check", "metrics"], { stdin: Bun.file(file), stdout: "pipe", stderr: "pipe" });
    await rm(dir, { recursive: true, force: true });
    expect({ exitCode: check.exitCode, output: check.stdout.toString() + check.stderr.toString() }).toEqual({ exitCode: 0, output: "" });
  });

  test("logs plain text lines on stdout, or JSON lines with LOG_FORMAT=json", async () => {
    const [text, json] = await Promise.all([
      startService("api/server.ts", { LLM_GATEWAY_URL: gateway.baseURL }),
      startService("api/server.ts", { LLM_GATEWAY_URL: gateway.baseURL, LOG_FORMAT: "json" }),
    ]);
    try {
      const listening = (service: ServiceProcess) => service.output().stdout.split("\n").find((l) => l.includes("api listening"));
      expect(listening(text)).toMatch(
        /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO  api listening address=127\.0\.0\.1:\d+ url=http:\/\/127\.0\.0\.1:\d+ docs=http:\/\/127\.0\.0\.1:\d+\/docs$/,
      );
      expect(JSON.parse(listening(json)!)).toMatchObject({ level: "info", msg: "api listening", url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) });
      for (const service of [text, json]) expect(service.output().stderr).toBe("");
    } finally {
      await Promise.all([text.stop(), json.stop()]);
    }
  });

  test("stops cleanly on SIGTERM", async () => {
    const other = await startService("api/server.ts", { LLM_GATEWAY_URL: gateway.baseURL, LOG_LEVEL: "warn" });
    expect(await other.stop("SIGTERM")).toBe(0);
  });
});

describe("start-up with a bad configuration", () => {
  test.each([
    ["PORT", "http", "configuration error: invalid PORT: expected a port number 1-65535"],
    ["PORT", "99999", "configuration error: invalid PORT: expected a port number 1-65535"],
    ["DATABASE_URL", "mysql://root@localhost/db", "configuration error: invalid DATABASE_URL: expected a postgres:// or postgresql:// URL"],
    ["DATABASE_URL", "not-a-url", "configuration error: invalid DATABASE_URL: expected a postgres:// or postgresql:// URL"],
  ])("%s=%s prints one clear line and exits non-zero", async (variable, value, line) => {
    const result = await runEntry("api/server.ts", { [variable]: value });
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr.trim()).toBe(line);
  });
});
