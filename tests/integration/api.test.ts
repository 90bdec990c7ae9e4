import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Elysia } from "elysia";
import { withHttpMetrics } from "../../api/http-metrics.ts";
import { sseResponse } from "../../api/sse.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import type { Database } from "../../common/db/index.ts";
import { DatabaseError } from "../../common/db/index.ts";
import { downloadBook } from "../../common/file-url.ts";
import { KvError, type KeyValueStore } from "../../common/kv/index.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { createMetrics } from "../../common/metrics/index.ts";
import { PROCESSING_QUEUE } from "../../common/queue.ts";
import { buildTestApp, metricValue } from "../support/app.ts";
import { openEmbeddedDatabase } from "../support/embedded-stores.ts";

const USER = "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f7a";
const MISSING_BOOK = "11111111-2222-4333-8444-555555555555";

type TestApp = Awaited<ReturnType<typeof buildTestApp>>;

// The apps of this file share one embedded database (each of their own would start one: an initdb of
// seconds); the tests that write rows write their own, and an app that must fail gets a broken copy.
let sharedDb: Promise<Database> | undefined;
const testApp = async (overrides: Parameters<typeof buildTestApp>[0] = {}) => buildTestApp({ db: await (sharedDb ??= openEmbeddedDatabase()), ...overrides });
afterAll(async () => {
  await (await sharedDb)?.close();
});

describe("GET /health", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp();
  }, 60_000);

  test("answers 200 ok as plain text without caching headers", async () => {
    const res = await t.request("/health");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/plain");
    expect(await res.text()).toBe("ok");
    for (const header of ["cache-control", "etag", "expires", "last-modified"]) expect(res.headers.get(header)).toBeNull();
  });

  test("does not touch the database", async () => {
    const down: Database = { ...t.deps.db, query: () => Promise.reject(new DatabaseError("down", "connection")) };
    const { request } = await buildTestApp({ db: down });
    expect((await request("/health")).status).toBe(200);
  });
});

describe("paths a person types by hand", () => {
  test("GET / redirects to the API documentation", async () => {
    const { request } = await testApp();
    const res = await request("/");
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/docs");
  });

  test("a known path with a method it does not serve answers 405 with Allow; an unknown path stays 404", async () => {
    const { request } = await testApp();
    for (const [method, path, allow] of [
      ["GET", "/character/chat", "POST"],
      ["GET", "/character/processing", "POST"],
      ["DELETE", "/health", "GET"],
      ["POST", "/metrics", "GET"],
    ] as const) {
      const res = await request(path, { method });
      expect({ method, path, status: res.status, allow: res.headers.get("allow"), body: await res.json() }).toEqual({
        method,
        path,
        status: 405,
        allow,
        body: { error: `method not allowed: use ${allow}` },
      });
    }
    const unknown = await request("/character/nothing-here");
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get("allow")).toBeNull();
    expect(await unknown.json()).toEqual({ error: "not found" });
  });
});

describe("the documented error examples are what each status really answers", () => {
  type Documented = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema?: { example?: unknown }; example?: unknown }> }> }>> };
  const exampleOf = (doc: Documented, path: string, status: number) => {
    const media = doc.paths[path]!.post!.responses[String(status)]!.content!["application/json"]!;
    return media.example ?? media.schema?.example;
  };

  test("POST /character/processing: 400, 403, 413, 415, 422 and 500", async () => {
    const app = await testApp();
    const doc = (await (await app.request("/docs/json")).json()) as Documented;
    const ids = { book_id: "6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b", user_id: "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f7a", file_url: "https://books.example.com/a.txt" };
    const down = await buildTestApp({
      db: { ...app.deps.db, query: () => Promise.reject(new DatabaseError("connect ECONNREFUSED", "connection")) },
    });
    const answers: [number, Response][] = [
      [400, await app.postJson("/character/processing", { ...ids, book_id: "42" })],
      [403, await app.postJson("/character/processing", ids, { origin: "https://elsewhere.example" })],
      [413, await app.postJson("/character/processing", JSON.stringify({ ...ids, pad: "x".repeat(1_100_000) }))],
      [415, await app.request("/character/processing", { method: "POST", headers: { "content-type": "text/plain" }, body: JSON.stringify(ids) })],
      [422, await app.postJson("/character/processing", ids)],
      [500, await down.postJson("/character/processing", ids)],
    ];
    for (const [status, res] of answers) {
      expect({ status: res.status, body: await res.json() }).toEqual({ status, body: exampleOf(doc, "/character/processing", status) });
    }
  });

  test("POST /character/chat: 403, 413, 415 and 500 show their own messages", async () => {
    const app = await testApp();
    const doc = (await (await app.request("/docs/json")).json()) as Documented;
    const turn = { user_id: crypto.randomUUID(), character_id: crypto.randomUUID(), book_id: crypto.randomUUID(), session_id: crypto.randomUUID(), user_message: "Hello" };
    const foreign = await app.postJson("/character/chat", turn, { origin: "https://elsewhere.example" });
    expect(await foreign.json()).toEqual(exampleOf(doc, "/character/chat", 403));
    const plain = await app.request("/character/chat", { method: "POST", headers: { "content-type": "text/plain" }, body: JSON.stringify(turn) });
    expect(await plain.json()).toEqual(exampleOf(doc, "/character/chat", 415));
    expect(exampleOf(doc, "/character/chat", 413)).toEqual({ error: "request body is larger than 1048576 bytes" });
    expect(exampleOf(doc, "/character/chat", 500)).toEqual({ error: "database unavailable" });
  });

  test("with a working chat request known (npm start's sample session), the document's chat example is that request", async () => {
    const example = { user_id: "10ca1000-0000-4000-8000-000000000001", character_id: "3665865f-3a0c-4522-8994-5c1893031c71", book_id: "5a3b1e00-0000-4000-8000-000000000001", session_id: "a59d5ad5-41ec-4a0d-8ce4-82ea3d4e8690", user_message: "What did you find hidden in the diary?" };
    const app = await testApp({ requestExamples: () => ({ chat: example }) });
    const doc = (await (await app.request("/docs/json")).json()) as { paths: Record<string, Record<string, { requestBody: { content: Record<string, { example?: unknown; schema: { example?: unknown } }> } }>> };
    const media = doc.paths["/character/chat"]!.post!.requestBody.content["application/json"]!;
    expect(media.example).toEqual(example);
    expect(media.schema.example).toEqual(example);
    const plain = (await (await (await testApp()).request("/docs/json")).json()) as typeof doc;
    expect(plain.paths["/character/chat"]!.post!.requestBody.content["application/json"]!.schema.example).not.toEqual(example);
  });
});

describe("GET /metrics", () => {
  test("serves the whole catalogue in the Prometheus text format", async () => {
    const t = await testApp({ metrics: createMetrics() });
    const res = await t.request("/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(res.headers.get("cache-control")).toBeNull();
    const body = await res.text();
    const types = Object.fromEntries(
      body
        .split("\n")
        .filter((l) => l.startsWith("# TYPE "))
        .map((l) => l.slice(7).split(" ") as [string, string]),
    );
    expect(types).toMatchObject({
      http_requests_total: "counter",
      http_request_duration_seconds: "histogram",
      http_requests_in_progress: "gauge",
      processing_jobs_queued_total: "counter",
      processing_queue_depth: "gauge",
      processing_active_workers: "gauge",
      processing_jobs_processed_total: "counter",
      processing_pipeline_duration_seconds: "histogram",
      indexing_chunks_generated_total: "counter",
      indexing_chunks_indexed_total: "counter",
      indexing_embeddings_generated_total: "counter",
      indexing_duration_seconds: "histogram",
      indexing_errors_total: "counter",
      process_resident_memory_bytes: "gauge",
    });
    expect(body).not.toContain("nodejs_heap_space_");
  });
});

describe("HTTP metrics middleware", () => {
  test("counts and times each request under its route template", async () => {
    const t = await testApp();
    await t.request("/health");
    await t.request("/health");
    const body = await (await t.request("/metrics")).text();
    expect(metricValue(body, 'http_requests_total{method="GET",endpoint="/health",status_code="200"}')).toBe(2);
    expect(metricValue(body, 'http_request_duration_seconds_count{method="GET",endpoint="/health"}')).toBe(2);
    expect(metricValue(body, 'http_requests_in_progress{method="GET",endpoint="/health"}')).toBe(0);
  });

  test("requests between two scrapes are counted once, and by both the counter and the histogram", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const app = new Elysia().get("/ping", () => "pong");
    const handle = withHttpMetrics(app, (r) => app.handle(r), metrics);
    const total = async () => {
      const body = await metrics.registry.metrics();
      return [
        metricValue(body, 'http_requests_total{method="GET",endpoint="/ping",status_code="200"}'),
        metricValue(body, 'http_request_duration_seconds_count{method="GET",endpoint="/ping"}'),
      ];
    };
    await handle(new Request("http://localhost/ping"));
    expect(await total()).toEqual([1, 1]);
    expect(await total()).toEqual([1, 1]);
    for (let i = 0; i < 3; i++) await handle(new Request("http://localhost/ping"));
    expect((await metrics.http.requests.get()).values.find((v) => v.labels.endpoint === "/ping")?.value).toBe(4);
    expect(await total()).toEqual([4, 4]);
  });

  test("puts every unmatched path under one label value, so scanners cannot add series", async () => {
    const t = await testApp();
    for (let i = 0; i < 50; i++) {
      const res = await t.request(`/wp-admin/${i}/setup.php?x=${i}`);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: "not found" });
    }
    const body = await (await t.request("/metrics")).text();
    expect(metricValue(body, 'http_requests_total{method="GET",endpoint="unmatched",status_code="404"}')).toBe(50);
    expect(body).not.toContain("wp-admin");
  });

  test("labels a parameterised route by its template, not the raw path", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const app = new Elysia().get("/books/:id", ({ params }) => params.id);
    const handle = withHttpMetrics(app, (r) => app.handle(r), metrics);
    await handle(new Request("http://localhost/books/42"));
    await handle(new Request("http://localhost/books/43/"));
    const body = await metrics.registry.metrics();
    expect(metricValue(body, 'http_requests_total{method="GET",endpoint="/books/:id",status_code="200"}')).toBe(2);
  });

  test("times a stream until its last byte, and counts it in flight meanwhile", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const app = new Elysia().get("/stream", () =>
      sseResponse(
        (async function* () {
          yield { token: "1" };
          await gate;
          yield { token: "2" };
        })(),
      ),
    );
    const res = await withHttpMetrics(app, (r) => app.handle(r), metrics)(new Request("http://localhost/stream"));
    const reader = res.body!.getReader();
    await reader.read();
    let body = await metrics.registry.metrics();
    expect(metricValue(body, 'http_requests_in_progress{method="GET",endpoint="/stream"}')).toBe(1);
    expect(metricValue(body, 'http_requests_total{method="GET",endpoint="/stream",status_code="200"}')).toBeUndefined();
    release();
    while (!(await reader.read()).done);
    body = await metrics.registry.metrics();
    expect(metricValue(body, 'http_requests_in_progress{method="GET",endpoint="/stream"}')).toBe(0);
    expect(metricValue(body, 'http_requests_total{method="GET",endpoint="/stream",status_code="200"}')).toBe(1);
  });

  test("a stream the client cancels is finished in the metrics too", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const app = new Elysia().get(
      "/forever",
      () =>
        new Response(
          new ReadableStream({
            pull(c) {
              c.enqueue(new TextEncoder().encode("data: tick\n\n"));
              return Bun.sleep(5);
            },
          }),
          { headers: { "content-type": "text/event-stream" } },
        ),
    );
    const res = await withHttpMetrics(app, (r) => app.handle(r), metrics)(new Request("http://localhost/forever"));
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    const body = await metrics.registry.metrics();
    expect(metricValue(body, 'http_requests_in_progress{method="GET",endpoint="/forever"}')).toBe(0);
    expect(metricValue(body, 'http_requests_total{method="GET",endpoint="/forever",status_code="200"}')).toBe(1);
  });
});

describe("POST /character/processing", () => {
  let t: TestApp;
  let bookId: string;
  let probed: string[];
  let files: ReturnType<typeof Bun.serve>;
  let filesBase: string;

  beforeAll(async () => {
    probed = [];
    files = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch(req) {
        const path = new URL(req.url).pathname;
        if (path === "/book.txt") return new Response("Call me Ishmael.\n");
        if (path === "/big.txt") return new Response("a".repeat(4096));
        if (path === "/binary.txt") return new Response(new Uint8Array([0, 159, 146, 150]));
        return new Response("not here", { status: 404 });
      },
    });
    filesBase = `http://127.0.0.1:${files.port}`;
    const allowedHosts = [`127.0.0.1:${files.port}`];
    t = await testApp({
      probeBook: (url) => {
        probed.push(url);
        return downloadBook(url, { allowedHosts, maxBytes: 1024 });
      },
    });
    bookId = (await insertBook(t.deps.db, { title: "Moby-Dick", author: "Herman Melville" })).id;
  }, 60_000);
  afterAll(() => files.stop(true));

  const valid = () => ({ book_id: bookId, file_url: `${filesBase}/book.txt`, user_id: USER });

  test("queues a valid book and answers 202 with both accepted shapes", async () => {
    const before = await t.deps.kv.llen(PROCESSING_QUEUE);
    const res = await t.postJson("/character/processing", valid());
    expect(res.status).toBe(202);
    const body = (await res.json()) as { status: string; job_id: string; data: { book_id: string; job: Record<string, unknown>; queued: boolean } };
    expect(body.status).toBe("accepted");
    expect(body.data.book_id).toBe(bookId);
    expect(body.data.queued).toBe(true);
    expect(body.data.job).toMatchObject({ job_id: body.job_id, book_id: bookId, file_url: valid().file_url, user_id: USER });
    expect(new Date(String(body.data.job.enqueued_at)).toISOString()).toBe(String(body.data.job.enqueued_at));

    expect(await t.deps.kv.llen(PROCESSING_QUEUE)).toBe(before + 1);
    const [queued] = await t.deps.kv.lrange(PROCESSING_QUEUE, 0, 0);
    expect(JSON.parse(queued!)).toEqual(body.data.job);

    const metrics = await t.deps.metrics.registry.metrics();
    expect(metricValue(metrics, "processing_jobs_queued_total")).toBeGreaterThanOrEqual(1);
    expect(metricValue(metrics, "processing_queue_depth")).toBe(before + 1);
  });

  test.each([
    ["malformed JSON", "{\"book_id\": ", /not valid JSON/],
    ["an array body", "[]", /JSON object|body/],
    ["a missing book_id", { file_url: "https://a.example/b.txt", user_id: USER }, /book_id/],
    ["a missing file_url", { book_id: MISSING_BOOK, user_id: USER }, /file_url/],
    ["a missing user_id", { book_id: MISSING_BOOK, file_url: "https://a.example/b.txt" }, /user_id/],
    ["a numeric book_id", { book_id: 42, file_url: "https://a.example/b.txt", user_id: USER }, /book_id/],
    ["a book_id that is not a UUID", { book_id: "moby", file_url: "https://a.example/b.txt", user_id: USER }, /book_id must be a UUID/],
    ["a file_url that is an object", { book_id: MISSING_BOOK, file_url: { href: "x" }, user_id: USER }, /file_url/],
    ["a null user_id", { book_id: MISSING_BOOK, file_url: "https://a.example/b.txt", user_id: null }, /user_id/],
  ])("%s is refused with 400 naming the problem", async (_name, body, message) => {
    const res = await t.postJson("/character/processing", body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { error: string };
    expect(Object.keys(json)).toEqual(["error"]);
    expect(json.error).toMatch(message);
  });

  test("a body that is not JSON is refused with 400", async () => {
    const res = await t.request("/character/processing", { method: "POST", headers: { "content-type": "application/json" }, body: "hello" });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "body is not valid JSON" });
  });

  test("a body sent as text/plain is refused with 415 before it is read", async () => {
    const res = await t.request("/character/processing", { method: "POST", headers: { "content-type": "text/plain" }, body: JSON.stringify(valid()) });
    expect(res.status).toBe(415);
    expect(await res.json()).toEqual({ error: "the request body must be application/json" });
  });

  test("a book that is not in the database is refused with 422", async () => {
    const res = await t.postJson("/character/processing", { ...valid(), book_id: MISSING_BOOK });
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({ error: "book not found" });
  });

  test.each([
    ["a PDF", "https://books.example.com/moby.pdf", /\.txt or \.md/],
    ["a path without extension", "https://books.example.com/moby", /\.txt or \.md/],
    ["an ftp URL", "ftp://books.example.com/moby.txt", /http or https/],
    ["a file URL", "file:///etc/moby.txt", /http or https/],
  ])("%s is refused with 422 before anything is downloaded", async (_name, fileUrl, message) => {
    const count = probed.length;
    const res = await t.postJson("/character/processing", { ...valid(), file_url: fileUrl });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { error: string }).error).toMatch(message);
    expect(probed.length).toBe(count);
  });

  test.each([
    ["a loopback host that is not allow-listed", "http://127.0.0.1:9/moby.txt", /not a public address/],
    ["the cloud metadata address", "http://169.254.169.254/latest/meta-data.txt", /not a public address/],
    ["a file larger than MAX_BOOK_BYTES", "/big.txt", /larger than 1024 bytes/],
    ["a binary file", "/binary.txt", /file is not text: it contains NUL bytes/],
    ["a file that does not exist", "/missing.txt", /HTTP 404/],
  ])("%s is refused with 422", async (_name, fileUrl, message) => {
    const url = fileUrl.startsWith("/") ? `${filesBase}${fileUrl}` : fileUrl;
    const before = await t.deps.kv.llen(PROCESSING_QUEUE);
    const res = await t.postJson("/character/processing", { ...valid(), file_url: url });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { error: string }).error).toMatch(message);
    expect(await t.deps.kv.llen(PROCESSING_QUEUE)).toBe(before);
  });

  test("an unreachable database gives 500 without internals", async () => {
    const db = t.deps.db;
    const down: Database = {
      ...db,
      query: () => Promise.reject(new DatabaseError("connect ECONNREFUSED 10.0.0.7:5432 password=hunter2", "connection")),
    };
    const broken = await buildTestApp({ db: down, probeBook: t.deps.probeBook });
    const res = await broken.postJson("/character/processing", valid());
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ error: "database unavailable" });
    expect(text).not.toContain("10.0.0.7");
  });

  test("an unavailable queue gives 500 and queues nothing", async () => {
    const kv: KeyValueStore = { ...createMemoryKeyValueStore(), lpush: () => Promise.reject(new KvError("connection refused")) };
    const broken = await buildTestApp({ db: t.deps.db, kv });
    const res = await broken.postJson("/character/processing", valid());
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: "queue unavailable" });
  });
});
