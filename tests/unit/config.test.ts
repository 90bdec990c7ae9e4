import { describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { createRequestGuard } from "../../api/request-guard.ts";
import { ConfigError, loadConfig, loadEdgeConfig } from "../../common/config.ts";

describe("loadConfig", () => {
  test("with nothing set, every component falls back to its embedded default", () => {
    const c = loadConfig({});
    expect(c.port).toBe(3000);
    expect(c.dataDir).toBe(resolve(".data"));
    expect(c.database).toEqual({ driver: "pglite", dataDir: resolve(".data/pg") });
    expect(c.kv).toEqual({ driver: "memory" });
    expect(c.qdrant).toBeUndefined();
    expect(c.typesense).toBeUndefined();
    expect(c.rerank).toBeUndefined();
    expect(c.llm).toEqual({ chatModel: "gpt-4o-mini", embedModel: "text-embedding-3-small" });
    expect(c.systemPromptStoragePath).toBe(resolve(".data/prompts"));
    expect(c.maxBookBytes).toBe(104857600);
    expect(c.metricsPort).toBe(9464);
    expect(c.metricsAggregation).toBeUndefined();
    expect(c.maxAttempts).toBe(3);
    expect(c.logLevel).toBe("info");
    expect(c.logFormat).toBe("text");
    expect(loadConfig({ LOG_FORMAT: "json" }).logFormat).toBe("json");
    expect(c.fileUrlAllowedHosts).toEqual([]);
  });

  test("METRICS_AGGREGATION=kv turns the aggregation on, with the flush bounds only when set", () => {
    expect(loadConfig({ METRICS_AGGREGATION: "off" }).metricsAggregation).toBeUndefined();
    expect(loadConfig({ METRICS_AGGREGATION: "kv" }).metricsAggregation).toEqual({});
    expect(loadConfig({ METRICS_AGGREGATION: "kv", METRICS_FLUSH_REQUESTS: "50", METRICS_FLUSH_INTERVAL_MS: "5000" }).metricsAggregation).toEqual({
      flushRequests: 50,
      flushIntervalMs: 5000,
    });
  });

  test("the reranker is on when its key is set, rank fusion otherwise (SPEC: an empty key means no rerank)", () => {
    expect(loadConfig({ RERANK_URL: "http://rerank:8080" }).rerank).toBeUndefined();
    expect(loadConfig({ RERANK_URL: "http://rerank:8080", RERANK_API_KEY: " " }).rerank).toBeUndefined();
    expect(loadConfig({ RERANK_URL: "http://rerank:8080", RERANK_API_KEY: "k", RERANK_MODEL: "m" }).rerank).toEqual({ url: "http://rerank:8080", apiKey: "k", model: "m" });
    expect(loadConfig({ RERANK_URL: "http://rerank:8080", RERANK_API_KEY: "k" }).rerank).toEqual({ url: "http://rerank:8080", apiKey: "k", model: "rerank-v3.5" });
    expect(() => loadConfig({ RERANK_API_KEY: "k" })).toThrow("invalid RERANK_URL: expected an http(s) URL when RERANK_API_KEY is set");
  });

  test("HOST is loopback unless set; PLAYGROUND is on, off, or left to the entry point", () => {
    expect(loadConfig({}).host).toBe("127.0.0.1");
    expect(loadConfig({ HOST: "0.0.0.0" }).host).toBe("0.0.0.0");
    expect(loadConfig({ HOST: "::" }).host).toBe("::");
    expect(() => loadConfig({ HOST: "http://0.0.0.0" })).toThrow("invalid HOST: expected a host name or IP address to listen on");
    expect(loadConfig({}).playground).toBeUndefined();
    expect(loadConfig({ PLAYGROUND: "on" }).playground).toBe(true);
    expect(loadConfig({ PLAYGROUND: "off" }).playground).toBe(false);
    expect(() => loadConfig({ PLAYGROUND: "yes" })).toThrow("invalid PLAYGROUND: expected on or off");
  });

  test("CHARACTER_CHECKPOINTS is 2 (at most twice the whole book's model calls) unless set; 1 is the whole book only", () => {
    expect(loadConfig({}).characterCheckpoints).toBe(2);
    expect(loadConfig({ CHARACTER_CHECKPOINTS: "1" }).characterCheckpoints).toBe(1);
    expect(loadConfig({ CHARACTER_CHECKPOINTS: "10" }).characterCheckpoints).toBe(10);
  });

  test("CHARACTER_CONCURRENCY is 16 model calls in flight per book unless set", () => {
    expect(loadConfig({}).characterConcurrency).toBe(16);
    expect(loadConfig({ CHARACTER_CONCURRENCY: "4" }).characterConcurrency).toBe(4);
  });

  test("CHAT_CONTEXT_TOKENS is 16384 and CHAT_REPLY_TOKENS 1024 unless set; a reply's reserve that leaves the prompt too little is refused", () => {
    expect(loadConfig({})).toMatchObject({ chatContextTokens: 16_384, chatReplyTokens: 1_024 });
    expect(loadConfig({ CHAT_CONTEXT_TOKENS: "131072", CHAT_REPLY_TOKENS: "4096" })).toMatchObject({ chatContextTokens: 131_072, chatReplyTokens: 4_096 });
    expect(() => loadConfig({ CHAT_CONTEXT_TOKENS: "1000" })).toThrow("invalid CHAT_CONTEXT_TOKENS: expected tokens 4096-10000000");
    expect(() => loadConfig({ CHAT_CONTEXT_TOKENS: "4096", CHAT_REPLY_TOKENS: "2048" })).toThrow(
      "invalid CHAT_REPLY_TOKENS: expected at most 1536 tokens with CHAT_CONTEXT_TOKENS at 4096",
    );
  });

  describe.each([
    ["loadConfig", (env: Record<string, string>) => loadConfig(env)],
    ["loadEdgeConfig", (env: Record<string, string>) => loadEdgeConfig(env)],
  ])("SSE_KEEPALIVE_SECONDS through %s", (_, load) => {
    test.each([
      ["unset", undefined, 15],
      ["empty", " ", 15],
      ["the lowest", "1", 1],
      ["a usual value", "20", 20],
      ["the highest", "300", 300],
    ])("%s (%p) is %d seconds", (__, value, seconds) => {
      expect(load(value === undefined ? {} : { SSE_KEEPALIVE_SECONDS: value }).sseKeepAliveSeconds).toBe(seconds);
    });

    test.each(["0", "301", "-5", "2.5", "15s", "1e2", "abc"])("%p is refused with one line naming it and its bounds", (value) => {
      expect(() => load({ SSE_KEEPALIVE_SECONDS: value })).toThrow(new ConfigError("SSE_KEEPALIVE_SECONDS", "a whole number of seconds 1-300"));
    });
  });

  describe.each([
    ["loadConfig", (env: Record<string, string>) => loadConfig(env)],
    ["loadEdgeConfig", (env: Record<string, string>) => loadEdgeConfig(env)],
  ])("SESSION_LOCK_TTL_SECONDS through %s", (_, load) => {
    test.each([
      ["unset: SPEC's 30 s", undefined, 30],
      ["empty", " ", 30],
      ["the lowest", "1", 1],
      ["a usual value", "60", 60],
      ["the highest", "300", 300],
    ])("%s (%p) is %d seconds", (__, value, seconds) => {
      expect(load(value === undefined ? {} : { SESSION_LOCK_TTL_SECONDS: value }).sessionLockTtlSeconds).toBe(seconds);
    });

    test.each(["0", "301", "-5", "2.5", "30s", "abc"])("%p is refused with one line naming it and its bounds", (value) => {
      expect(() => load({ SESSION_LOCK_TTL_SECONDS: value })).toThrow(new ConfigError("SESSION_LOCK_TTL_SECONDS", "a whole number of seconds 1-300"));
    });
  });

  describe("SPOILER_GUARD_CACHE_MB", () => {
    const edge = (env: Record<string, string>) => loadEdgeConfig({ DATABASE_URL: "postgres://u@127.0.0.1/test", ...env });
    test.each([
      ["unset, in a container", () => loadConfig({}), 64],
      ["unset, on an isolate runtime, whose isolate has 128 MB in all", () => edge({}), 16],
      ["set, in a container", () => loadConfig({ SPOILER_GUARD_CACHE_MB: "256" }), 256],
      ["set, on an isolate runtime", () => edge({ SPOILER_GUARD_CACHE_MB: "8" }), 8],
      ["set blank, on an isolate runtime: still the isolate's default", () => edge({ SPOILER_GUARD_CACHE_MB: "" }), 16],
    ])("%s: %d MiB", (_, load, mib) => {
      expect(load().spoilerGuardCacheMb).toBe(mib);
    });

    test.each(["0", "65537", "1.5", "64MB"])("%p is refused with one line naming it and its bounds", (value) => {
      expect(() => loadConfig({ SPOILER_GUARD_CACHE_MB: value })).toThrow(new ConfigError("SPOILER_GUARD_CACHE_MB", "a whole number of MiB 1-65536"));
    });
  });

  test("empty strings count as unset", () => {
    expect(loadConfig({ PORT: "", DATABASE_URL: " " }).database.driver).toBe("pglite");
  });

  test.each([
    ["postgres://u@db.internal:5432/app", undefined, "postgres"],
    ["postgresql://u:p@ep-cool-1.eu-central-1.aws.neon.tech/neondb", undefined, "neon"],
    ["postgres://u@127.0.0.1/test", "neon", "neon"],
    ["postgres://u@x.neon.tech/db", "postgres", "postgres"],
  ])("DATABASE_URL %s with DATABASE_DRIVER %s uses the %s driver", (url, driver, expected) => {
    expect(loadConfig({ DATABASE_URL: url, DATABASE_DRIVER: driver }).database.driver).toBe(expected as "neon" | "postgres");
  });

  test("NEON_WS_PROXY and NEON_HTTP_ENDPOINT are carried to the Neon driver", () => {
    const c = loadConfig({ DATABASE_URL: "postgres://u@127.0.0.1/test", DATABASE_DRIVER: "neon", NEON_WS_PROXY: "127.0.0.1:9000/v1" });
    expect(c.database).toEqual({ driver: "neon", url: "postgres://u@127.0.0.1/test", wsProxy: "127.0.0.1:9000/v1" });
    const http = loadEdgeConfig({ DATABASE_URL: "postgres://u@127.0.0.1/test", NEON_WS_PROXY: "127.0.0.1:9000", NEON_HTTP_ENDPOINT: "http://127.0.0.1:9000/sql" });
    expect(http.database).toEqual({ driver: "neon", url: "postgres://u@127.0.0.1/test", wsProxy: "127.0.0.1:9000", httpEndpoint: "http://127.0.0.1:9000/sql" });
    expect(() => loadEdgeConfig({ DATABASE_URL: "postgres://u@127.0.0.1/test", NEON_HTTP_ENDPOINT: "127.0.0.1:9000/sql" })).toThrow(/NEON_HTTP_ENDPOINT/);
  });

  test("Upstash wins over REDIS_URL when both are set", () => {
    const c = loadConfig({ UPSTASH_REDIS_REST_URL: "https://eu1.upstash.io", UPSTASH_REDIS_REST_TOKEN: "t", REDIS_URL: "redis://127.0.0.1:6379" });
    expect(c.kv).toEqual({ driver: "upstash", url: "https://eu1.upstash.io", token: "t" });
    expect(loadConfig({ REDIS_URL: "redis://127.0.0.1:6379" }).kv).toEqual({ driver: "redis", url: "redis://127.0.0.1:6379" });
  });

  test("FILE_URL_ALLOWED_HOSTS is split, trimmed and lower-cased", () => {
    expect(loadConfig({ FILE_URL_ALLOWED_HOSTS: " Books.Example.com, 127.0.0.1:8080 ,[::1]:9000" }).fileUrlAllowedHosts).toEqual([
      "books.example.com",
      "127.0.0.1:8080",
      "[::1]:9000",
    ]);
  });

  test.each([
    ["0:0:0:0:0:0:0:1", "0:0:0:0:0:0:0:1"],
    ["::ffff:127.0.0.1", "::ffff:127.0.0.1"],
    ["LOCALHOST", "localhost"],
    ["ip6-localhost", "ip6-localhost"],
    ["127.0.0.2", "127.0.0.2"],
    ["[::1]", "::1"],
    ["Api.Localhost", "api.localhost"],
  ])("HOST %p is loopback however it is spelt (listening on %p): no ALLOWED_HOSTS beyond localhost names and IP literals", (spelling, host) => {
    const config = loadConfig({ HOST: spelling });
    expect(config.host).toBe(host);
    expect(config.allowedHosts).toEqual([]);
    const guard = createRequestGuard({ allowedHosts: config.allowedHosts });
    expect(guard(new Request("http://127.0.0.1:3000/health", { headers: { host: "evil.example" } }))?.status).toBe(403);
  });

  test.each(["127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "127.0.0.1."])("HOST %p, an IPv4 address in a resolver's shorthand, is refused", (host) => {
    expect(() => loadConfig({ HOST: host })).toThrow("invalid HOST: expected an IPv4 address as four decimal numbers (127.0.0.1)");
  });

  test("ALLOWED_HOSTS is none on a loopback HOST and any on a network HOST unless set; ALLOWED_ORIGINS is none unless set", () => {
    expect(loadConfig({}).allowedHosts).toEqual([]);
    expect(loadConfig({ HOST: "localhost" }).allowedHosts).toEqual([]);
    expect(loadConfig({ HOST: "::1" }).allowedHosts).toEqual([]);
    expect(loadConfig({ HOST: "0.0.0.0" }).allowedHosts).toBe("*");
    expect(loadConfig({ HOST: "::" }).allowedHosts).toBe("*");
    expect(loadConfig({ HOST: "0.0.0.0", ALLOWED_HOSTS: " API, api.books.svc.cluster.local " }).allowedHosts).toEqual(["api", "api.books.svc.cluster.local"]);
    expect(loadConfig({ ALLOWED_HOSTS: "*" }).allowedHosts).toBe("*");
    expect(loadConfig({}).allowedOrigins).toEqual([]);
    expect(loadConfig({ ALLOWED_ORIGINS: "https://App.Example.com, http://localhost:5173/" }).allowedOrigins).toEqual(["https://app.example.com", "http://localhost:5173"]);
    expect(loadConfig({ ALLOWED_ORIGINS: "*" }).allowedOrigins).toBe("*");
  });

  test.each([
    ["ALLOWED_HOSTS", "api:3000"],
    ["ALLOWED_HOSTS", "http://api"],
    ["ALLOWED_HOSTS", "*,api"],
    ["ALLOWED_HOSTS", ","],
    ["ALLOWED_ORIGINS", "app.example.com"],
    ["ALLOWED_ORIGINS", "https://app.example.com/path"],
    ["ALLOWED_ORIGINS", "ftp://app.example.com"],
    ["ALLOWED_ORIGINS", "null"],
  ])("%s=%s is refused with one line naming it", (variable, value) => {
    expect(() => loadConfig({ [variable]: value })).toThrow(new RegExp(`^invalid ${variable}: expected \\* or a comma list of`));
  });

  test.each([
    ["PORT", "abc", "PORT"],
    ["PORT", "70000", "PORT"],
    ["PORT", "0", "PORT"],
    ["DATABASE_URL", "mysql://u@h/db", "DATABASE_URL"],
    ["DATABASE_URL", "not a url", "DATABASE_URL"],
    ["DATABASE_DRIVER", "mysql", "DATABASE_DRIVER"],
    ["REDIS_URL", "http://127.0.0.1:6379", "REDIS_URL"],
    ["UPSTASH_REDIS_REST_URL", "https://x.upstash.io", "UPSTASH_REDIS_REST_TOKEN"],
    ["UPSTASH_REDIS_REST_TOKEN", "t", "UPSTASH_REDIS_REST_URL"],
    ["TYPESENSE_URL", "http://127.0.0.1:8108", "TYPESENSE_API_KEY"],
    ["QDRANT_URL", "qdrant:6333", "QDRANT_URL"],
    ["LLM_GATEWAY_URL", "ftp://x", "LLM_GATEWAY_URL"],
    ["MAX_BOOK_BYTES", "-5", "MAX_BOOK_BYTES"],
    ["MAX_ATTEMPTS", "0", "MAX_ATTEMPTS"],
    ["CHARACTER_CHECKPOINTS", "0", "CHARACTER_CHECKPOINTS"],
    ["CHARACTER_CHECKPOINTS", "21", "CHARACTER_CHECKPOINTS"],
    ["CHARACTER_CHECKPOINTS", "2.5", "CHARACTER_CHECKPOINTS"],
    ["CHARACTER_CONCURRENCY", "0", "CHARACTER_CONCURRENCY"],
    ["METRICS_PORT", "1e3", "METRICS_PORT"],
    ["METRICS_AGGREGATION", "redis", "METRICS_AGGREGATION"],
    ["METRICS_FLUSH_REQUESTS", "0", "METRICS_FLUSH_REQUESTS"],
    ["METRICS_FLUSH_INTERVAL_MS", "10", "METRICS_FLUSH_INTERVAL_MS"],
    ["LOG_LEVEL", "verbose", "LOG_LEVEL"],
    ["LOG_FORMAT", "logfmt", "LOG_FORMAT"],
    ["FILE_URL_ALLOWED_HOSTS", "http://a.example", "FILE_URL_ALLOWED_HOSTS"],
  ])("%s=%s is refused with one line naming %s", (key, value, variable) => {
    let error: unknown;
    try {
      loadConfig({ [key]: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(variable);
    expect((error as ConfigError).message).toStartWith(`invalid ${variable}: expected `);
    expect((error as ConfigError).message).not.toContain("\n");
  });
});
