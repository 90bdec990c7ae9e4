import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import fc from "fast-check";
import { MAX_REQUEST_BODY_BYTES } from "../../api/json-body.ts";
import { createDatabase } from "../../common/db/create.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import { saveCharacters } from "../../common/db/characters.ts";
import { createSession, insertBook } from "../../common/db/frontend-rows.ts";
import { downloadBook } from "../../common/file-url.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { PROCESSING_QUEUE } from "../../common/queue.ts";
import { buildTestApp, metricValue } from "../support/app.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";
import { startPrivateRedis, unavailableRedisServer, type PrivateRedis } from "../support/private-servers.ts";
import { startService, type ServiceProcess } from "../support/process.ts";
import { rawExchange } from "../support/raw-http.ts";
import { recordingDatabase, type RecordingDatabase } from "../support/recording.ts";

/**
 * Hostile request bodies, generated: both POST endpoints must answer every one of them with 400,
 * 404, 413 or 422 and an `{error}` body, never 500, and write nothing anywhere. Thousands run in
 * process; a smaller run, the oversized bodies and the raw-socket cases go to the real server
 * process, where Bun.serve enforces the 1 MiB limit.
 */

setDefaultTimeout(120_000);

/** Runs per endpoint in process, and against the server process. Printed, and quoted in RELIABILITY.md. */
const IN_PROCESS_RUNS = 2_500;
const SERVER_RUNS = 300;
const REFUSALS = [400, 404, 413, 415, 422];

const ENDPOINTS = ["/character/processing", "/character/chat"] as const;
type Endpoint = (typeof ENDPOINTS)[number];

interface Seeded {
  bookId: string;
  characterId: string;
  sessionId: string;
  userId: string;
}

/** A book, a character and a session that generated bodies may name, so requests reach the database. */
async function seed(db: Database): Promise<Seeded> {
  const book = await insertBook(db, { title: "A Book Under Attack" });
  const [character] = (await saveCharacters(db, book.id, [{ name: "Mara", systemPrompt: "I am Mara." }])).characters;
  const userId = crypto.randomUUID();
  const session = await createSession(db, { userId, characterId: character!.id });
  return { bookId: book.id, characterId: character!.id, sessionId: session.id, userId };
}

// Generators -------------------------------------------------------------------------------------

const contentTypes = fc.constantFrom<string | undefined>(
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=latin1",
  "text/plain",
  "text/html",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=xyz",
  "multipart/form-data",
  "application/xml",
  "application/octet-stream",
  "",
  ";;;=",
  undefined,
);

const hugeString = (min: number, max: number) =>
  fc.tuple(fc.integer({ min, max }), fc.constantFrom("a", "é", "😀", "\u0000", "\\", '"', "\ud800", " ")).map(([n, ch]) => ch.repeat(Math.ceil(n / ch.length)));

/** A value of the wrong kind for any field, nested arbitrarily. */
const wrongValue = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.double(),
  fc.integer(),
  fc.string(),
  fc.string({ unit: "binary" }),
  fc.array(fc.jsonValue({ maxDepth: 3 }), { maxLength: 5 }),
  fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 }),
  hugeString(4_001, 300_000),
);

const urlish = fc.oneof(
  fc.webUrl({ withQueryParameters: true, withFragments: true }),
  fc.webUrl().map((u) => `${u}/book.txt`),
  fc.constantFrom(
    "file:///etc/passwd.txt",
    "ftp://example.com/book.txt",
    "data:text/plain,hello.txt",
    "javascript:alert(1)//.txt",
    "http://127.0.0.1/book.txt",
    "http://169.254.169.254/latest/meta-data/iam.txt",
    "http://[::1]/book.txt",
    "http://user:pass@example.com/book.txt",
    "http://example.com/%00.txt",
    "http://example.com/book.txt\u0000",
    "http:///book.txt",
    "//example.com/book.txt",
    "",
  ),
  fc.string(),
  fc.string({ minLength: 2_000, maxLength: 3_000 }).map((s) => `http://example.com/${s}.txt`),
);

/** Fields a body may carry; `seeded` lets some bodies name real rows so the database path runs. */
function fieldValue(field: string, seeded: Seeded): fc.Arbitrary<unknown> {
  // The session owner's id is left out: with it a generated chat body could be a valid request.
  const ids = fc.constantFrom(seeded.bookId, seeded.characterId, seeded.sessionId);
  const uuidish = fc.oneof(fc.uuid(), ids, fc.uuid().map((u) => u.toUpperCase()), fc.uuid().map((u) => ` ${u}`), fc.uuid().map((u) => u.slice(1)));
  switch (field) {
    case "file_url":
      return fc.oneof(urlish, wrongValue);
    case "user_message":
    case "preferences":
      return fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), fc.constantFrom("", "   ", "\n\t", "\u0000", "hi\u0000there", "\ud800"), hugeString(1, 6_000), wrongValue);
    default:
      return fc.oneof(uuidish, wrongValue);
  }
}

const FIELDS: Record<Endpoint, string[]> = {
  "/character/processing": ["book_id", "file_url", "user_id"],
  "/character/chat": ["user_id", "character_id", "book_id", "session_id", "user_message", "preferences"],
};

/** Bodies shaped like a request, with fields missing, mistyped, hostile, or joined by extras. */
function shapedBody(endpoint: Endpoint, seeded: Seeded): fc.Arbitrary<unknown> {
  const fields = Object.fromEntries(FIELDS[endpoint].map((f) => [f, fieldValue(f, seeded)]));
  return fc
    .tuple(
      fc.record(fields, { requiredKeys: [] }),
      fc.dictionary(fc.oneof(fc.string(), fc.constantFrom("__proto__", "constructor", "prototype")), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
    )
    .map(([known, extra]) => ({ ...extra, ...known }));
}

/**
 * A request that would be valid but for one field, so that most checks pass and the later ones
 * (the database lookups, the download) run. The chat's user never owns the seeded session, so no
 * body here can open a stream.
 */
function nearlyValidBody(endpoint: Endpoint, seeded: Seeded): fc.Arbitrary<unknown> {
  const valid: Record<string, unknown> =
    endpoint === "/character/processing"
      ? { book_id: seeded.bookId, file_url: "http://books.example.org/uploads/book.txt", user_id: crypto.randomUUID() }
      : { user_id: crypto.randomUUID(), character_id: seeded.characterId, book_id: seeded.bookId, session_id: seeded.sessionId, user_message: "Hello?" };
  return fc
    .constantFrom(...FIELDS[endpoint])
    .chain((field) => fieldValue(field, seeded).map((value) => ({ ...valid, [field]: value })));
}

function nested(depth: number, kind: "array" | "object"): string {
  return kind === "array" ? "[".repeat(depth) + "]".repeat(depth) : '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
}

const encoder = new TextEncoder();

/** Valid UTF-8 text with byte sequences no UTF-8 decoder accepts spliced in. */
const invalidUtf8 = fc
  .tuple(
    fc.jsonValue({ maxDepth: 2 }).map((v) => encoder.encode(JSON.stringify(v))),
    fc.constantFrom([0xff], [0xfe, 0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82]),
    fc.nat(),
  )
  .map(([bytes, bad, at]) => {
    const cut = bytes.length === 0 ? 0 : at % bytes.length;
    return Uint8Array.from([...bytes.subarray(0, cut), ...bad, ...bytes.subarray(cut)]);
  });

type Bytes = Uint8Array<ArrayBuffer>;

export interface HostileRequest {
  contentType: string | undefined;
  body: Bytes;
}

/** Every kind of body at once: JSON of the wrong shape, non-JSON, broken UTF-8, deep nesting. */
function hostileRequest(endpoint: Endpoint, seeded: Seeded, maxDepth: number): fc.Arbitrary<HostileRequest> {
  const body = fc.oneof(
    { weight: 5, arbitrary: shapedBody(endpoint, seeded).map((v) => encoder.encode(JSON.stringify(v))) },
    { weight: 4, arbitrary: nearlyValidBody(endpoint, seeded).map((v) => encoder.encode(JSON.stringify(v))) },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => encoder.encode(JSON.stringify(v))) },
    { weight: 1, arbitrary: fc.string({ unit: "binary" }).map((s) => encoder.encode(s)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 512 }).map((a) => Uint8Array.from(a)) },
    { weight: 1, arbitrary: invalidUtf8 },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.integer({ min: 1, max: maxDepth }), fc.constantFrom("array" as const, "object" as const), fc.constantFrom(...FIELDS[endpoint]))
        .map(([depth, kind, field]) => encoder.encode(depth % 2 ? nested(depth, kind) : `{"${field}":${nested(depth, kind)}}`)),
    },
    {
      weight: 1,
      arbitrary: shapedBody(endpoint, seeded).map((v) => {
        const text = JSON.stringify(v);
        return encoder.encode(text.slice(0, Math.floor(text.length / 2)));
      }),
    },
  );
  return fc.record({ contentType: contentTypes, body });
}

function describeRequest(r: HostileRequest): string {
  const text = new TextDecoder().decode(r.body.subarray(0, 160));
  return `${r.contentType ?? "(no content type)"} ${r.body.length} bytes: ${JSON.stringify(text)}`;
}

function requestInit(r: HostileRequest): RequestInit {
  const headers: Record<string, string> = {};
  if (r.contentType !== undefined) headers["content-type"] = r.contentType;
  return { method: "POST", headers, body: r.body };
}

/** Checks one answer: a refusal status and an `{error: string}` JSON body. */
async function expectRefusal(res: Response, r: HostileRequest): Promise<void> {
  const text = await res.text();
  if (!REFUSALS.includes(res.status)) throw new Error(`status ${res.status} (${text.slice(0, 200)}) for ${describeRequest(r)}`);
  const body: unknown = JSON.parse(text);
  if (typeof body !== "object" || body === null || typeof (body as { error?: unknown }).error !== "string") {
    throw new Error(`body ${text.slice(0, 200)} is not {error} for ${describeRequest(r)}`);
  }
}

// Counting writes --------------------------------------------------------------------------------

const KV_WRITES = ["set", "del", "deleteIfEquals", "expire", "lpush", "rpop", "lmove", "lrem"] as const;

/**
 * The one write a refused request may cause: the chat's read-through cache keeping a session,
 * character or book that exists (what the next real message would cache anyway). A key for anything
 * that does not exist, or any other write, would be a leak.
 */
function cacheFill(seeded: Seeded): (key: string) => boolean {
  const keys = new Set([`chat:sess:${seeded.sessionId}`, `chat:char:${seeded.characterId}`, `chat:book:${seeded.bookId}`]);
  return (key) => keys.has(key);
}

/** Counts the writes a store receives, cache fills of existing rows aside. */
function countingKeyValueStore(kv: KeyValueStore, isCacheFill: (key: string) => boolean): { kv: KeyValueStore; writes: () => string[] } {
  const writes: string[] = [];
  const counted = new Proxy(kv, {
    get(target, property) {
      const member = target[property as keyof KeyValueStore];
      if (typeof member !== "function") return member;
      if ((KV_WRITES as readonly string[]).includes(property as string)) {
        return (...args: unknown[]) => {
          const key = String(args[0]);
          if (!(property === "set" && isCacheFill(key))) writes.push(`${String(property)} ${key}`);
          return (member as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return member.bind(target);
    },
  });
  return { kv: counted, writes: () => writes };
}

const isWrite = (statement: string) => !/^\s*SELECT\b/i.test(statement);

const TABLES = ["books", "characters", "chat_sessions", "messages", "user_preferences"];

async function rowCounts(db: Database): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of TABLES) {
    const [row] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
    counts[table] = row!.n;
  }
  return counts;
}

// In process -------------------------------------------------------------------------------------

describe("hostile bodies in process", () => {
  let base: Database;
  let db: RecordingDatabase;
  let seeded: Seeded;
  let counted: ReturnType<typeof countingKeyValueStore>;
  let app: Awaited<ReturnType<typeof buildTestApp>>;
  let downloads = 0;

  beforeAll(async () => {
    base = await createPgliteDatabase();
    await migrate(base);
    seeded = await seed(base);
    db = recordingDatabase(base);
    counted = countingKeyValueStore(createMemoryKeyValueStore(), cacheFill(seeded));
    app = await buildTestApp({
      db,
      kv: counted.kv,
      // As a deployment (HOST=0.0.0.0) answers whatever name its network calls it by.
      requestGuard: { allowedHosts: "*" },
      // The real download with its checks, on a network that answers nothing: no DNS, no connection.
      probeBook: (url) => {
        downloads++;
        return downloadBook(url, {
          allowedHosts: [],
          maxBytes: 1024,
          resolveHost: () => Promise.reject(new Error("no DNS in this test")),
          fetch: () => Promise.reject(new Error("no network in this test")),
        });
      },
    });
  }, 60_000);
  afterAll(async () => {
    await base?.close();
  });

  for (const endpoint of ENDPOINTS) {
    test(`${IN_PROCESS_RUNS} generated bodies to ${endpoint} are all refused with 400/404/422 and an error body, and nothing is written`, async () => {
      const before = await rowCounts(base);
      const statementsBefore = db.statements.length;
      const statuses = new Map<number, number>();
      await fc.assert(
        fc.asyncProperty(hostileRequest(endpoint, seeded, 100_000), async (r) => {
          const res = await app.request(endpoint, requestInit(r));
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          await expectRefusal(res, r);
          // A chat's session lock is asked for as the request arrives (api/chat/turn.ts); a refused
          // request lets it go at once: that release is the one write allowed, and no lock is left.
          await app.settle();
          const writes = counted.writes();
          expect(writes.filter((w) => !w.startsWith("deleteIfEquals chat:lock:"))).toEqual([]);
          for (const w of writes) expect(await app.deps.kv.get(w.slice("deleteIfEquals ".length))).toBeNull();
        }),
        { numRuns: IN_PROCESS_RUNS },
      );
      console.info(`security-input: ${endpoint} in process: ${IN_PROCESS_RUNS} bodies, statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
      expect(db.statements.slice(statementsBefore).filter(isWrite)).toEqual([]);
      expect(await rowCounts(base)).toEqual(before);
      expect(await app.deps.kv.llen(PROCESSING_QUEUE)).toBe(0);
      // Some bodies must have got as far as the database, or the property proves little.
      expect(db.statements.length).toBeGreaterThan(statementsBefore);
    });
  }

  test("a file_url that passes every syntax check on a seeded book reaches the download checks and is refused with 422", () => {
    // The generators above name the seeded book; this guards that some of them got that far.
    expect(downloads).toBeGreaterThan(0);
  });

  test.each([
    ["an array nested 100,000 deep", nested(100_000, "array")],
    ["an object nested 100,000 deep", nested(100_000, "object")],
    ["a field whose value is nested 100,000 deep", `{"book_id":${nested(100_000, "array")}}`],
  ])("%s is refused with 400, not a crash of the validator", async (_, body) => {
    for (const endpoint of ENDPOINTS) {
      const res = await app.request(endpoint, { method: "POST", headers: { "content-type": "application/json" }, body });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: "body is nested deeper than 64 levels" });
    }
  });

  test.each(["api", "x", "api:80", "db.svc"])("a request to the host name %s reaches its route (short in-cluster service names)", async (host) => {
    const health = await app.fetch(new Request(`http://${host}/health`));
    expect(health.status).toBe(200);
    const chat = await app.fetch(new Request(`http://${host}/character/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }));
    expect(chat.status).toBe(400);
    expect(await chat.json()).toEqual({ error: "user_id must be a UUID" });
  });

  test("a file_url whose path holds a stray % is refused with 422, not a crash of the extension check", async () => {
    const res = await app.postJson("/character/processing", { book_id: seeded.bookId, file_url: "http://example.com/100%.txt", user_id: seeded.userId });
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({ error: "file_url has a malformed percent-encoding" });
  });

  test("a user_message holding a NUL character is refused with 400 before any model is asked", async () => {
    const res = await app.postJson("/character/chat", {
      user_id: seeded.userId,
      character_id: seeded.characterId,
      book_id: seeded.bookId,
      session_id: seeded.sessionId,
      user_message: "hello\u0000there",
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "user_message must not contain NUL characters" });
  });
});

// The server process ------------------------------------------------------------------------------

const postgres = await probePostgres();
const redisMissing = unavailableRedisServer();
const liveStores = postgres.reachable && !redisMissing;
if (!liveStores) {
  console.warn(
    `security-input: the server process runs on its embedded stores and is checked through /metrics only: ${postgres.reachable ? redisMissing : postgres.reason}`,
  );
}

describe("hostile bodies against the server process", () => {
  let api: ServiceProcess;
  let testDb: TestDatabase | undefined;
  let redis: PrivateRedis | undefined;
  let db: Database | undefined;
  let seeded: Seeded;

  beforeAll(async () => {
    const env: Record<string, string> = { LOG_LEVEL: "error", LLM_GATEWAY_URL: "http://127.0.0.1:9/v1" };
    if (liveStores && postgres.reachable) {
      testDb = await createTestDatabase(postgres.url);
      db = await createDatabase({ driver: "postgres", url: testDb.url });
      await migrate(db);
      seeded = await seed(db);
      redis = await startPrivateRedis({ persistent: false });
      env.DATABASE_URL = testDb.url;
      env.REDIS_URL = redis.url;
    } else {
      // Ids nobody has: every body stops at validation or at the lookup, before any download.
      seeded = { bookId: crypto.randomUUID(), characterId: crypto.randomUUID(), sessionId: crypto.randomUUID(), userId: crypto.randomUUID() };
    }
    api = await startService("api/server.ts", env);
  }, 120_000);
  afterAll(async () => {
    await api?.stop();
    await db?.close();
    await testDb?.drop();
    await redis?.stop();
  });

  const health = async () => (await fetch(`${api.url}/health`)).status;
  const series = async (name: string) => metricValue(await (await fetch(`${api.url}/metrics`)).text(), name) ?? 0;

  for (const endpoint of ENDPOINTS) {
    test(`${SERVER_RUNS} generated bodies to ${endpoint} are refused, the process stays up, and nothing is written`, async () => {
      const before = db ? await rowCounts(db) : undefined;
      const keysBefore = redis ? keysBesidesCacheFills(redis, seeded) : undefined;
      // The server process has the real DNS: no body may name the seeded book, whose file_url would be fetched.
      const safe = { ...seeded, bookId: crypto.randomUUID() };
      await fc.assert(
        fc.asyncProperty(hostileRequest(endpoint, safe, 100_000), async (r) => {
          await expectRefusal(await fetch(`${api.url}${endpoint}`, requestInit(r)), r);
        }),
        { numRuns: SERVER_RUNS },
      );
      expect(await health()).toBe(200);
      expect(api.proc.exitCode).toBeNull();
      expect(await series("processing_jobs_queued_total")).toBe(0);
      expect(await series('chat_requests_total{outcome="ok"}')).toBe(0);
      if (db) expect(await rowCounts(db)).toEqual(before!);
      if (redis) expect(keysBesidesCacheFills(redis, seeded)).toEqual(keysBefore!);
      expect(await series('http_requests_total{method="POST",endpoint="' + endpoint + '",status_code="500"}')).toBe(0);
    });
  }

  test("bodies past the documented 1 MiB limit are refused with 413 whatever their shape, declared length or chunking", async () => {
    const shapes = fc.record({
      endpoint: fc.constantFrom(...ENDPOINTS),
      bytes: fc.integer({ min: MAX_REQUEST_BODY_BYTES + 1, max: 4 * MAX_REQUEST_BODY_BYTES }),
      fill: fc.constantFrom("json-field", "json-array", "garbage", "utf8"),
      chunked: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(shapes, async ({ endpoint, bytes, fill, chunked }) => {
        const body = oversized(bytes, fill);
        const init: RequestInit = chunked
          ? ({ method: "POST", headers: { "content-type": "application/json" }, body: streamOf(body), duplex: "half" } as RequestInit)
          : { method: "POST", headers: { "content-type": "application/json" }, body };
        const res = await fetch(`${api.url}${endpoint}`, init);
        expect({ status: res.status, body: await res.json() }).toEqual({ status: 413, body: { error: `request body is larger than ${MAX_REQUEST_BODY_BYTES} bytes` } });
      }),
      { numRuns: 40 },
    );
    const atLimit = await fetch(`${api.url}/character/processing`, { method: "POST", headers: { "content-type": "application/json" }, body: oversized(MAX_REQUEST_BODY_BYTES, "json-field") });
    expect(atLimit.status).toBe(400);
    expect(await health()).toBe(200);
  });

  test("a declared length past the limit is refused with 413 before the body is sent, and a lying length does not confuse the server", async () => {
    const huge = await rawExchange(api.url, `POST /character/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n{`);
    expect(huge).toMatch(/^HTTP\/1\.1 413 /);
    expect(huge).toContain(`{"error":"request body is larger than ${MAX_REQUEST_BODY_BYTES} bytes"}`);
    const short = await rawExchange(
      api.url,
      `POST /character/processing HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 5\r\nConnection: close\r\n\r\n{"book_id":"x","file_url":1}`,
    );
    expect(short).toMatch(/^HTTP\/1\.1 400 /);
    expect(await health()).toBe(200);
  });
});

/** Every key of the private server (a handful: nothing else uses it) except chat cache fills. */
function keysBesidesCacheFills(redis: PrivateRedis, seeded: Seeded): string[] {
  const isCacheFill = cacheFill(seeded);
  return redis
    .cli("--scan")
    .split("\n")
    .filter((key) => key !== "" && !isCacheFill(key))
    .sort();
}

function oversized(bytes: number, fill: string): Bytes {
  switch (fill) {
    case "json-field":
      return encoder.encode(JSON.stringify({ book_id: "x".repeat(Math.max(0, bytes - 14)) })).subarray(0, bytes);
    case "json-array":
      return encoder.encode("[" + "1,".repeat(Math.ceil(bytes / 2))).subarray(0, bytes);
    case "utf8":
      return encoder.encode("ü".repeat(Math.ceil(bytes / 2))).subarray(0, bytes);
    default:
      return Uint8Array.from({ length: bytes }, (_, i) => (i * 131) & 0xff);
  }
}

function streamOf(bytes: Bytes): ReadableStream<Bytes> {
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.subarray(offset, offset + 64 * 1024));
      offset += 64 * 1024;
    },
  });
}
