import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createRequestGuard, HOST_VERDICTS_KEPT, hostNameOf, isFixedHostName, isJsonMediaType, NO_HOST_ERROR, type RequestGuardOptions } from "../../api/request-guard.ts";
import { createLogger } from "../../common/log.ts";
import { buildTestApp } from "../support/app.ts";
import { startService, type ServiceProcess } from "../support/process.ts";
import { rawExchange } from "../support/raw-http.ts";

// A real API process (api/server.ts) on an embedded database.
setDefaultTimeout(120_000);

const JSON_TYPE = "application/json";

function request(method: string, host: string, headers: Record<string, string> = {}, body?: string): Request {
  return new Request(`http://127.0.0.1:3000/character/chat`, { method, headers: { host, ...headers }, ...(body === undefined ? {} : { body }) });
}

/** The guard's answer: `pass`, or the status and error of its refusal. */
async function verdict(options: RequestGuardOptions, req: Request): Promise<string> {
  const refused = createRequestGuard(options)(req);
  if (!refused) return "pass";
  const { error } = (await refused.json()) as { error: string };
  return `${refused.status} ${error}`;
}

describe("the request guard's rules", () => {
  test.each([
    ["application/json", true],
    ["application/json; charset=utf-8", true],
    ["Application/JSON ; charset=UTF-8", true],
    ["application/problem+json", true],
    ["application/vnd.api+json; charset=utf-8", true],
    ["text/plain", false],
    ["text/plain; charset=utf-8", false],
    ["application/x-www-form-urlencoded", false],
    ["multipart/form-data; boundary=xyz", false],
    ["application/jsonx", false],
    ["text/json", false],
    ["", false],
    [null, false],
  ])("content type %p is JSON: %p", (contentType, expected) => {
    expect(isJsonMediaType(contentType)).toBe(expected);
  });

  test.each([
    ["localhost:3000", "localhost", true],
    ["app.localhost", "app.localhost", true],
    ["127.0.0.1:3000", "127.0.0.1", true],
    ["127.8.9.10", "127.8.9.10", true],
    ["[::1]:3000", "[::1]", true],
    ["10.0.0.5:3000", "10.0.0.5", true],
    ["API:3000", "api", false],
    ["evil.example", "evil.example", false],
    ["127.0.0.1.nip.io", "127.0.0.1.nip.io", false],
    ["localhost.evil.example", "localhost.evil.example", false],
  ])("Host %p is the name %p, fixed (not re-pointable by DNS): %p", (host, name, fixed) => {
    expect(hostNameOf(host)).toBe(name);
    expect(isFixedHostName(name)).toBe(fixed);
  });

  test.each(["a@evil.example", "evil.example/path", "", "exa mple", "[::1"])("Host %p is not a host name", (host) => {
    expect(hostNameOf(host)).toBeUndefined();
  });

  const local: RequestGuardOptions = {};
  const cluster: RequestGuardOptions = { allowedHosts: ["api"] };
  const frontend: RequestGuardOptions = { allowedHosts: ["api.example.com"], allowedOrigins: ["https://app.example.com"] };
  const anyHost: RequestGuardOptions = { allowedHosts: "*" };
  const anyOrigin: RequestGuardOptions = { allowedOrigins: "*" };
  const HOST_REFUSED = "403 host evil.example is not allowed: add it to ALLOWED_HOSTS";
  const ORIGIN_REFUSED = "403 requests from the origin http://evil.example are not allowed: add it to ALLOWED_ORIGINS";
  const NOT_JSON = "415 the request body must be application/json";
  test.each([
    ["a loopback GET", local, request("GET", "127.0.0.1:3000"), "pass"],
    ["a localhost GET", local, request("GET", "localhost:3000"), "pass"],
    ["a GET under a re-pointed name (DNS rebinding)", local, request("GET", "evil.example"), HOST_REFUSED],
    ["a GET under a re-pointed name, port and case aside", local, request("GET", "EVIL.example:3000"), HOST_REFUSED],
    ["a GET under a Host that is no host name", local, request("GET", "a@b"), "403 the Host header is not a host name"],
    ["a JSON POST from curl", local, request("POST", "127.0.0.1:3000", { "content-type": JSON_TYPE }), "pass"],
    ["a JSON POST from the API's own page", local, request("POST", "127.0.0.1:3000", { "content-type": JSON_TYPE, origin: "http://127.0.0.1:3000" }), "pass"],
    ["a JSON POST from another site's page", local, request("POST", "127.0.0.1:3000", { "content-type": JSON_TYPE, origin: "http://evil.example" }), ORIGIN_REFUSED],
    ["a text/plain POST from another site's page", local, request("POST", "127.0.0.1:3000", { "content-type": "text/plain", origin: "http://evil.example" }), ORIGIN_REFUSED],
    ["a POST from another port of this machine", local, request("POST", "127.0.0.1:3000", { "content-type": JSON_TYPE, origin: "http://127.0.0.1:5173" }), "403 requests from the origin http://127.0.0.1:5173 are not allowed: add it to ALLOWED_ORIGINS"],
    ["a POST from a sandboxed page (Origin: null)", local, request("POST", "127.0.0.1:3000", { "content-type": JSON_TYPE, origin: "null" }), "403 requests from the origin null are not allowed: add it to ALLOWED_ORIGINS"],
    ["a POST a browser marks cross-site, without Origin", local, request("POST", "127.0.0.1:3000", { "content-type": JSON_TYPE, "sec-fetch-site": "cross-site" }), "403 requests from another site are not allowed"],
    ["a POST a browser marks same-origin, without Origin", local, request("POST", "127.0.0.1:3000", { "content-type": JSON_TYPE, "sec-fetch-site": "same-origin" }), "pass"],
    ["a text/plain POST from curl", local, request("POST", "127.0.0.1:3000", { "content-type": "text/plain" }), NOT_JSON],
    ["a form POST", local, request("POST", "127.0.0.1:3000", { "content-type": "application/x-www-form-urlencoded" }), NOT_JSON],
    ["a multipart POST", local, request("POST", "127.0.0.1:3000", { "content-type": "multipart/form-data; boundary=x" }), NOT_JSON],
    ["a POST with a body but no content type", local, request("POST", "127.0.0.1:3000", {}, "{}"), NOT_JSON],
    ["a POST with neither body nor content type (left to its route: 400 or 405)", local, request("POST", "127.0.0.1:3000"), "pass"],
    ["a cluster call by the service name", cluster, request("POST", "api:3000", { "content-type": JSON_TYPE }), "pass"],
    ["a probe by the pod's IP", cluster, request("GET", "10.42.0.7:3000"), "pass"],
    ["a call under another name in the cluster", cluster, request("GET", "evil.example"), HOST_REFUSED],
    ["any name where any host is allowed", anyHost, request("GET", "evil.example"), "pass"],
    ["the frontend's page through a proxy", frontend, request("POST", "api.example.com", { "content-type": JSON_TYPE, origin: "https://app.example.com" }), "pass"],
    ["another page through that proxy", frontend, request("POST", "api.example.com", { "content-type": JSON_TYPE, origin: "http://evil.example" }), ORIGIN_REFUSED],
    ["any page where any origin is allowed, JSON still required", anyOrigin, request("POST", "localhost:3000", { "content-type": "text/plain", origin: "http://evil.example" }), NOT_JSON],
  ])("%s: %s", async (_, options, req, expected) => {
    expect(await verdict(options, req)).toBe(expected);
  });
});

test("a client inventing Host names gets each refused and changes no other verdict, however many it sends", () => {
  const guard = createRequestGuard({ allowedHosts: ["api"] });
  const get = (host: string) => guard(new Request("http://api/health", { headers: { host } }))?.status ?? 200;
  expect([get("api"), get("evil.example")]).toEqual([200, 403]);
  const invented = Array.from({ length: HOST_VERDICTS_KEPT * 3 }, (_, i) => get(`n${i}.evil.example`));
  expect(new Set(invented)).toEqual(new Set([403]));
  expect([get("api"), get("evil.example"), get("127.0.0.1:3000"), get("API:3000")]).toEqual([200, 403, 200, 200]);
});

describe("a loopback API under another site's requests", () => {
  let api: ServiceProcess;
  let port: string;
  beforeAll(async () => {
    api = await startService("api/server.ts", { PLAYGROUND: "on", LOG_FORMAT: "json" });
    port = new URL(api.url).port;
  });
  afterAll(async () => {
    await api?.stop();
  });

  const exchange = (lines: string[], body = "") =>
    rawExchange(api.url, [...lines, `Content-Length: ${Buffer.byteLength(body)}`, "Connection: close", "", body].join("\r\n"));
  const statusOf = (answer: string) => Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1]);
  const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as unknown;

  test.each(["/playground/books", `/playground/passages?book_id=${crypto.randomUUID()}&chunks=0`, "/metrics", "/health", "/docs/json"])(
    "GET %s under Host evil.example (DNS rebinding) is refused with 403",
    async (path) => {
      const answer = await exchange([`GET ${path} HTTP/1.1`, `Host: evil.example:${port}`]);
      expect(statusOf(answer)).toBe(403);
      expect(bodyOf(answer)).toEqual({ error: "host evil.example is not allowed: add it to ALLOWED_HOSTS" });
      expect(statusOf(await exchange([`GET ${path} HTTP/1.1`, `Host: localhost:${port}`]))).toBe(200);
    },
  );

  const SESSION = JSON.stringify({ book_id: crypto.randomUUID(), character_id: crypto.randomUUID() });
  test.each([
    ["a JSON chat turn", "/character/chat", JSON_TYPE],
    ["a text/plain chat turn", "/character/chat", "text/plain"],
    ["a form re-submission of a book", "/character/processing", "application/x-www-form-urlencoded"],
    ["a multipart re-submission of a book", "/character/processing", "multipart/form-data; boundary=x"],
    ["a chat page session", "/playground/session", JSON_TYPE],
  ])("%s from a page on evil.example is refused with 403 before it reaches the route", async (_, path, contentType) => {
    const answer = await exchange([`POST ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Content-Type: ${contentType}`, "Origin: http://evil.example"], SESSION);
    expect(statusOf(answer)).toBe(403);
    expect(bodyOf(answer)).toEqual({ error: "requests from the origin http://evil.example are not allowed: add it to ALLOWED_ORIGINS" });
  });

  test("a body that is not JSON is refused with 415 even without an Origin; the same body as JSON reaches the route", async () => {
    for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const answer = await exchange([`POST /playground/session HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Content-Type: ${contentType}`], SESSION);
      expect([statusOf(answer), bodyOf(answer)]).toEqual([415, { error: "the request body must be application/json" }]);
    }
    const json = await exchange([`POST /playground/session HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Content-Type: ${JSON_TYPE}; charset=utf-8`, `Origin: http://127.0.0.1:${port}`], SESSION);
    expect(statusOf(json)).toBe(404);
  });

  test.each(["/health", "/metrics", "/docs/json", "/playground/books", "/nowhere"])(
    "an HTTP/1.0 GET %s with no Host is refused with 400 {error}, never an error page or a stack; with a Host it is served",
    async (path) => {
      const answer = await rawExchange(api.url, `GET ${path} HTTP/1.0\r\n\r\n`);
      expect(statusOf(answer)).toBe(400);
      expect(answer.slice(0, answer.indexOf("\r\n\r\n")).toLowerCase()).toContain("content-type: application/json");
      expect(bodyOf(answer)).toEqual({ error: NO_HOST_ERROR });
      const withHost = await rawExchange(api.url, `GET ${path} HTTP/1.0\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      expect(statusOf(withHost)).toBe(path === "/nowhere" ? 404 : 200);
    },
  );

  test("with LOG_FORMAT=json the server writes nothing but one JSON object per line, the hostless requests included", async () => {
    await rawExchange(api.url, "GET /health HTTP/1.0\r\n\r\n");
    const { stdout, stderr } = api.output();
    expect(stderr).toBe("");
    const lines = stdout.split("\n").filter((line) => line !== "");
    expect(lines.filter((line) => !/^\{.*\}$/.test(line) || typeof JSON.parse(line) !== "object")).toEqual([]);
  });
});

test("a failure outside the framework's routes (here, the docs' examples) is a 500 {error}, logged as one line without a stack", async () => {
  const lines: string[] = [];
  const { request } = await buildTestApp({
    logger: createLogger({ format: "json", write: (line) => lines.push(line) }),
    requestExamples: () => {
      throw new Error("failed at /srv/app/api/docs.ts:12");
    },
  });
  const response = await request("/docs/json");
  expect(response.status).toBe(500);
  expect(await response.json()).toEqual({ error: "internal error" });
  expect(lines).toHaveLength(1);
  expect(JSON.parse(lines[0]!)).toMatchObject({ level: "error", msg: "unhandled error", error: { message: "failed at /srv/app/api/docs.ts:12" } });
  expect(lines[0]).not.toContain("    at ");
});
