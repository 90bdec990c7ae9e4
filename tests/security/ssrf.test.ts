import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createDatabase } from "../../common/db/create.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import { getBook } from "../../common/db/books.ts";
import { getIngestion } from "../../common/db/ingestions.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { downloadBook, type DownloadOptions } from "../../common/file-url.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { PROCESSING_QUEUE } from "../../common/queue.ts";
import { BookRejectedError } from "../../ingest/errors.ts";
import { runPipeline } from "../../ingest/pipeline.ts";
import { buildTestApp } from "../support/app.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";
import { startService, type ServiceProcess } from "../support/process.ts";
import { closedPort } from "../support/redis.ts";
import { createIngestEnv, startBookServer, startScriptedGateway, TEST_PIPELINE_OPTIONS } from "../fixtures/ingest/harness.ts";

/**
 * Server-side request forgery through `POST /character/processing`, end to end: the route, the real
 * download with its address policy, and a simulated network. Names resolve through an injected
 * resolver (never real DNS) and the only server anyone may reach is a loopback "origin" that stands
 * in for the public internet and records every request. Every forbidden target must be refused with
 * 422 before a single byte is sent to it; allow-listing is the only way in.
 */

setDefaultTimeout(60_000);

const FORBIDDEN = { status: 422, body: { error: "file_url host is not a public address" } };
const BAD_SCHEME = { status: 422, body: { error: "file_url must use http or https" } };
const REDIRECT_SCHEME = { status: 422, body: { error: "file_url redirects to a scheme other than http or https" } };

/** Stands in for a public web server: serves a book and redirects wherever `?to=` says. */
function startOrigin() {
  const hits: string[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(request) {
      const url = new URL(request.url);
      hits.push(`${request.headers.get("host")}${url.pathname}${url.search}`);
      if (url.pathname.startsWith("/redirect")) return new Response(null, { status: 302, headers: { location: url.searchParams.get("to")! } });
      return new Response("It was a dark and stormy night.\n", { headers: { "content-type": "text/plain" } });
    },
  });
  return { port: server.port!, hits, stop: () => void server.stop(true) };
}

type Origin = ReturnType<typeof startOrigin>;

/** A name → addresses table; anything else fails like NXDOMAIN. */
const DNS: Record<string, string[]> = {
  // Public-looking names the simulated internet serves (through the loopback origin).
  "books.example.com": ["93.184.215.14"],
  "cdn.example.net": ["2606:2800:220:1:248:1893:25c8:1946"],
  // Public-looking names that point inside.
  "localtest.example": ["127.0.0.1"],
  "intranet.example.com": ["10.20.30.40"],
  "metadata.example.org": ["169.254.169.254"],
  "mixed.example.com": ["93.184.215.14", "192.168.0.10"],
  "v6-loop.example.com": ["::1"],
  "mapped.example.com": ["::ffff:127.0.0.1"],
  "ula.example.com": ["fd00:ec2::254"],
  localhost: ["127.0.0.1", "::1"],
};
const PUBLIC_NAMES = new Set(["books.example.com", "cdn.example.net"]);

/**
 * The network the download sees: public names reach the loopback origin, allow-listed loopback
 * addresses are reached as themselves, and anything else throws (a test bug would surface as a
 * connection error, never as a request leaving the machine).
 */
function simulatedNetwork(origin: Origin) {
  const fetched: string[] = [];
  const fetch: NonNullable<DownloadOptions["fetch"]> = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    fetched.push(url.href);
    if (PUBLIC_NAMES.has(url.hostname)) {
      const local = new URL(url.pathname + url.search, `http://127.0.0.1:${origin.port}`);
      return globalThis.fetch(local, { ...init, headers: { ...(init?.headers as Record<string, string>), host: url.host } });
    }
    if (url.hostname === "127.0.0.1" || url.hostname === "localhost") return globalThis.fetch(url, init);
    throw new Error(`the simulated network has no route to ${url.host}`);
  };
  const resolveHost = async (host: string) => {
    const addresses = DNS[host.toLowerCase().replace(/\.$/, "")];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    return addresses;
  };
  return { fetch, resolveHost, fetched };
}

describe("file_url through POST /character/processing", () => {
  let db: Database;
  let origin: Origin;
  let bookId: string;
  let otherPort: number;

  beforeAll(async () => {
    db = await createPgliteDatabase();
    await migrate(db);
    bookId = (await insertBook(db, { title: "The Lantern Keeper" })).id;
    origin = startOrigin();
    otherPort = closedPort();
  }, 60_000);
  afterAll(async () => {
    origin?.stop();
    await db?.close();
  });

  async function submit(fileUrl: string, allowedHosts: string[] = []) {
    const network = simulatedNetwork(origin);
    const kv = createMemoryKeyValueStore();
    const app = await buildTestApp({
      db,
      kv,
      probeBook: (url) => downloadBook(url, { allowedHosts, maxBytes: 1024 * 1024, fetch: network.fetch, resolveHost: network.resolveHost }),
    });
    const hitsBefore = origin.hits.length;
    const res = await app.postJson("/character/processing", { book_id: bookId, file_url: fileUrl, user_id: crypto.randomUUID() });
    return {
      status: res.status,
      body: (await res.json()) as unknown,
      fetched: network.fetched,
      originHits: origin.hits.slice(hitsBefore),
      queued: await kv.llen(PROCESSING_QUEUE),
    };
  }

  const port = () => origin.port;

  describe("forbidden targets are refused with 422 before any request is made", () => {
    const targets: [string, () => string][] = [
      ["loopback 127.0.0.1", () => `http://127.0.0.1:${port()}/book.txt`],
      ["loopback elsewhere in 127/8", () => `http://127.45.6.7:${port()}/book.txt`],
      ["localhost", () => `http://localhost:${port()}/book.txt`],
      ["localhost with a trailing dot", () => `http://localhost.:${port()}/book.txt`],
      ["LOCALHOST in capitals", () => `http://LOCALHOST:${port()}/book.txt`],
      ["IPv6 loopback [::1]", () => `http://[::1]:${port()}/book.txt`],
      ["IPv6 loopback written out", () => `http://[0:0:0:0:0:0:0:1]:${port()}/book.txt`],
      ["0.0.0.0", () => `http://0.0.0.0:${port()}/book.txt`],
      ["0 (this host)", () => `http://0:${port()}/book.txt`],
      ["IPv6 unspecified [::]", () => `http://[::]:${port()}/book.txt`],
      ["private 10/8", () => "http://10.0.0.1/book.txt"],
      ["private 172.16/12", () => "http://172.31.255.1/book.txt"],
      ["private 192.168/16", () => "http://192.168.1.1/book.txt"],
      ["carrier-grade NAT 100.64/10", () => "http://100.64.0.1/book.txt"],
      ["link-local cloud metadata 169.254.169.254", () => "http://169.254.169.254/latest/meta-data/iam.txt"],
      ["link-local IPv6 fe80::/10", () => "http://[fe80::1]/book.txt"],
      ["unique-local IPv6 metadata fd00:ec2::254", () => "http://[fd00:ec2::254]/latest/meta-data.txt"],
      ["multicast", () => "http://224.0.0.1/book.txt"],
      ["broadcast", () => "http://255.255.255.255/book.txt"],
      ["IPv4-mapped IPv6 loopback", () => `http://[::ffff:127.0.0.1]:${port()}/book.txt`],
      ["IPv4-mapped IPv6 loopback in hex", () => `http://[::ffff:7f00:1]:${port()}/book.txt`],
      ["IPv4-mapped IPv6 metadata", () => "http://[::ffff:169.254.169.254]/latest.txt"],
      ["IPv4-mapped IPv6 private, written out", () => "http://[0:0:0:0:0:ffff:a00:1]/book.txt"],
      ["IPv4-compatible IPv6 loopback", () => `http://[::127.0.0.1]:${port()}/book.txt`],
      ["NAT64 of loopback", () => "http://[64:ff9b::7f00:1]/book.txt"],
      ["6to4 of loopback", () => "http://[2002:7f00:1::]/book.txt"],
      ["decimal loopback 2130706433", () => `http://2130706433:${port()}/book.txt`],
      ["hex loopback 0x7f000001", () => `http://0x7f000001:${port()}/book.txt`],
      ["octal loopback 017700000001", () => `http://017700000001:${port()}/book.txt`],
      ["dotted octal loopback 0177.0.0.1", () => `http://0177.0.0.1:${port()}/book.txt`],
      ["dotted hex loopback 0x7f.0x0.0x0.0x1", () => `http://0x7f.0x0.0x0.0x1:${port()}/book.txt`],
      ["short loopback 127.1", () => `http://127.1:${port()}/book.txt`],
      ["decimal metadata 2852039166", () => "http://2852039166/latest.txt"],
      ["dotted octal metadata", () => "http://0251.0376.0251.0376/latest.txt"],
      ["hex metadata 0xa9fea9fe", () => "http://0xa9fea9fe/latest.txt"],
      ["a public-looking name that resolves to loopback", () => `http://localtest.example:${port()}/book.txt`],
      ["a public-looking name that resolves to a private address", () => "http://intranet.example.com/book.txt"],
      ["a public-looking name that resolves to the metadata address", () => "http://metadata.example.org/latest.txt"],
      ["a name with one public and one private address", () => "http://mixed.example.com/book.txt"],
      ["a name that resolves to ::1", () => "http://v6-loop.example.com/book.txt"],
      ["a name that resolves to an IPv4-mapped loopback", () => "http://mapped.example.com/book.txt"],
      ["a name that resolves to a unique-local IPv6 address", () => "http://ula.example.com/book.txt"],
      ["loopback on a port other than the allow-listed one", () => `http://127.0.0.1:${port()}/book.txt`],
    ];

    test.each(targets)("%s", async (_, url) => {
      // Loopback is allow-listed on another port throughout, so the port is part of every decision.
      const result = await submit(url(), [`127.0.0.1:${otherPort}`]);
      expect({ status: result.status, body: result.body }).toEqual(FORBIDDEN);
      expect(result.fetched).toEqual([]);
      expect(result.originHits).toEqual([]);
      expect(result.queued).toBe(0);
    });
  });

  describe("redirects are checked on every hop", () => {
    const hops: [string, () => string, (typeof FORBIDDEN)][] = [
      ["to the metadata address", () => "http://169.254.169.254/latest/meta-data/iam.txt", FORBIDDEN],
      ["to loopback on a port that is not allow-listed", () => `http://127.0.0.1:${otherPort}/book.txt`, FORBIDDEN],
      ["to a decimal spelling of loopback", () => `http://2130706433:${port()}/book.txt`, FORBIDDEN],
      ["to an IPv4-mapped IPv6 loopback", () => `http://[::ffff:127.0.0.1]:${port()}/book.txt`, FORBIDDEN],
      ["to a name that resolves to a private address", () => "http://intranet.example.com/book.txt", FORBIDDEN],
      ["to file:", () => "file:///etc/passwd", REDIRECT_SCHEME],
      ["to ftp:", () => "ftp://books.example.com/book.txt", REDIRECT_SCHEME],
      ["to data:", () => "data:text/plain,owned", REDIRECT_SCHEME],
    ];

    test.each(hops)("from a public host %s is refused after the first hop only", async (_, target, expected) => {
      const result = await submit(`http://books.example.com/redirect/book.txt?to=${encodeURIComponent(target())}`);
      expect({ status: result.status, body: result.body }).toEqual(expected);
      expect(result.fetched).toEqual([expect.stringContaining("books.example.com/redirect")]);
      expect(result.originHits).toHaveLength(1);
      expect(result.queued).toBe(0);
    });

    test("from an allow-listed host to the metadata address is refused too: the allow-list covers a host, not where it sends you", async () => {
      const result = await submit(`http://127.0.0.1:${port()}/redirect/book.txt?to=${encodeURIComponent("http://169.254.169.254/latest.txt")}`, [
        `127.0.0.1:${port()}`,
      ]);
      expect({ status: result.status, body: result.body }).toEqual(FORBIDDEN);
      expect(result.originHits).toHaveLength(1);
    });
  });

  test.each([
    ["file:", "file:///etc/passwd.txt"],
    ["file: with a host", "file://localhost/etc/passwd.txt"],
    ["ftp:", "ftp://books.example.com/book.txt"],
    ["data:", "data:text/plain;base64,SGVsbG8=#.txt"],
    ["gopher:", "gopher://127.0.0.1:6379/_FLUSHALL.txt"],
    ["javascript:", "javascript:alert(1)//.txt"],
  ])("a %s URL is refused with 422 without any request", async (_, url) => {
    const result = await submit(url);
    expect({ status: result.status, body: result.body }).toEqual(BAD_SCHEME);
    expect(result.fetched).toEqual([]);
  });

  describe("allow-listed hosts are the one way in", () => {
    test.each([
      ["127.0.0.1 with its port", () => `http://127.0.0.1:${port()}/book.txt`, () => [`127.0.0.1:${port()}`]],
      ["127.0.0.1 on any port", () => `http://127.0.0.1:${port()}/book.txt`, () => ["127.0.0.1"]],
      ["localhost by name", () => `http://localhost:${port()}/book.txt`, () => [`localhost:${port()}`]],
    ])("%s is fetched and queued", async (_, url, allowed) => {
      const result = await submit(url(), allowed());
      expect(result.status).toBe(202);
      expect(result.originHits).toHaveLength(1);
      expect(result.queued).toBe(1);
    });

    test("a public host is fetched and queued without any allow-list", async () => {
      const result = await submit("http://books.example.com/book.txt");
      expect(result.status).toBe(202);
      expect(result.originHits).toEqual(["books.example.com/book.txt"]);
    });

    test("a public host that redirects to another public host is followed", async () => {
      const result = await submit(`http://books.example.com/redirect/a.txt?to=${encodeURIComponent("http://cdn.example.net/book.txt")}`);
      expect(result.status).toBe(202);
      expect(result.originHits).toEqual([expect.stringContaining("/redirect/a.txt"), "cdn.example.net/book.txt"]);
    });
  });
});

describe("file_url when the worker downloads a job queued behind the API's back", () => {
  const books = startBookServer();
  const gateway = startScriptedGateway();
  afterAll(() => {
    books.stop();
    gateway.stop();
  });

  test.each([
    ["the metadata address", "http://169.254.169.254/latest/meta-data/book.txt"],
    ["a name that resolves to loopback", "http://localtest.example/book.txt"],
    ["a decimal spelling of loopback", "http://2130706433/book.txt"],
  ])("%s leaves the book failed without any request", async (_, url) => {
    const env = await createIngestEnv({ gateway, books });
    const origin = startOrigin();
    const network = simulatedNetwork(origin);
    try {
      const book = await insertBook(env.deps.db, { title: "Smuggled" });
      const run = runPipeline(env.deps, { bookId: book.id, source: { url } }, { ...TEST_PIPELINE_OPTIONS, fetch: network.fetch, resolveHost: network.resolveHost });
      await expect(run).rejects.toBeInstanceOf(BookRejectedError);
      const failed = await getBook(env.deps.db, book.id);
      expect(failed?.processingStatus).toBe("failed");
      expect((await getIngestion(env.deps.db, book.id))?.lastError).toBe("download failed: file_url host is not a public address");
      expect(network.fetched).toEqual([]);
      expect(origin.hits).toEqual([]);
    } finally {
      origin.stop();
      await env.close();
    }
  });
});

const postgres = await probePostgres();
if (!postgres.reachable) console.warn(`security-ssrf: the server-process matrix is skipped (its book must be in a database the test can write): ${postgres.reason}`);

describe.skipIf(!postgres.reachable)("file_url on the API server process, with the system resolver", () => {
  let testDb: TestDatabase;
  let db: Database;
  let api: ServiceProcess;
  let origin: Origin;
  let bookId: string;

  beforeAll(async () => {
    if (!postgres.reachable) return;
    origin = startOrigin();
    testDb = await createTestDatabase(postgres.url);
    db = await createDatabase({ driver: "postgres", url: testDb.url });
    await migrate(db);
    bookId = (await insertBook(db, { title: "The Lantern Keeper" })).id;
    api = await startService("api/server.ts", {
      DATABASE_URL: testDb.url,
      FILE_URL_ALLOWED_HOSTS: `127.0.0.1:${origin.port}`,
      LLM_GATEWAY_URL: "http://127.0.0.1:9/v1",
      LOG_LEVEL: "error",
    });
  }, 120_000);
  afterAll(async () => {
    await api?.stop();
    await db?.close();
    await testDb?.drop();
    origin?.stop();
  });

  const post = async (fileUrl: string) => {
    const res = await fetch(`${api.url}/character/processing`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ book_id: bookId, file_url: fileUrl, user_id: crypto.randomUUID() }),
    });
    return { status: res.status, body: (await res.json()) as unknown };
  };

  // Literal addresses and localhost only: the real resolver answers localhost from /etc/hosts.
  test.each([
    ["localhost", (p: number) => `http://localhost:${p}/book.txt`],
    ["[::1]", (p: number) => `http://[::1]:${p}/book.txt`],
    ["0.0.0.0", (p: number) => `http://0.0.0.0:${p}/book.txt`],
    ["2130706433", (p: number) => `http://2130706433:${p + 1}/book.txt`],
    ["[::ffff:127.0.0.1]", (p: number) => `http://[::ffff:127.0.0.1]:${p}/book.txt`],
    ["169.254.169.254", () => "http://169.254.169.254/latest/meta-data/iam.txt"],
    ["an allow-listed host redirecting to loopback on another port", (p: number) => `http://127.0.0.1:${p}/redirect/a.txt?to=${encodeURIComponent(`http://127.0.0.1:${p + 1}/b.txt`)}`],
  ])("%s is refused with 422", async (_, url) => {
    const hits = origin.hits.length;
    expect(await post(url(origin.port))).toEqual(FORBIDDEN);
    expect(origin.hits.length - hits).toBeLessThanOrEqual(1);
  });

  test("the allow-listed host itself is fetched and queued", async () => {
    expect((await post(`http://127.0.0.1:${origin.port}/book.txt`)).status).toBe(202);
  });
});
