/**
 * Section 5. Chat latency of the API server process on its embedded stores (PGlite, in-process
 * key-value store, embedded vector and BM25 indexes, rank fusion) against the loopback LLM gateway
 * answering with no delay, in its own process, so that what is measured is the backend's own cost:
 *
 * - time to first token (request sent → first token event received) at 1 to 128 concurrent
 *   sessions, each request a first turn in a fresh session (session, character, book and history
 *   read, a query rewrite, an embedding, two searches, a streamed reply, the exchange saved);
 * - the same first turn with and without a reader's position (spoiler-safe chat);
 * - streaming 2,000 tokens through the endpoint, beside reading the same 2,000 tokens straight from
 *   the gateway with the openai SDK.
 */
import OpenAI from "openai";
import { rmSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "../common/db/migrate.ts";
import { createDatabase } from "../common/db/create.ts";
import type { Database } from "../common/db/index.ts";
import { createPgliteDatabase } from "../common/db/pglite.ts";
import { createSession } from "../common/db/frontend-rows.ts";
import { saveBookReadingPositions, saveCharacterKnowledge } from "../common/db/reading-positions.ts";
import { createMetrics } from "../common/metrics/index.ts";
import { DEFAULT_METRICS_KEY_PREFIX } from "../common/metrics/kv-aggregation.ts";
import { createEmbeddedTextIndex } from "../common/text-index/embedded.ts";
import { createEmbeddedVectorIndex } from "../common/vector/embedded.ts";
import { PASSAGES, PERSONA, createTestLanguageModel, lastUserContent, scriptGateway, seedChatWorld, type ChatWorld } from "../tests/support/chat.ts";
import { buildWorkerdBundle, edgeRuntimeMissing, startEdgeRuntime, type EdgeRuntime } from "../tests/support/edge-runtime.ts";
import { startFakeLlmGateway } from "../tests/support/fake-llm-gateway.ts";
import { createTestDatabase, probePostgres } from "../tests/support/postgres.ts";
import { freePort, startService } from "../tests/support/process.ts";
import { deleteKeysMatching, probeRedis } from "../tests/support/redis.ts";
import { startUpstashBridge } from "../dev/edge/upstash-bridge.ts";
import { startNeonBridge as startWsTcpBridge } from "../dev/edge/neon-bridge.ts";
import { answerHelp, cpuByGroup, profileThroughInspector, type CpuProfile, cpuNanoseconds, exitWithParent, formatSummary, option, processesCpuNanoseconds, processTree, spawnChild, threadTimes, freshDataDir, markdownTable, percentile, reps, summarise, type BenchContext, type BenchSection, type ProcessInfo } from "./support.ts";

const STREAM_TOKENS = 2000;
const REPLY_TOKENS = 50;
const CONCURRENCY = [1, 8, 32, 128];
const EXTRA_CHUNKS = 500;
/**
 * Turns before any is measured. The JIT keeps compiling the hot path for the first hundred or so
 * turns (its threads' CPU is the process's); these are measured on their own, as the warm-up.
 */
export const WARMUP = 200;
const STREAM_PREFIX = "stream:";
/** `paced:<ms>:<n> …`: a reply of n tokens, one every ms milliseconds, as a model sends them. */
export const pacedMessage = (intervalMs: number, tokens: number, text: string) => `paced:${intervalMs}:${tokens} ${text}`;
const PACED = /^paced:(\d+):(\d+) /;
/** Tokens of a profiled turn's reply when the profile paces them. */
const PACED_PROFILE_TOKENS = 200;

/** The gateway child: replies of REPLY_TOKENS tokens, or STREAM_TOKENS when the message asks for a stream. */
function serveGateway() {
  const gateway = startFakeLlmGateway();
  const tokens = (n: number) => Array.from({ length: n }, (_, i) => `tok${i} `);
  scriptGateway(gateway, {
    chat: (request) => {
      const message = lastUserContent(request);
      const paced = PACED.exec(message);
      if (paced) return { chunks: tokens(Number(paced[2])), tokenDelayMs: Number(paced[1]) };
      return { chunks: tokens(message.startsWith(STREAM_PREFIX) ? STREAM_TOKENS : REPLY_TOKENS) };
    },
  });
  // Nothing is recorded for long: a bench sends thousands of requests.
  setInterval(() => gateway.clearRequests(), 1000);
  console.log(gateway.baseURL);
  console.log(serveIndexes());
  exitWithParent();
}

/**
 * Qdrant and Typesense as the API meets them at chat time, answering at once: the version probe of
 * Qdrant's client, a point query (POST /collections/{name}/points/query) and a document search
 * (GET /collections/{name}/documents/search), each with a page of the passages in the published wire
 * format. They let the API run with its real Qdrant and Typesense clients where neither server can.
 */
export function serveIndexes(): string {
  const points = PASSAGES.map((text, i) => ({ id: i + 1, version: 1, score: 0.9 - i / 100, payload: { chunk_index: i, text } }));
  const hits = PASSAGES.map((text, i) => ({
    document: { id: String(i), chunk_index: i, text },
    highlights: [],
    text_match: 578730123365187700 - i,
    text_match_info: { best_field_score: "1108091338752", best_field_weight: 15, fields_matched: 1, score: String(578730123365187700 - i), tokens_matched: 2 },
  }));
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    routes: {
      "/": Response.json({ title: "qdrant - vector search engine", version: "1.18.0" }),
      "/collections/:name/points/query": {
        POST: async (req) => {
          await req.text();
          return Response.json({ result: { points }, status: "ok", time: 0.0001 });
        },
      },
      "/collections/:name/documents/search": Response.json({ facet_counts: [], found: hits.length, hits, out_of: hits.length, page: 1, request_params: { collection_name: "book", per_page: 10, q: "" }, search_time_ms: 0 }),
    },
    fetch: () => Response.json({ status: { error: "not found" } }, { status: 404 }),
  });
  return `http://127.0.0.1:${server.port}`;
}

export interface GatewayProcess {
  baseURL: string;
  /** The Qdrant and Typesense stand-ins (serveIndexes). */
  indexesURL: string;
  stop(): void;
}

export async function startGatewayProcess(): Promise<GatewayProcess> {
  const child = await spawnChild(import.meta.path, ["--gateway"], 2);
  const [baseURL, indexesURL] = child.lines;
  return { baseURL: baseURL!, indexesURL: indexesURL!, stop: child.stop };
}

/**
 * The bridges that stand in for Neon and Upstash (tests/support): Neon's WebSocket protocol to this
 * machine's Postgres, Upstash's REST protocol to its Redis at `redisUrl`. In a process of their own,
 * so that their CPU is neither the bench's nor the API's: on the edge it is the providers'.
 */
async function serveBridges(redisUrl: string) {
  const neon = startWsTcpBridge();
  const upstash = await startUpstashBridge({ redisUrl });
  console.log(neon.address);
  console.log(neon.httpEndpoint);
  console.log(upstash.url);
  console.log(upstash.token);
  exitWithParent();
}

/**
 * The Redis database the edge stores' bridge writes to: the edge API sums its metrics there
 * (METRICS_AGGREGATION=kv, under fixed keys), so not the database other suites read theirs from
 * (nor 11, the edge runtimes suite's).
 */
const EDGE_REDIS_DB = 12;

/** Where the API keeps its data: the embedded database in DATA_DIR, or Postgres and Redis. */
export interface Stores {
  label: string;
  /** The API's environment besides DATA_DIR, LLM_GATEWAY_URL and LOG_LEVEL. */
  env: Record<string, string>;
  /** The database the world is seeded into (closed before the API starts). */
  open(dataDir: string): Promise<Database>;
  /** Removes what the run left in the stores (the data dir goes anyway). */
  cleanup(world: ChatWorld | undefined, sessions: readonly string[]): Promise<void>;
}

export const EMBEDDED: Stores = {
  label: "embedded stores (PGlite in a worker thread, in-process key-value store)",
  env: {},
  async open(dataDir) {
    return createPgliteDatabase({ dataDir: join(dataDir, "pg") });
  },
  async cleanup() {},
};

/**
 * A throwaway database on the machine's Postgres and its Redis; with `indexesURL`, Qdrant and
 * Typesense clients talking to the stand-ins there (the production shape) instead of the embedded indexes.
 */
export async function liveStores(indexesURL?: string): Promise<Stores | string> {
  const [postgres, redis] = await Promise.all([probePostgres(), probeRedis()]);
  if (!postgres.reachable) return postgres.reason;
  if (!redis.reachable) return redis.reason;
  const testDb = await createTestDatabase(postgres.url);
  return {
    label: indexesURL
      ? "production shape: Postgres (Bun SQL) and Redis of this machine, Qdrant and Typesense clients against loopback stand-ins"
      : "Postgres (Bun SQL) and Redis of this machine, embedded indexes",
    env: {
      DATABASE_URL: testDb.url,
      REDIS_URL: redis.url,
      ...(indexesURL ? { QDRANT_URL: indexesURL, TYPESENSE_URL: indexesURL, TYPESENSE_API_KEY: "bench" } : {}),
    },
    open: async () => createDatabase({ driver: "postgres", url: testDb.url }),
    async cleanup(world, sessions) {
      // Every key a chat writes names the book, the character or the session: remove exactly those.
      const ids = new Set([...sessions, ...(world ? [world.bookId, world.characterId] : [])]);
      await deleteKeysMatching((key) => key.split(":").some((part) => ids.has(part)), redis.url);
      await testDb.drop();
    },
  };
}

/**
 * Postgres and Redis as the API meets them on the edge: a throwaway database reached through the Neon
 * serverless driver over the WebSocket bridge, Redis through Upstash REST over the REST bridge (both
 * in a process of their own), Qdrant and Typesense clients against the stand-ins at `indexesURL` (the
 * embedded indexes are Bun-only). No REDIS_URL: the edge has no TCP.
 */
export async function edgeStores(indexesURL: string): Promise<Stores | string> {
  const [postgres, redis] = await Promise.all([probePostgres(), probeRedis()]);
  if (!postgres.reachable) return postgres.reason;
  if (!redis.reachable) return redis.reason;
  const redisUrl = `${redis.url.replace(/\/\d*$/, "")}/${EDGE_REDIS_DB}`;
  const testDb = await createTestDatabase(postgres.url);
  const bridges = await spawnChild(import.meta.path, ["--bridges", redisUrl], 4);
  const [wsProxy, httpEndpoint, upstashURL, upstashToken] = bridges.lines;
  return {
    label: "edge drivers: Postgres through the Neon driver (WebSocket bridge, and its SQL-over-HTTP endpoint for workerd's single statements), Redis through Upstash REST (REST bridge), both bridges in a process of their own; Qdrant and Typesense clients against loopback stand-ins",
    env: {
      DATABASE_URL: testDb.url,
      NEON_WS_PROXY: wsProxy!,
      NEON_HTTP_ENDPOINT: httpEndpoint!,
      UPSTASH_REDIS_REST_URL: upstashURL!,
      UPSTASH_REDIS_REST_TOKEN: upstashToken!,
      QDRANT_URL: indexesURL,
      TYPESENSE_URL: indexesURL,
      TYPESENSE_API_KEY: "bench",
    },
    open: async () => createDatabase({ driver: "postgres", url: testDb.url }),
    async cleanup(world, sessions) {
      bridges.stop();
      const ids = new Set([...sessions, ...(world ? [world.bookId, world.characterId] : [])]);
      await deleteKeysMatching((key) => key.startsWith(`${DEFAULT_METRICS_KEY_PREFIX}:`) || key.split(":").some((part) => ids.has(part)), redisUrl);
      await testDb.drop();
    },
  };
}

/** The chat world, its indexes and `sessionCount` fresh sessions, seeded into `db` and the data dir's indexes. */
async function seedWorld(baseURL: string, dataDir: string, db: Database, sessionCount: number): Promise<{ world: ChatWorld; sessions: string[] }> {
  await migrate(db);
  const vector = createEmbeddedVectorIndex({ dir: join(dataDir, "vectors") });
  const text = createEmbeddedTextIndex({ dir: join(dataDir, "text") });
  const llm = createTestLanguageModel({ baseURL }, createMetrics({ defaultMetrics: false }));
  const world = await seedChatWorld(db, { vector, text, llm });
  // What ingestion records for spoiler-safe chat: where each chunk ends, and the character at each quarter.
  const chunkCount = PASSAGES.length + EXTRA_CHUNKS;
  await saveBookReadingPositions(db, world.bookId, { chunkEnds: Array.from({ length: chunkCount }, (_, i) => (i + 1) / chunkCount), checkpoints: [0.25, 0.5, 0.75] });
  await saveCharacterKnowledge(db, [
    {
      characterId: world.characterId,
      firstAppearance: 0,
      checkpoints: [0.25, 0.5, 0.75].map((position) => ({ position, profileJson: { voice: "plain" }, systemPrompt: `${PERSONA} (as of ${position})` })),
      lines: [],
    },
  ]);
  // A few hundred more chunks, so that searches have something to rank.
  const extra = Array.from({ length: EXTRA_CHUNKS }, (_, i) => ({ chunkIndex: PASSAGES.length + i, text: `${PASSAGES[i % PASSAGES.length]} Part ${i}.` }));
  const vectors = await llm.embed(extra.map((c) => c.text));
  await vector.upsert(world.bookId, extra.map((c, i) => ({ ...c, vector: vectors[i]! })));
  await text.upsert(world.bookId, extra);
  const sessions: string[] = [];
  for (let i = 0; i < sessionCount; i++) sessions.push((await createSession(db, { userId: world.userId, characterId: world.characterId })).id);
  await Promise.all([vector.close?.(), text.close?.()]);
  return { world, sessions };
}

interface Exchange {
  firstToken: number;
  total: number;
}

interface Counts {
  requestsOf(concurrency: number): number;
  streamRuns: number;
  positionRuns: number;
  sessions: number;
}

interface StoreResults {
  /** API CPU ms per exchange over the warm-up turns. */
  warmupCpuMs: number | undefined;
  concurrencyRows: string[][];
  positionRows: string[][];
  direct: number[];
  /** The same stream fetched and read to its end without parsing. */
  raw: number[];
  endpoint: number[];
  /** API CPU ms per 1,000 tokens streamed through the endpoint; undefined off Linux. */
  cpuPerThousandTokens: number | undefined;
}

export interface ChatApi {
  /** The API's base URL. */
  url: string;
  /** The process serving the API (Bun's, Deno's, the Worker's workerd): its threads are what chatSection splits. */
  pid: number;
  /** CPU nanoseconds so far of every process serving the API; undefined off Linux. */
  cpuNs(): Promise<number | undefined>;
  /** The same for the runtime's local tooling in front of it (ApiServer.toolingPids); 0 when it has none. */
  toolingCpuNs(): Promise<number | undefined>;
  /**
   * One turn: in a fresh session unless `sessionId` names one (a follow-up turn); milliseconds to the
   * first token event and to the end of the stream; throws unless the reply finished.
   */
  exchange(message: string, extra?: Record<string, unknown>, sessionId?: string, onFirstToken?: () => void): Promise<Exchange>;
  /** A fresh session of the pool, for a first turn and the follow-ups after it. */
  takeSession(): string;
}

/** The API server running under a runtime, ready. */
export interface ApiServer {
  url: string;
  /** The process serving requests. */
  pid: number;
  /** Every process whose CPU is the API's. */
  pids: readonly number[];
  /**
   * Processes the requests pass through that a deployment does not have (wrangler dev's proxy workerd
   * and its Node processes), or that only start the server (`deno task`): measured apart, not the API's.
   */
  toolingPids: readonly number[];
  /** Spawn → first 200 from /health, ms. */
  readyMs: number;
  stop(): Promise<void>;
}

/** What runs the API server (`--runtime <name>`), started with the stores' variables, LLM_GATEWAY_URL and LOG_LEVEL. */
export interface ApiRuntime {
  name: string;
  /** How it is started, for the tables. */
  command: string;
  /** Whether it needs the stores as the edge sees them (edgeStores): HTTP drivers only. */
  edge: boolean;
  /** Why it cannot run here (its binary is not installed), or undefined. */
  missing?(): string | undefined;
  /** `inspectorPort`: the V8 inspector on it, for a profile (edge runtimes but workerd under wrangler). */
  start(env: Record<string, string>, options?: { inspectorPort?: number }): Promise<ApiServer>;
}

/** `bun api/server.ts`, with `env` over the stores' and `runtimeArgs` before the entry (`--cpu-prof`). */
export function bunApi(name: string, options: { env?: Record<string, string>; edge?: boolean; runtimeArgs?: readonly string[] } = {}): ApiRuntime {
  const env = options.env ?? {};
  return {
    name,
    command: ["bun api/server.ts", ...Object.entries(env).map(([k, v]) => `${k}=${v}`)].join(" "),
    edge: options.edge ?? false,
    async start(storesEnv) {
      const service = await startService("api/server.ts", { ...storesEnv, ...env }, undefined, undefined, [], options.runtimeArgs ?? []);
      const pid = service.proc.pid;
      return { url: service.url, pid, pids: [pid], toolingPids: [], readyMs: service.readyMs, stop: async () => void (await service.stop()) };
    },
  };
}

/**
 * An edge runtime as tests/support/edge-runtime.ts starts it, the API's processes picked out of the
 * tree under the one started by `serves`.
 */
function edgeApi(runtime: EdgeRuntime, command: string, serves: (process: ProcessInfo, url: string) => boolean, bundleDir?: () => Promise<string>): ApiRuntime {
  return {
    name: runtime,
    command,
    edge: true,
    missing: () => edgeRuntimeMissing(runtime),
    async start(env, options = {}) {
      const service = await startEdgeRuntime(runtime, env, { ...options, ...(bundleDir ? { bundleDir: await bundleDir() } : {}) });
      const tree = await processTree(service.pid);
      const pids = tree.filter((p) => serves(p, service.url)).map((p) => p.pid);
      if (pids.length === 0) {
        await service.stop();
        throw new Error(`no process of ${runtime} serves the API among:\n${tree.map((p) => `${p.pid} ${p.command}`).join("\n")}`);
      }
      return { url: service.url, pid: pids[0]!, pids, toolingPids: tree.map((p) => p.pid).filter((pid) => !pids.includes(pid)), readyMs: service.readyMs, stop: service.stop };
    },
  };
}

let workerdBundle: Promise<string> | undefined;
/** The deploy bundle, built once per bench process for every workerd-bundle start, removed at exit. */
function sharedWorkerdBundle(): Promise<string> {
  workerdBundle ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "bench-workerd-bundle-"));
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    await buildWorkerdBundle(dir);
    return dir;
  })();
  return workerdBundle;
}

/**
 * The runtimes the bench can run the API under. Bun on its TCP drivers as deployed in a container;
 * Bun again on the drivers the edge has (the Neon driver and Upstash REST, and the edge's defaults:
 * metrics summed through the key-value store), so that the runtimes compare on the same drivers; Deno
 * through its deno.json task; workerd under `wrangler dev`, where the Worker's own workerd process is
 * the API and wrangler's proxy workerd and Node processes in front of it are tooling (a deployed
 * Worker has neither); and workerd alone serving the bundle `wrangler deploy` uploads.
 */
export const API_RUNTIMES: Record<string, ApiRuntime> = {
  bun: bunApi("bun"),
  "bun-edge-drivers": bunApi("bun-edge-drivers", { env: { DATABASE_DRIVER: "neon", METRICS_AGGREGATION: "kv" }, edge: true }),
  // `deno task` runs the server as its child: `deno run … api/edge/deno.ts`.
  deno: edgeApi("deno", "deno task api", (p) => / run /.test(p.command)),
  // wrangler dev runs two workerd processes: its proxy on the public port, and the Worker's behind it.
  workerd: edgeApi("workerd", "wrangler dev", (p, url) => /\/workerd serve /.test(p.command) && !p.command.includes(`entry=${new URL(url).host}`)),
  "workerd-bundle": edgeApi("workerd-bundle", "workerd serve (the `wrangler deploy --dry-run` bundle)", (p) => /\/workerd serve /.test(p.command), sharedWorkerdBundle),
};

export function apiRuntime(name = "bun"): ApiRuntime {
  const runtime = API_RUNTIMES[name];
  if (!runtime) throw new Error(`no API runtime named ${name}: known are ${Object.keys(API_RUNTIMES).join(", ")} (bench/chat.ts API_RUNTIMES)`);
  return runtime;
}

/**
 * Seeds the chat world and `sessionCount` sessions on `stores`, starts the API server process on them
 * (under `runtime`), runs `use`, and stops and cleans up whatever happens.
 */
export async function withChatApi<T>(
  stores: Stores,
  gatewayURL: string,
  sessionCount: number,
  runtime: ApiRuntime,
  use: (api: ChatApi) => Promise<T>,
  /** More rows for the world, written before the API starts. */
  afterSeed?: (db: Database, world: ChatWorld) => Promise<void>,
): Promise<T> {
  const dataDir = await freshDataDir();
  let world: ChatWorld | undefined;
  let allSessions: string[] = [];
  let api: ApiServer | undefined;
  try {
    if (runtime.edge && !("NEON_WS_PROXY" in stores.env)) throw new Error(`${runtime.name} runs on the edge drivers: the stores must be edgeStores`);
    const db = await stores.open(dataDir);
    try {
      ({ world, sessions: allSessions } = await seedWorld(gatewayURL, dataDir, db, sessionCount));
      await afterSeed?.(db, world);
    } finally {
      await db.close();
    }
    const seeded = world;
    const sessions = [...allSessions];
    api = await runtime.start({ ...(runtime.edge ? {} : { DATA_DIR: dataDir }), LLM_GATEWAY_URL: gatewayURL, LOG_LEVEL: "error", ...stores.env });
    const { url, pids, toolingPids } = api;
    const body = (sessionId: string, message: string, extra: Record<string, unknown>) =>
      JSON.stringify({ user_id: seeded.userId, character_id: seeded.characterId, book_id: seeded.bookId, session_id: sessionId, user_message: message, ...extra });
    const takeSession = () => {
      const session = sessions.pop();
      if (!session) throw new Error("the bench seeded too few sessions");
      return session;
    };
    const exchange = async (message: string, extra: Record<string, unknown> = {}, sessionId?: string, onFirstToken?: () => void): Promise<Exchange> => {
      const start = performance.now();
      const res = await fetch(`${url}/character/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: body(sessionId ?? takeSession(), message, extra) });
      if (!res.ok || !res.body) throw new Error(`chat answered ${res.status}: ${await res.text()}`);
      const stream = res.body.getReader();
      let firstToken = NaN;
      let received = "";
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await stream.read();
        if (done) break;
        received += decoder.decode(value, { stream: true });
        if (Number.isNaN(firstToken) && received.includes('data: {"token"')) {
          firstToken = performance.now() - start;
          onFirstToken?.();
        }
      }
      const total = performance.now() - start;
      const last = received.trimEnd().split("\n\n").at(-1) ?? "";
      if (!last.startsWith('data: {"done":true')) throw new Error(`chat did not finish: ${last.slice(0, 200)}`);
      return { firstToken, total };
    };
    return await use({ url, pid: api.pid, cpuNs: () => processesCpuNanoseconds(pids), toolingCpuNs: () => processesCpuNanoseconds(toolingPids), exchange, takeSession });
  } finally {
    await api?.stop();
    await stores.cleanup(world, allSessions);
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The API server process on `stores`, measured at each concurrency, with and without a position, and streaming. */
async function measureOn(ctx: BenchContext, stores: Stores, gatewayURL: string, counts: Counts): Promise<StoreResults> {
  ctx.progress(`chat on ${stores.label}: seeding ${counts.sessions} sessions`);
  return withChatApi(stores, gatewayURL, counts.sessions, apiRuntime(), async ({ pid, exchange }) => {
    const warmupBefore = await cpuNanoseconds(pid);
    for (let i = 0; i < WARMUP; i++) await exchange(`Tell me about the storm. (${i})`);
    const warmupAfter = await cpuNanoseconds(pid);
    const warmupCpuMs = warmupBefore !== undefined && warmupAfter !== undefined ? (warmupAfter - warmupBefore) / 1e6 / WARMUP : undefined;

    const concurrencyRows: string[][] = [];
    for (const c of CONCURRENCY) {
      ctx.progress(`chat on ${stores.label}: ${c} concurrent sessions`);
      const total = counts.requestsOf(c);
      const samples: number[] = [];
      let errors = 0;
      let started = 0;
      let firstError = "";
      const start = performance.now();
      const cpuBefore = await threadTimes(pid);
      // c clients, each sending its next message as soon as the previous reply has ended.
      await Promise.all(
        Array.from({ length: c }, async (_, client) => {
          while (started < total) {
            const n = started++;
            try {
              // Distinct messages, so that every turn asks for its query rewrite rather than reading it from the cache.
              samples.push((await exchange(`What happened to the Albatross in the storm? (${c}.${client}.${n})`)).firstToken);
            } catch (err) {
              errors++;
              firstError ||= String(err);
            }
          }
        }),
      );
      const seconds = (performance.now() - start) / 1000;
      const cpuAfter = await threadTimes(pid);
      const groups = cpuBefore && cpuAfter ? cpuByGroup(cpuBefore, cpuAfter) : undefined;
      const perExchange = (ns: number) => (ns / 1e6 / total).toFixed(2);
      if (firstError) ctx.progress(`chat: ${errors} errors at ${c} sessions, first: ${firstError}`);
      concurrencyRows.push([
        String(c),
        String(total),
        samples.length ? percentile(samples, 50).toFixed(1) : "–",
        samples.length ? percentile(samples, 99).toFixed(1) : "–",
        (samples.length / seconds).toFixed(0),
        groups ? perExchange(groups.main + groups.worker + groups["jit and gc"] + groups.other) : "–",
        groups ? perExchange(groups.main) : "–",
        groups ? perExchange(groups.worker) : "–",
        groups ? perExchange(groups["jit and gc"]) : "–",
        groups ? perExchange(groups.other) : "–",
        String(errors),
      ]);
    }

    ctx.progress(`chat on ${stores.label}: with and without a reading position`);
    // One client, turns with and without a position interleaved, so that both see the same machine.
    const positioned: Record<"none" | "at", { ttft: number[]; cpuNs: number }> = { none: { ttft: [], cpuNs: 0 }, at: { ttft: [], cpuNs: 0 } };
    for (let i = 0; i < counts.positionRuns; i++) {
      for (const kind of ["none", "at"] as const) {
        const cpuBefore = await cpuNanoseconds(pid);
        positioned[kind].ttft.push((await exchange(`What happened in the storm? (${kind}.${i})`, kind === "at" ? { reading_position: 0.6 } : {})).firstToken);
        const cpuAfter = await cpuNanoseconds(pid);
        if (cpuBefore !== undefined && cpuAfter !== undefined) positioned[kind].cpuNs += cpuAfter - cpuBefore;
      }
    }
    const positionRow = (label: string, kind: "none" | "at") => [
      label,
      formatSummary(summarise(positioned[kind].ttft), 2),
      (positioned[kind].cpuNs / 1e6 / counts.positionRuns).toFixed(2),
    ];

    ctx.progress(`chat on ${stores.label}: streaming 2,000 tokens`);
    const sdk = new OpenAI({ baseURL: gatewayURL, apiKey: "bench", maxRetries: 0 });
    const direct: number[] = [];
    const raw: number[] = [];
    const endpoint: number[] = [];
    let streamCpuNs: number | undefined = 0;
    for (let run = 0; run < counts.streamRuns; run++) {
      // The least any client can do: the same stream fetched and read to its end, not parsed.
      const rawStart = performance.now();
      const res = await fetch(`${gatewayURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "bench", stream: true, messages: [{ role: "user", content: `${STREAM_PREFIX} ${run}` }] }),
      });
      const body = await res.text();
      if (!body.includes(`tok${STREAM_TOKENS - 1} `)) throw new Error("the gateway's raw stream was cut short");
      raw.push(performance.now() - rawStart);
      const start = performance.now();
      const chunks = await sdk.chat.completions.create({ model: "bench", stream: true, messages: [{ role: "user", content: `${STREAM_PREFIX} ${run}` }] });
      let tokens = 0;
      for await (const chunk of chunks) if (chunk.choices[0]?.delta?.content) tokens++;
      if (tokens !== STREAM_TOKENS) throw new Error(`the gateway streamed ${tokens} tokens`);
      direct.push(performance.now() - start);
      const cpuBefore = await cpuNanoseconds(pid);
      endpoint.push((await exchange(`${STREAM_PREFIX} ${run}`)).total);
      const cpuAfter = await cpuNanoseconds(pid);
      streamCpuNs = cpuBefore !== undefined && cpuAfter !== undefined && streamCpuNs !== undefined ? streamCpuNs + cpuAfter - cpuBefore : undefined;
    }
    return {
      warmupCpuMs,
      concurrencyRows,
      positionRows: [positionRow("no position (whole book)", "none"), positionRow("`reading_position: 0.6`", "at")],
      direct,
      raw,
      endpoint,
      cpuPerThousandTokens: streamCpuNs === undefined ? undefined : streamCpuNs / 1e6 / counts.streamRuns / (STREAM_TOKENS / 1000),
    };
  });
}

export async function chatSection(ctx: BenchContext): Promise<BenchSection> {
  const requestsPerRow = reps(ctx, 160, 32);
  const requestsOf = (c: number) => Math.max(requestsPerRow, 3 * c);
  const streamRuns = reps(ctx, 5, 2);
  const positionRuns = reps(ctx, 100, 10);
  const counts: Counts = {
    requestsOf,
    streamRuns,
    positionRuns,
    sessions: WARMUP + CONCURRENCY.reduce((n, c) => n + requestsOf(c), 0) + 2 * positionRuns + streamRuns,
  };

  const gateway = await startGatewayProcess();
  const parts: string[] = [
    "The API server process (`bun run api`) with the loopback gateway answering at once in its own process " +
      `(${REPLY_TOKENS}-token replies), so the times are the backend's own work plus loopback hops. Every request is the first turn of a fresh session: ` +
      "session, character, book, preferences and history read, query rewrite, embedding, vector and BM25 search, streamed reply, exchange saved. " +
      `${WARMUP} warm-up requests (measured apart); then c clients each send a request as soon as their previous reply ended. ` +
      "TTFT is request sent → first token event received. The API server's CPU time per exchange (from /proc, Linux only, all its threads: " +
      "the embedded database's worker thread included) is what the rate and latency are made of, less whatever else the machine runs; the gateway and this client take their own. " +
      "It is split by thread: the main thread (the request's own work), the embedded database's worker thread (PGlite; idle on Postgres), the engine's JIT and GC helpers, and the rest (Bun's I/O pool, the HTTP client). " +
      "Run three times: on the embedded stores; on Postgres and Redis (a throwaway database; the keys the run wrote are deleted after it) with the embedded indexes; " +
      "and on the production shape, Postgres and Redis with the API's Qdrant and Typesense clients talking to loopback stand-ins in the gateway's process that answer a search at once with a page of passages in the published wire format.",
  ];
  try {
    const setups: Stores[] = [EMBEDDED];
    for (const indexesURL of [undefined, gateway.indexesURL]) {
      const live = await liveStores(indexesURL);
      if (typeof live === "string") {
        parts.push("", `(Postgres + Redis runs skipped: ${live}.)`);
        break;
      }
      setups.push(live);
    }
    for (const stores of setups) {
      const r = await measureOn(ctx, stores, gateway.baseURL, counts);
      const [d, w, e] = [summarise(r.direct), summarise(r.raw), summarise(r.endpoint)];
      parts.push(
        "",
        `**On the ${stores.label}**`,
        "",
        markdownTable(
          ["concurrent sessions", "requests", "TTFT p50 ms", "TTFT p99 ms", "exchanges/s", "API CPU ms per exchange", "main thread", "database worker thread", "JIT and GC threads", "other threads", "errors"],
          r.concurrencyRows,
        ),
        "",
        r.warmupCpuMs === undefined ? "" : `The ${WARMUP} warm-up turns before them (one client, the JIT still compiling): ${r.warmupCpuMs.toFixed(2)} ms of API CPU per exchange.`,
        "",
        `Spoiler-safe chat: the same first turn without a position and with \`reading_position: 0.6\` (the book's chunk ends and the character's ` +
          `checkpoints looked up, cached after the first turn; both searches filtered), one client, ${positionRuns} turns each, interleaved:`,
        "",
        markdownTable(["turn", "TTFT median (min–max) ms", "API CPU ms per exchange"], r.positionRows),
        "",
        `Streaming ${STREAM_TOKENS.toLocaleString("en")} tokens, median (min–max) of ${streamRuns} runs, ms` +
          (r.cpuPerThousandTokens === undefined ? ":" : `; the API's CPU: ${r.cpuPerThousandTokens.toFixed(1)} ms per 1,000 streamed tokens (the whole turn included):`),
        "",
        markdownTable(
          ["path", "total ms", "÷ raw read"],
          [
            ["gateway stream fetched and read to its end, not parsed", formatSummary(w, 1), "1.00"],
            ["gateway read with the openai SDK", formatSummary(d, 1), (d.median / w.median).toFixed(2)],
            ["`POST /character/chat` (rewrite, retrieval, stream, save)", formatSummary(e, 1), (e.median / w.median).toFixed(2)],
          ],
        ),
      );
    }
    return { title: "Chat", body: parts.join("\n") };
  } finally {
    gateway.stop();
  }
}


/** Where a file's time belongs: a package under node_modules, a file of ours, or the engine itself. */
function ownerOf(url: string): string {
  if (!url) return "(engine and native code)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return `package ${pkg[1]}`;
  const root = url.indexOf("/bench/") >= 0 ? url.slice(0, url.indexOf("/bench/")) : process.cwd();
  return url.startsWith(root) ? url.slice(root.length + 1) : url;
}

/** The steps of a chat turn, each with the paths of the files and packages that do its work. */
const STEPS: readonly (readonly [string, readonly string[]])[] = [
  ["LLM calls: rewrite, embedding, reply stream", ["common/llm/", "node_modules/openai/"]],
  ["search: Qdrant and Typesense clients, fusion", ["common/vector/", "common/text/", "@qdrant", "node_modules/typesense/", "axios", "follow-redirects", "common/retrieval/"]],
  ["database (Bun SQL)", ["common/db/"]],
  ["key-value store (Redis): cache, lock", ["common/kv/", "api/chat/chat-cache", "api/chat/session-lock"]],
  ["prompt and preferences", ["common/prompt/", "gpt-tokenizer", "@noble"]],
  ["HTTP: router, body, validation, metrics", ["elysia", "api/app", "api/http-metrics", "prom-client", "api/json-body", "api/chat/index", "common/metrics/", "common/contract/", "api/errors", "api/request-guard", "api/service-errors", "@sinclair", "exact-mirror"]],
  ["SSE out", ["api/sse"]],
  // Every file of api/chat/ but the routes (index.ts, counted under HTTP above): the turn and its parts.
  ["chat service (the turn itself)", ["api/chat/", "common/log"]],
];
/** Frames charged to whoever called them: native code, the runtime's own modules, shared helpers. */
const PASS_THROUGH = ["common/upstream", "/zod/", "node:", "internal:", "tslib", "undici", "bun:", "webstreams"];

/**
 * Each sample charged to a step of the turn: to the nearest frame on its stack that is not native,
 * runtime or a shared helper (so `fetch` counts for whoever fetched); "engine" when nothing of ours is
 * on the stack (the event loop, timers, promise jobs).
 */
function stepShares(profile: CpuProfile): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  const steps = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    let node = id;
    while (parent.has(node)) {
      const url = byId.get(node)!.callFrame.url;
      if (url && !PASS_THROUGH.some((p) => url.includes(p))) break;
      node = parent.get(node)!;
    }
    const url = byId.get(node)!.callFrame.url;
    const step = !url ? "engine, with nothing of ours on the stack" : (STEPS.find(([, paths]) => paths.some((p) => url.includes(p)))?.[0] ?? "other");
    steps.set(step, (steps.get(step) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  return steps;
}

/** Time per step, per file and per function of a profile, largest first, as markdown tables. */
function profileTables(profile: CpuProfile, top: number, turns: number): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const fns = new Map<string, number>();
  const files = new Map<string, number>();
  let total = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)!;
    const us = profile.timeDeltas[i] ?? 0;
    if (frame.functionName === "(idle)") {
      idle += us;
      return;
    }
    total += us;
    const fn = `${frame.functionName || "(anonymous)"} ${frame.url ? `${ownerOf(frame.url)}:${frame.lineNumber + 1}` : ""}`.trim();
    fns.set(fn, (fns.get(fn) ?? 0) + us);
    files.set(ownerOf(frame.url), (files.get(ownerOf(frame.url)) ?? 0) + us);
  });
  const rows = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => [`\`${name}\``, (us / 1000).toFixed(0), ((100 * us) / total).toFixed(1)]);
  const steps = [...stepShares(profile)].sort((a, b) => b[1] - a[1]);
  const all = steps.reduce((sum, [, us]) => sum + us, 0);
  return [
    `Busy samples: ${(total / 1000).toFixed(0)} ms; idle, left out: ${(idle / 1000).toFixed(0)} ms.`,
    "",
    markdownTable(
      ["step", "ms per turn", "%"],
      steps.map(([step, us]) => [step, (us / 1000 / turns).toFixed(2), ((100 * us) / all).toFixed(1)]),
    ),
    "",
    markdownTable(["file or package", "self ms", "%"], rows(files)),
    "",
    markdownTable(["function", "self ms", "%"], rows(fns)),
  ].join("\n");
}

/**
 * `bun bench/chat.ts --profile [--stores embedded|postgres|production] [--turns N] [--token-interval-ms MS] [--save file.cpuprofile]`: the
 * API server under Bun's sampling profiler for WARMUP + N first turns from one client; prints where its
 * main thread's time went, and keeps the profile (for Chrome's DevTools) with --save.
 */
async function profileChat() {
  const turns = Number(option("--turns") ?? 1000);
  const pacingOption = option("--token-interval-ms");
  const pacing = pacingOption === undefined ? undefined : Number(pacingOption);
  const runtimeName = option("--runtime") ?? "bun";
  const gateway = await startGatewayProcess();
  const dir = await mkdtemp(join(tmpdir(), "chat-profile-"));
  const turn = (exchange: ChatApi["exchange"], i: number) => {
    const message = `What happened to the Albatross in the storm? (${i})`;
    // With --token-interval-ms, the measured turns' replies come paced (PACED_PROFILE_TOKENS tokens).
    return exchange(pacing !== undefined && i >= WARMUP ? pacedMessage(pacing, PACED_PROFILE_TOKENS, message) : message);
  };
  try {
    let profile: CpuProfile;
    let label: string;
    let profiledTurns: number;
    if (runtimeName === "bun") {
      const stores = option("--stores") ?? "embedded";
      const live = stores === "embedded" ? EMBEDDED : await liveStores(stores === "production" ? gateway.indexesURL : undefined);
      if (typeof live === "string") throw new Error(`Postgres and Redis are needed: ${live}`);
      await withChatApi(live, gateway.baseURL, WARMUP + turns, bunApi("bun", { runtimeArgs: ["--cpu-prof", `--cpu-prof-dir=${dir}`] }), async ({ exchange }) => {
        for (let i = 0; i < WARMUP + turns; i++) await turn(exchange, i);
      });
      const [file] = (await readdir(dir)).filter((f) => f.endsWith(".cpuprofile"));
      if (!file) throw new Error("the API wrote no profile");
      profile = JSON.parse(await readFile(join(dir, file), "utf8")) as CpuProfile;
      label = `API main thread on the ${live.label}, ${WARMUP} warm-up and ${turns} measured first turns (the warm-up in the profile too), one client`;
      profiledTurns = WARMUP + turns;
    } else {
      // Deno or workerd alone: profiled through the inspector over the measured turns only.
      const runtime = apiRuntime(runtimeName);
      const edge = await edgeStores(gateway.indexesURL);
      if (typeof edge === "string") throw new Error(`Postgres and Redis are needed: ${edge}`);
      const inspectorPort = await freePort();
      const inspected: ApiRuntime = { ...runtime, start: (env) => runtime.start(env, { inspectorPort }) };
      let taken: CpuProfile | undefined;
      await withChatApi(edge, gateway.baseURL, WARMUP + turns, inspected, async ({ exchange }) => {
        for (let i = 0; i < WARMUP; i++) await turn(exchange, i);
        taken = await profileThroughInspector(inspectorPort, async () => {
          for (let i = WARMUP; i < WARMUP + turns; i++) await turn(exchange, i);
        });
      });
      profile = taken!;
      label = `API (${runtimeName}) on the ${edge.label}, ${WARMUP} warm-up turns, then ${turns} first turns profiled, one client`;
      profiledTurns = turns;
    }
    console.log(`${label}:\n`);
    const save = option("--save");
    if (save) await writeFile(save, JSON.stringify(profile));
    console.log(profileTables(profile, 25, profiledTurns));
  } finally {
    gateway.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

const USAGE = `
usage: bun bench/chat.ts --profile [--runtime bun|deno|workerd-bundle] [--stores embedded|postgres|production] [--turns 1000] [--token-interval-ms MS] [--save file.cpuprofile]

Profiles the API's main thread over first chat turns and prints where its time went (--save keeps the
profile for Chrome's DevTools). On Bun with --cpu-prof, on the stores --stores names; on Deno and on
workerd (the deploy bundle) through the V8 inspector, on the edge drivers. The chat latency section itself runs with \`bun run bench --only chat\`.`;

if (import.meta.main) {
  answerHelp(USAGE);
  if (process.argv.includes("--gateway")) serveGateway();
  else if (process.argv.includes("--bridges")) await serveBridges(option("--bridges")!);
  else if (process.argv.includes("--profile")) await profileChat();
  else console.log(USAGE.trim());
}
