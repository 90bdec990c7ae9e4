import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, secretsOf } from "../../common/config.ts";
import { createDatabase } from "../../common/db/create.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { getBook } from "../../common/db/books.ts";
import { getIngestion } from "../../common/db/ingestions.ts";
import { saveCharacters } from "../../common/db/characters.ts";
import { createSession, insertBook } from "../../common/db/frontend-rows.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { createLogger } from "../../common/log.ts";
import { enqueueJob } from "../../common/queue.ts";
import { startFakeLlmGateway, type FakeLlmGateway } from "../support/fake-llm-gateway.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";
import { startPrivateRedis, unavailableRedisServer, type PrivateRedis } from "../support/private-servers.ts";
import { freePort, REPO_ROOT, runEntry, startService, type ServiceProcess } from "../support/process.ts";
import { closedPort } from "../support/redis.ts";
import { eventually, startBookServer, type BookServer } from "../fixtures/ingest/harness.ts";

/**
 * Credentials never leave the process: every key and password is set to a recognisable secret, every
 * upstream fails, and fails the worst way, by echoing the credential it was sent back in its error
 * body (as some gateways do with a wrong key). Then everything the service shows anyone is searched
 * for the secrets: the API's and the worker's log lines, /metrics, HTTP error bodies and SSE events,
 * the start-up error of a bad configuration, and the stored ingestion error (`book_ingestions.last_error`).
 */

setDefaultTimeout(120_000);

const random = () => crypto.randomUUID().replaceAll("-", "").slice(0, 16);
const SECRETS = {
  LLM_API_KEY: `sk-llm-${random()}`,
  RERANK_API_KEY: `rr-key-${random()}`,
  QDRANT_API_KEY: `qd-key-${random()}`,
  TYPESENSE_API_KEY: `ts-key-${random()}`,
  UPSTASH_REDIS_REST_TOKEN: `up-tok-${random()}`,
  DATABASE_PASSWORD: `dbpw${random()}`,
  REDIS_PASSWORD: `rdpw${random()}`,
};

/** The secrets that appear in `text`, by name; empty when none leaked. */
function leaked(text: string): string[] {
  return Object.entries(SECRETS)
    .filter(([, secret]) => text.includes(secret) || text.includes(secret.slice(4)))
    .map(([name]) => name);
}

/** A loopback server that answers every request with `status` and a body quoting the credential it received. */
function startEchoingUpstream(status: number, credential: (request: Request) => string | null) {
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (request) =>
      Response.json({ error: `invalid credential: ${credential(request) ?? "(none)"}`, message: `rejected ${credential(request)}` }, { status }),
  });
  return { url: `http://127.0.0.1:${server.port}`, stop: () => void server.stop(true) };
}

describe("the logger", () => {
  test("writes [redacted] for a secret quoted raw, JSON-escaped or percent-encoded, in any field or the message", () => {
    const lines: string[] = [];
    const secret = 'p@ss"w\\rd-42';
    const log = createLogger({ format: "json", write: (line) => lines.push(line), secrets: [secret, "on"] }).child({ component: "x" });
    log.error(`auth failed for ${secret}`, { error: new Error(`HTTP 401: bad key ${secret}`), url: `postgres://u:${encodeURIComponent(secret)}@db/x` });
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain("w\\\\rd-42");
    expect(lines[0]).not.toContain("rd-42");
    expect(JSON.parse(lines[0]!)).toMatchObject({
      msg: "auth failed for [redacted]",
      error: { message: "HTTP 401: bad key [redacted]" },
      url: "postgres://u:[redacted]@db/x",
    });
    // Values too short to be credentials are left alone rather than blanking ordinary words.
    expect(lines[0]).toContain("component");
  });

  test("takes every credential of the configuration", () => {
    const config = loadConfig({
      DATABASE_URL: "postgres://app:db-pass-1@db.internal:5432/app",
      REDIS_URL: "redis://:redis%2Fpass@cache:6379",
      LLM_API_KEY: "llm-key-1",
      RERANK_URL: "http://rerank",
      RERANK_API_KEY: "rerank-key-1",
      QDRANT_URL: "http://qdrant",
      QDRANT_API_KEY: "qdrant-key-1",
      TYPESENSE_URL: "http://typesense",
      TYPESENSE_API_KEY: "typesense-key-1",
    });
    expect(secretsOf(config).sort()).toEqual(["db-pass-1", "llm-key-1", "qdrant-key-1", "redis%2Fpass", "redis/pass", "rerank-key-1", "typesense-key-1"].sort());
    expect(secretsOf(loadConfig({ UPSTASH_REDIS_REST_URL: "https://x.upstash.io", UPSTASH_REDIS_REST_TOKEN: "upstash-token-1" }))).toEqual(["upstash-token-1"]);
  });
});

const postgres = await probePostgres();
const redisMissing = unavailableRedisServer();
const skip = !postgres.reachable ? postgres.reason : redisMissing;
if (skip) console.warn(`security-secrets: skipped, the API and the worker need a database and a Redis the test can reach: ${skip}`);

describe.skipIf(skip !== undefined)("API keys and passwords under failure", () => {
  let testDb: TestDatabase;
  let db: Database;
  let redis: PrivateRedis;
  let gateway: FakeLlmGateway;
  let books: BookServer;
  const upstreams: { stop(): void }[] = [];
  let env: Record<string, string>;
  let api: ServiceProcess;
  const seen: string[] = [];

  beforeAll(async () => {
    if (!postgres.reachable) return;
    testDb = await createTestDatabase(postgres.url);
    db = await createDatabase({ driver: "postgres", url: testDb.url });
    await migrate(db);
    redis = await startPrivateRedis({ persistent: false, password: SECRETS.REDIS_PASSWORD });
    books = startBookServer();

    gateway = startFakeLlmGateway();
    const refusal = { status: 500, message: `Incorrect API key provided: ${SECRETS.LLM_API_KEY}` };
    gateway.onChat(() => refusal);
    gateway.onEmbeddings(() => refusal);
    const bearer = (r: Request) => r.headers.get("authorization");
    const rerank = startEchoingUpstream(401, bearer);
    const qdrant = startEchoingUpstream(500, (r) => r.headers.get("api-key"));
    const typesense = startEchoingUpstream(500, (r) => r.headers.get("x-typesense-api-key"));
    const upstash = startEchoingUpstream(500, bearer);
    upstreams.push(rerank, qdrant, typesense, upstash);

    const withPassword = new URL(testDb.url);
    withPassword.password = SECRETS.DATABASE_PASSWORD;
    env = {
      DATABASE_URL: withPassword.toString(),
      LLM_GATEWAY_URL: gateway.baseURL,
      LLM_API_KEY: SECRETS.LLM_API_KEY,
      RERANK_URL: rerank.url,
      RERANK_API_KEY: SECRETS.RERANK_API_KEY,
      QDRANT_URL: qdrant.url,
      QDRANT_API_KEY: SECRETS.QDRANT_API_KEY,
      TYPESENSE_URL: typesense.url,
      TYPESENSE_API_KEY: SECRETS.TYPESENSE_API_KEY,
      FILE_URL_ALLOWED_HOSTS: books.host,
      MAX_ATTEMPTS: "2",
      LOG_LEVEL: "debug",
    };
    api = await startService("api/server.ts", { ...env, UPSTASH_REDIS_REST_URL: upstash.url, UPSTASH_REDIS_REST_TOKEN: SECRETS.UPSTASH_REDIS_REST_TOKEN });
  }, 120_000);

  afterAll(async () => {
    await api?.stop();
    for (const upstream of upstreams) upstream.stop();
    gateway?.stop();
    books?.stop();
    await redis?.stop();
    await db?.close();
    await testDb?.drop();
  });

  test("the upstreams really received the secrets (so the rest of this suite could see a leak)", async () => {
    const book = await insertBook(db, { title: "Keys" });
    const [character] = (await saveCharacters(db, book.id, [{ name: "Ada", systemPrompt: "I am Ada." }])).characters;
    const userId = crypto.randomUUID();
    const session = await createSession(db, { userId, characterId: character!.id });
    const res = await fetch(`${api.url}/character/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ user_id: userId, character_id: character!.id, book_id: book.id, session_id: session.id, user_message: "Who holds the keys?" }),
    });
    const events = await res.text();
    seen.push(events);
    expect(events).toContain('"code":502');
    expect(gateway.chatRequests().map((r) => r.headers.authorization)).toContain(`Bearer ${SECRETS.LLM_API_KEY}`);
  });

  test("a chat turn whose every upstream fails shows no secret in its events or the API's log", async () => {
    await eventually(async () => api.logs().includes("chat completion failed"), "the failed completion to be logged");
    expect(api.logs()).toContain("session lock unavailable");
    expect(leaked(seen.join("\n"))).toEqual([]);
    expect(leaked(api.logs())).toEqual([]);
  });

  test("a submission the queue refuses shows no secret in its 500 or the API's log", async () => {
    const book = await insertBook(db, { title: "Queued" });
    const res = await fetch(`${api.url}/character/processing`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ book_id: book.id, file_url: books.url("the-keepers-ledger.txt"), user_id: crypto.randomUUID() }),
    });
    const body = await res.text();
    expect({ status: res.status, body }).toEqual({ status: 500, body: JSON.stringify({ error: "queue unavailable" }) });
    await eventually(async () => api.logs().includes(" request failed "), "the refused enqueue to be logged");
    expect(leaked(api.logs())).toEqual([]);
  });

  test("/metrics shows no secret", async () => {
    const metrics = await (await fetch(`${api.url}/metrics`)).text();
    expect(metrics).toContain("chat_requests_total");
    expect(leaked(metrics)).toEqual([]);
  });

  test("a worker whose job fails at every upstream, then loses Redis, shows no secret in its log, its metrics or the book's error", async () => {
    const metricsPort = await freePort();
    const dataDir = await mkdtemp(join(tmpdir(), "secrets-worker-"));
    const worker = Bun.spawn([process.execPath, "ingest/worker.ts"], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env, REDIS_URL: redis.url, METRICS_PORT: String(metricsPort), DATA_DIR: dataDir },
      stdout: "pipe",
      stderr: "ignore",
    });
    let logs = "";
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of worker.stdout) logs += decoder.decode(chunk, { stream: true });
    })();
    const kv = createRedisKeyValueStore({ url: redis.url });
    try {
      const book = await insertBook(db, { title: "The Keeper's Ledger" });
      await enqueueJob(kv, { book_id: book.id, file_url: books.url("the-keepers-ledger.txt"), user_id: crypto.randomUUID() });
      const failed = await eventually(async () => {
        const row = await getBook(db, book.id);
        return row?.processingStatus === "failed" ? row : undefined;
      }, "the job to fail");
      const error = (await getIngestion(db, book.id))?.lastError ?? "";
      expect(error).toMatch(/^gave up after 2 attempts: /);
      expect(leaked(error)).toEqual([]);

      const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      expect(leaked(metrics)).toEqual([]);

      // Redis goes away: the poll loop logs the store's errors.
      await redis.kill();
      await eventually(async () => logs.includes("job queue unavailable"), "the worker to report the lost queue");
      await redis.start();
    } finally {
      worker.kill("SIGTERM");
      await worker.exited;
      await kv.close();
      await rm(dataDir, { recursive: true, force: true });
    }
    expect(leaked(logs)).toEqual([]);
  });

  test("a start-up that cannot reach the database shows no password", async () => {
    const unreachable = `postgres://postgres:${SECRETS.DATABASE_PASSWORD}@127.0.0.1:${closedPort()}/nowhere`;
    const result = await runEntry("api/server.ts", { DATABASE_URL: unreachable, LOG_LEVEL: "debug" }, 60_000);
    expect(result.exitCode).not.toBe(0);
    expect(leaked(result.stdout + result.stderr)).toEqual([]);
  });
});
