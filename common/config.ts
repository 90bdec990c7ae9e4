import { join, resolve } from "node:path";
import { z } from "zod";
import type { LogFormat, LogLevel } from "./log.ts";
import { listenAddress } from "./listen-address.ts";
import { DEFAULT_CHARACTER_CHECKPOINTS, DEFAULT_CHARACTER_CONCURRENCY, DEFAULT_CHAT_CONTEXT_TOKENS, DEFAULT_CHAT_FIRST_TOKEN_TIMEOUT_MS, DEFAULT_CHAT_MODEL, DEFAULT_CHAT_REPLY_TOKENS, DEFAULT_DATA_DIR, DEFAULT_EDGE_SPOILER_GUARD_CACHE_MB, DEFAULT_EMBED_MODEL, DEFAULT_HOST, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_BOOK_BYTES, DEFAULT_METRICS_PORT, DEFAULT_PORT, DEFAULT_RERANK_MODEL, DEFAULT_SPOILER_GUARD_CACHE_MB, DEFAULT_SSE_KEEPALIVE_SECONDS, PROMPT_FRAMING_TOKENS , DEFAULT_LOCK_TTL_SECONDS } from "./config-defaults.ts";
import { empty, endsInNumber, hostList, HOST_NAME, httpUrl, integer, IPV4_LITERAL, isOrigin, listOrAny, optionalString, url } from "./config-values.ts";

/**
 * The one place that reads the environment. Every variable is parsed once into a typed object;
 * the composition root passes pieces of it to whoever needs them.
 */

/** Below this the shares of a prompt (common/prompt/budget.ts) leave too little for a persona and a passage. */
export const MIN_CHAT_CONTEXT_TOKENS = 4_096;
/** Of the context, what the prompt must keep besides the reply's reserve. */
const MIN_PROMPT_TOKENS = 2_048;

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    readonly expected: string,
  ) {
    super(`invalid ${variable}: expected ${expected}`);
    this.name = "ConfigError";
  }
}

/** Expected-value descriptions, keyed by variable; used in the one-line start-up error. */
const envSchema = z.object({
  PORT: integer(1, 65535, "a port number 1-65535"),
  HOST: z.preprocess(
    empty,
    z
      .string()
      .transform((h) => h.replace(/^\[(.*)\]$/, "$1").toLowerCase())
      .pipe(
        z
          .string()
          .regex(/^([0-9a-z.-]+|[0-9a-f:.]*:[0-9a-f:.]*)$/, "a host name or IP address to listen on")
          // 127.1, 2130706433 and 0x7f.1 are 127.0.0.1 to the resolver but look like names: one spelling only.
          .refine((h) => h.includes(":") || !endsInNumber(h) || IPV4_LITERAL.test(h), "an IPv4 address as four decimal numbers (127.0.0.1)"),
      )
      .optional(),
  ),
  PLAYGROUND: z.preprocess(empty, z.enum(["on", "off"]).optional()),
  DATA_DIR: optionalString,
  DATABASE_URL: url(["postgres:", "postgresql:"], "a postgres:// or postgresql:// URL"),
  DATABASE_DRIVER: z.preprocess(empty, z.enum(["neon", "postgres"]).optional()),
  NEON_WS_PROXY: optionalString,
  NEON_HTTP_ENDPOINT: httpUrl,
  UPSTASH_REDIS_REST_URL: httpUrl,
  UPSTASH_REDIS_REST_TOKEN: optionalString,
  REDIS_URL: url(["redis:", "rediss:"], "a redis:// or rediss:// URL"),
  QDRANT_URL: httpUrl,
  QDRANT_API_KEY: optionalString,
  TYPESENSE_URL: httpUrl,
  TYPESENSE_API_KEY: optionalString,
  LLM_GATEWAY_URL: httpUrl,
  LLM_API_KEY: optionalString,
  CHAT_MODEL: optionalString,
  EMBED_MODEL: optionalString,
  RERANK_URL: httpUrl,
  RERANK_API_KEY: optionalString,
  RERANK_MODEL: optionalString,
  SYSTEM_PROMPT_STORAGE_PATH: optionalString,
  FILE_URL_ALLOWED_HOSTS: hostList,
  ALLOWED_HOSTS: listOrAny((h) => HOST_NAME.test(h), (h) => h.toLowerCase(), "* or a comma list of host names (no ports)"),
  ALLOWED_ORIGINS: listOrAny(isOrigin, (o) => new URL(o).origin, "* or a comma list of origins like https://app.example.com"),
  MAX_BOOK_BYTES: integer(1, Number.MAX_SAFE_INTEGER, "a positive number of bytes"),
  BOOKNLP_COMMAND: optionalString,
  METRICS_PORT: integer(1, 65535, "a port number 1-65535"),
  METRICS_AGGREGATION: z.preprocess(empty, z.enum(["off", "kv"]).optional()),
  METRICS_FLUSH_REQUESTS: integer(1, 1_000_000, "a whole number of requests 1-1000000"),
  METRICS_FLUSH_INTERVAL_MS: integer(100, 600_000, "milliseconds 100-600000"),
  MAX_ATTEMPTS: integer(1, 100, "a whole number of attempts 1-100"),
  CHAT_FIRST_TOKEN_TIMEOUT_MS: integer(1_000, 600_000, "milliseconds 1000-600000"),
  SSE_KEEPALIVE_SECONDS: integer(1, 300, "a whole number of seconds 1-300"),
  SESSION_LOCK_TTL_SECONDS: integer(1, 300, "a whole number of seconds 1-300"),
  CHAT_CONTEXT_TOKENS: integer(MIN_CHAT_CONTEXT_TOKENS, 10_000_000, `tokens ${MIN_CHAT_CONTEXT_TOKENS}-10000000`),
  CHAT_REPLY_TOKENS: integer(1, 1_000_000, "a positive number of tokens"),
  CHARACTER_CHECKPOINTS: integer(1, 20, "a whole number of checkpoints 1-20"),
  CHARACTER_CONCURRENCY: integer(1, 256, "a whole number of calls 1-256"),
  SPOILER_GUARD_CACHE_MB: integer(1, 65_536, "a whole number of MiB 1-65536"),
  LOG_LEVEL: z.preprocess(empty, z.enum(["debug", "info", "warn", "error"]).optional()),
  LOG_FORMAT: z.preprocess(empty, z.enum(["text", "json"]).optional()),
});

/** Every environment variable the configuration reads: deployment manifests may set these and no others (tests/contract/deploy-agrees.test.ts). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(envSchema.shape);

export type DatabaseConfig =
  | { driver: "pglite"; dataDir: string }
  | { driver: "postgres"; url: string }
  | { driver: "neon"; url: string; wsProxy?: string; httpEndpoint?: string };

export type KvConfig =
  | { driver: "memory" }
  | { driver: "upstash"; url: string; token: string }
  | { driver: "redis"; url: string };

export interface Config {
  port: number;
  /** Address the HTTP servers listen on. */
  host: string;
  /** The chat page at /playground; undefined when PLAYGROUND is unset, so each entry point picks its own default. */
  playground?: boolean;
  dataDir: string;
  database: DatabaseConfig;
  kv: KvConfig;
  qdrant?: { url: string; apiKey?: string };
  typesense?: { url: string; apiKey: string };
  llm: { gatewayUrl?: string; apiKey?: string; chatModel: string; embedModel: string };
  /**
   * Present when RERANK_API_KEY is set (SPEC: an empty reranker key means no rerank). A self-hosted
   * reranker that needs no key is switched on with any non-empty key; it is sent as a Bearer token.
   */
  rerank?: { url: string; apiKey: string; model: string };
  systemPromptStoragePath: string;
  fileUrlAllowedHosts: string[];
  /**
   * Host names the API answers to beyond IP literals and localhost names (api/request-guard.ts);
   * "*" any. Unset: none when HOST is loopback (DNS rebinding), any when it is a network address.
   */
  allowedHosts: string[] | "*";
  /** Origins whose browser pages may send state-changing requests besides the API's own; "*" any. */
  allowedOrigins: string[] | "*";
  maxBookBytes: number;
  booknlpCommand?: string;
  metricsPort: number;
  /**
   * METRICS_AGGREGATION=kv: every process flushes its series to the key-value store in batches and
   * `/metrics` shows the sums (common/metrics/kv-aggregation.ts); unset for a process that is scraped itself.
   */
  metricsAggregation?: { flushRequests?: number; flushIntervalMs?: number };
  maxAttempts: number;
  chatFirstTokenTimeoutMs: number;
  /** Quiet time after which a streaming reply sends a `: keep-alive` comment (api/sse.ts), so idle-cutting proxies leave it open. */
  sseKeepAliveSeconds: number;
  /**
   * The chat session lock's expiry (SPEC: 30 s), renewed every third of it while a reply streams, so it
   * lapses only when its holder died: how long a session stays busy after a crashed turn.
   */
  sessionLockTtlSeconds: number;
  /** The model's context window the chat's prompts are fitted into (common/prompt/budget.ts). */
  chatContextTokens: number;
  /** Of the context, left free for the reply. */
  chatReplyTokens: number;
  /** Parts of the book characters are written for: a profile and persona at the end of each part but the last (spoiler-safe chat). */
  characterCheckpoints: number;
  /** Model calls in flight per book in the character passes (profiles, personas, discovery). */
  characterConcurrency: number;
  /** MiB of spoiler-guard data the API keeps in memory. */
  spoilerGuardCacheMb: number;
  logLevel: LogLevel;
  logFormat: LogFormat;
}

type Env = Record<string, string | undefined>;

/**
 * A loopback-bound API is reached only through this machine's browser, so a name re-pointed at
 * 127.0.0.1 (DNS rebinding) is the way in and only localhost names and IP literals are accepted. On a
 * network address the API already answers whoever reaches it, by whatever name the network uses for
 * it (a cluster service name such as `api`); ALLOWED_HOSTS narrows that.
 */
function defaultAllowedHosts(host: string): string[] | "*" {
  return listenAddress(host, DEFAULT_PORT).network ? "*" : [];
}

function isNeonHost(databaseUrl: string): boolean {
  return new URL(databaseUrl).hostname.endsWith(".neon.tech");
}

/** Parses the environment; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0]);
    throw new ConfigError(variable, issue.message.startsWith("Invalid option") ? enumHint(variable) : issue.message);
  }
  const e = parsed.data;
  const dataDir = resolve(e.DATA_DIR ?? DEFAULT_DATA_DIR);
  const host = e.HOST ?? DEFAULT_HOST;

  let database: DatabaseConfig;
  if (!e.DATABASE_URL) database = { driver: "pglite", dataDir: join(dataDir, "pg") };
  else {
    const driver = e.DATABASE_DRIVER ?? (isNeonHost(e.DATABASE_URL) ? "neon" : "postgres");
    database =
      driver === "neon"
        ? {
            driver,
            url: e.DATABASE_URL,
            ...(e.NEON_WS_PROXY ? { wsProxy: e.NEON_WS_PROXY } : {}),
            ...(e.NEON_HTTP_ENDPOINT ? { httpEndpoint: e.NEON_HTTP_ENDPOINT } : {}),
          }
        : { driver, url: e.DATABASE_URL };
  }

  let kv: KvConfig = { driver: "memory" };
  if (e.UPSTASH_REDIS_REST_URL || e.UPSTASH_REDIS_REST_TOKEN) {
    if (!e.UPSTASH_REDIS_REST_URL) throw new ConfigError("UPSTASH_REDIS_REST_URL", "an http(s) URL when UPSTASH_REDIS_REST_TOKEN is set");
    if (!e.UPSTASH_REDIS_REST_TOKEN) throw new ConfigError("UPSTASH_REDIS_REST_TOKEN", "a token when UPSTASH_REDIS_REST_URL is set");
    kv = { driver: "upstash", url: e.UPSTASH_REDIS_REST_URL, token: e.UPSTASH_REDIS_REST_TOKEN };
  } else if (e.REDIS_URL) kv = { driver: "redis", url: e.REDIS_URL };
  if (e.TYPESENSE_URL && !e.TYPESENSE_API_KEY) throw new ConfigError("TYPESENSE_API_KEY", "an API key when TYPESENSE_URL is set");
  const chatContextTokens = e.CHAT_CONTEXT_TOKENS ?? DEFAULT_CHAT_CONTEXT_TOKENS;
  const chatReplyTokens = e.CHAT_REPLY_TOKENS ?? DEFAULT_CHAT_REPLY_TOKENS;
  if (chatContextTokens - chatReplyTokens - PROMPT_FRAMING_TOKENS < MIN_PROMPT_TOKENS) {
    throw new ConfigError("CHAT_REPLY_TOKENS", `at most ${chatContextTokens - PROMPT_FRAMING_TOKENS - MIN_PROMPT_TOKENS} tokens with CHAT_CONTEXT_TOKENS at ${chatContextTokens}`);
  }
  if (e.RERANK_API_KEY && !e.RERANK_URL) throw new ConfigError("RERANK_URL", "an http(s) URL when RERANK_API_KEY is set");

  return {
    port: e.PORT ?? DEFAULT_PORT,
    host,
    ...(e.PLAYGROUND ? { playground: e.PLAYGROUND === "on" } : {}),
    dataDir,
    database,
    kv,
    ...(e.QDRANT_URL ? { qdrant: { url: e.QDRANT_URL, ...(e.QDRANT_API_KEY ? { apiKey: e.QDRANT_API_KEY } : {}) } } : {}),
    ...(e.TYPESENSE_URL && e.TYPESENSE_API_KEY ? { typesense: { url: e.TYPESENSE_URL, apiKey: e.TYPESENSE_API_KEY } } : {}),
    llm: {
      ...(e.LLM_GATEWAY_URL ? { gatewayUrl: e.LLM_GATEWAY_URL } : {}),
      ...(e.LLM_API_KEY ? { apiKey: e.LLM_API_KEY } : {}),
      chatModel: e.CHAT_MODEL ?? DEFAULT_CHAT_MODEL,
      embedModel: e.EMBED_MODEL ?? DEFAULT_EMBED_MODEL,
    },
    ...(e.RERANK_URL && e.RERANK_API_KEY
      ? { rerank: { url: e.RERANK_URL, apiKey: e.RERANK_API_KEY, model: e.RERANK_MODEL ?? DEFAULT_RERANK_MODEL } }
      : {}),
    systemPromptStoragePath: resolve(e.SYSTEM_PROMPT_STORAGE_PATH ?? join(dataDir, "prompts")),
    fileUrlAllowedHosts: e.FILE_URL_ALLOWED_HOSTS ?? [],
    allowedHosts: e.ALLOWED_HOSTS ?? defaultAllowedHosts(host),
    allowedOrigins: e.ALLOWED_ORIGINS ?? [],
    maxBookBytes: e.MAX_BOOK_BYTES ?? DEFAULT_MAX_BOOK_BYTES,
    ...(e.BOOKNLP_COMMAND ? { booknlpCommand: e.BOOKNLP_COMMAND } : {}),
    metricsPort: e.METRICS_PORT ?? DEFAULT_METRICS_PORT,
    ...(e.METRICS_AGGREGATION === "kv"
      ? {
          metricsAggregation: {
            ...(e.METRICS_FLUSH_REQUESTS !== undefined ? { flushRequests: e.METRICS_FLUSH_REQUESTS } : {}),
            ...(e.METRICS_FLUSH_INTERVAL_MS !== undefined ? { flushIntervalMs: e.METRICS_FLUSH_INTERVAL_MS } : {}),
          },
        }
      : {}),
    maxAttempts: e.MAX_ATTEMPTS ?? DEFAULT_MAX_ATTEMPTS,
    chatFirstTokenTimeoutMs: e.CHAT_FIRST_TOKEN_TIMEOUT_MS ?? DEFAULT_CHAT_FIRST_TOKEN_TIMEOUT_MS,
    sseKeepAliveSeconds: e.SSE_KEEPALIVE_SECONDS ?? DEFAULT_SSE_KEEPALIVE_SECONDS,
    sessionLockTtlSeconds: e.SESSION_LOCK_TTL_SECONDS ?? DEFAULT_LOCK_TTL_SECONDS,
    chatContextTokens,
    chatReplyTokens,
    characterCheckpoints: e.CHARACTER_CHECKPOINTS ?? DEFAULT_CHARACTER_CHECKPOINTS,
    characterConcurrency: e.CHARACTER_CONCURRENCY ?? DEFAULT_CHARACTER_CONCURRENCY,
    spoilerGuardCacheMb: e.SPOILER_GUARD_CACHE_MB ?? DEFAULT_SPOILER_GUARD_CACHE_MB,
    logLevel: e.LOG_LEVEL ?? "info",
    logFormat: e.LOG_FORMAT ?? "text",
  };
}

/**
 * The configuration of the API on an edge runtime (Deno, workerd), from the environment it is given
 * (a Worker's `env` object; Deno's process environment by default). The same variables, with other
 * defaults: any DATABASE_URL goes through the Neon driver (Bun's SQL client is Bun-only), the metrics are summed across isolates through the key-value store (METRICS_AGGREGATION=kv), the spoiler guard keeps less in memory (SPOILER_GUARD_CACHE_MB), and
 * `defaults` lets an entry point say more (a Worker answers on the network: HOST 0.0.0.0).
 */
export function loadEdgeConfig(env: Env = process.env, defaults: Env = {}): Config {
  // A variable set to "" counts as unset, as loadConfig reads it: it must not hide the edge's default.
  const given = Object.fromEntries(Object.entries(env).filter(([, v]) => empty(v) !== undefined));
  return loadConfig({ DATABASE_DRIVER: "neon", METRICS_AGGREGATION: "kv", SPOILER_GUARD_CACHE_MB: String(DEFAULT_EDGE_SPOILER_GUARD_CACHE_MB), ...defaults, ...given });
}

/** Every credential in the configuration: what the logs must never show. */
export function secretsOf(config: Config): string[] {
  const passwordOf = (url: string) => {
    const { password } = new URL(url);
    return password ? [password, decodeURIComponent(password)] : [];
  };
  const secrets = [
    config.llm.apiKey,
    config.rerank?.apiKey,
    config.qdrant?.apiKey,
    config.typesense?.apiKey,
    ...(config.kv.driver === "upstash" ? [config.kv.token] : config.kv.driver === "redis" ? passwordOf(config.kv.url) : []),
    ...(config.database.driver === "pglite" ? [] : passwordOf(config.database.url)),
  ];
  return [...new Set(secrets.filter((s): s is string => typeof s === "string" && s !== ""))];
}

function enumHint(variable: string): string {
  if (variable === "DATABASE_DRIVER") return "neon or postgres";
  if (variable === "LOG_LEVEL") return "debug, info, warn or error";
  if (variable === "LOG_FORMAT") return "text or json";
  if (variable === "PLAYGROUND") return "on or off";
  return "one of the documented values";
}

/** For entry points: parse or print one line and exit non-zero. */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`configuration error: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
}
