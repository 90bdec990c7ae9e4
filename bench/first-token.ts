/**
 * Section `first-token`: what the backend adds to the time to first token when its services are a
 * network away, on each runtime.
 *
 * Every service sits behind a loopback proxy that adds the round trip it has from an edge location
 * (bench/latency-proxy.ts): Postgres 8 ms (Neon), Redis 3 ms (Upstash), Qdrant and Typesense 10 ms;
 * the gateway answers as a real one does: the query rewrite and the embedding after 150 ms, the rerank
 * after 50 ms, the reply's first token after 200 ms. A turn cannot answer before its chain of model
 * and index calls (rewrite → embedding → vector search → rerank → first token); that chain, timed
 * from this process against the same services (the floor), is subtracted from each turn's time to
 * first token: what is left is the backend's own wait (store round trips it did not overlap, its CPU).
 *
 * Each row: first turns of fresh sessions (nothing of the session cached yet) and the follow-up turn
 * in each, a reader at 60 % of the book (position, checkpoints, the spoiler guard's data), every
 * message distinct (no rewrite is cached). The proxies count round trips per turn: all of the turn's,
 * and those before its first token.
 *
 *   bun bench/first-token.ts [--quick] [--runtimes bun,deno,workerd-bundle] [--pairs 20]
 * or in `bun run bench` (section `first-token`).
 */
import { loadavg } from "node:os";
import { lastUserContent, scriptGateway, type ChatWorld } from "../tests/support/chat.ts";
import type { Database } from "../common/db/index.ts";
import { startFakeLlmGateway } from "../tests/support/fake-llm-gateway.ts";
import { startFakeReranker } from "../tests/support/fake-reranker.ts";
import { sleep } from "../common/sleep.ts";
import { apiRuntime, edgeStores, liveStores, serveIndexes, withChatApi, type ApiRuntime, type Stores } from "./chat.ts";
import { startLatencyProxy, throughProxy, type LatencyProxy } from "./latency-proxy.ts";
import { answerHelp, exitWithParent, formatSummary, machineHeader, markdownTable, option, percentile, reps, spawnChild, summarise, type BenchContext, type BenchSection } from "./support.ts";
import { versions } from "./runtimes.ts";

/** Milliseconds each service takes, as seen from an edge location (the figures). */
export const DELAYS = { postgres: 8, redis: 3, indexes: 10, rewrite: 150, embedding: 150, rerank: 50, firstToken: 200 } as const;
const DEFAULT_RUNTIMES = ["bun", "deno", "workerd-bundle"];
const WARMUP_PAIRS = 5;
const RERANK_KEY = "bench";
/** Tokens of each reply: the first is what is timed. */
const REPLY_TOKENS = 20;
/** Pause after a turn before its round trips are counted: the writes after the reply land by then. */
const SETTLE_MS = 300;
/**
 * Where a reader at 60 % says so: in the body (the chat page's `reading_position`), or only by their
 * page in user_library (the frontend's way, SPEC's request has no position), read on every turn.
 */
const SOURCES = { body: { reading_position: 0.6 }, page: {} } as const;
type Source = keyof typeof SOURCES;
const SOURCE_LABELS: Record<Source, string> = { body: "in the body", page: "library page" };
const PAGE_COUNT = 100;

interface Services {
  gatewayURL: string;
  rerankURL: string;
  indexesURL: string;
  stop(): void;
}

/** The child process: the gateway, the reranker and the index stand-ins, each answering after its delay. */
function serveServices() {
  const gateway = startFakeLlmGateway({ embeddingsLatencyMs: DELAYS.embedding });
  scriptGateway(gateway, {
    rewrite: async (request) => {
      await sleep(DELAYS.rewrite);
      const message = lastUserContent(request).split("\n").at(-1) ?? "";
      return { content: JSON.stringify({ narrative_query: message, keyword_query: message }) };
    },
    chat: async () => {
      await sleep(DELAYS.firstToken);
      return { chunks: Array.from({ length: REPLY_TOKENS }, (_, i) => `tok${i} `) };
    },
  });
  const reranker = startFakeReranker({ apiKey: RERANK_KEY });
  reranker.onRerank(async (request) => {
    await sleep(DELAYS.rerank);
    return { results: request.documents.map((_, index) => ({ index, relevance_score: 1 - index / 1000 })).slice(0, request.top_n ?? request.documents.length) };
  });
  setInterval(() => {
    gateway.clearRequests();
    reranker.clearRequests();
  }, 1000);
  console.log(gateway.baseURL);
  console.log(reranker.url);
  console.log(serveIndexes());
  exitWithParent();
}

async function startServices(): Promise<Services> {
  const child = await spawnChild(import.meta.path, ["--services"], 3);
  const [gatewayURL, rerankURL, indexesURL] = child.lines;
  return { gatewayURL: gatewayURL!, rerankURL: rerankURL!, indexesURL: indexesURL!, stop: child.stop };
}

/** A store's traffic as its proxy saw it. */
interface Proxied {
  name: "Postgres" | "Redis" | "indexes";
  proxy: LatencyProxy;
}

/** The port of a loopback address or URL in `value`. */
function loopbackPort(value: string): number {
  const port = /(?:127\.0\.0\.1|localhost):(\d+)/.exec(value)?.[1];
  if (!port) throw new Error(`not a loopback address: ${value}`);
  return Number(port);
}

/**
 * `stores` with every address the API is given pointed at a latency proxy in front of it. On the
 * edge, DATABASE_URL is where the Neon bridge connects (the provider's side): its bridge is proxied.
 */
async function behindProxies(stores: Stores, edge: boolean): Promise<{ stores: Stores; proxied: Proxied[] }> {
  const roles: Record<string, Proxied["name"]> = edge
    ? { NEON_WS_PROXY: "Postgres", NEON_HTTP_ENDPOINT: "Postgres", UPSTASH_REDIS_REST_URL: "Redis", QDRANT_URL: "indexes", TYPESENSE_URL: "indexes" }
    : { DATABASE_URL: "Postgres", REDIS_URL: "Redis", QDRANT_URL: "indexes", TYPESENSE_URL: "indexes" };
  const delay: Record<Proxied["name"], number> = { Postgres: DELAYS.postgres, Redis: DELAYS.redis, indexes: DELAYS.indexes };
  const byPort = new Map<number, Proxied>();
  const env = { ...stores.env };
  for (const [variable, name] of Object.entries(roles)) {
    const value = env[variable];
    if (value === undefined) throw new Error(`${stores.label}: no ${variable}`);
    const port = loopbackPort(value);
    let proxied = byPort.get(port);
    if (!proxied) {
      proxied = { name, proxy: await startLatencyProxy({ host: "127.0.0.1", port }, delay[name]) };
      byPort.set(port, proxied);
    }
    env[variable] = variable === "NEON_WS_PROXY" ? proxied.proxy.address : throughProxy(value, proxied.proxy);
  }
  const proxied = [...byPort.values()];
  return {
    proxied,
    stores: {
      ...stores,
      env,
      async cleanup(world, sessions) {
        await Promise.all(proxied.map((p) => p.proxy.stop()));
        await stores.cleanup(world, sessions);
      },
    },
  };
}

type Counts = Record<Proxied["name"], number>;
function countsOf(proxied: readonly Proxied[]): Counts {
  const counts: Counts = { Postgres: 0, Redis: 0, indexes: 0 };
  for (const p of proxied) counts[p.name] += p.proxy.roundTrips();
  return counts;
}
const minus = (a: Counts, b: Counts): Counts => ({ Postgres: a.Postgres - b.Postgres, Redis: a.Redis - b.Redis, indexes: a.indexes - b.indexes });

/** The chain a turn cannot beat, timed from here: rewrite → embedding → vector search → rerank → first token. */
async function floorOnce(services: Services, indexes: LatencyProxy): Promise<number> {
  const post = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
    await res.text();
    if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  };
  const started = performance.now();
  await post(`${services.gatewayURL}/chat/completions`, { model: "m", messages: [{ role: "user", content: "the storm" }], response_format: { type: "json_object" } });
  await post(`${services.gatewayURL}/embeddings`, { model: "e", input: ["the storm"] });
  await post(`${throughProxy(services.indexesURL, indexes)}/collections/book/points/query`, { query: [0.1], limit: 20 });
  await post(`${services.rerankURL}/v1/rerank`, { model: "r", query: "the storm", documents: ["a", "b"] }, { authorization: `Bearer ${RERANK_KEY}` });
  const res = await fetch(`${services.gatewayURL}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "hello" }] }) });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let received = "";
  let elapsed = NaN;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += decoder.decode(value, { stream: true });
    if (Number.isNaN(elapsed) && received.includes('"content":"tok')) elapsed = performance.now() - started;
  }
  return elapsed;
}

export interface TurnFigures {
  firstToken: number[];
  added: number[];
  before: Counts[];
  total: Counts[];
}

export interface RuntimeFigures {
  runtime: string;
  floor: number;
  turns: Record<Source, { first: TurnFigures; followUp: TurnFigures }>;
}

const emptyTurns = (): TurnFigures => ({ firstToken: [], added: [], before: [], total: [] });

async function measureRuntime(runtime: ApiRuntime, services: Services, pairs: number, progress: (line: string) => void): Promise<RuntimeFigures | string> {
  const missing = runtime.missing?.();
  if (missing) return missing;
  const base = runtime.edge ? await edgeStores(services.indexesURL) : await liveStores(services.indexesURL);
  if (typeof base === "string") return base;
  const { stores, proxied } = await behindProxies(
    { ...base, env: { ...base.env, RERANK_URL: services.rerankURL, RERANK_API_KEY: RERANK_KEY } },
    runtime.edge,
  );
  const indexes = proxied.find((p) => p.name === "indexes")!.proxy;
  // The reader's library row, at 60 % of the book's pages, for the turns that give no position.
  const atPage = async (db: Database, world: ChatWorld) => {
    await db.query("UPDATE books SET page_count = $2 WHERE id = $1", [world.bookId, PAGE_COUNT]);
    await db.query("INSERT INTO user_library (user_id, book_id, current_page) VALUES ($1, $2, $3)", [world.userId, world.bookId, SOURCES.body.reading_position * PAGE_COUNT]);
  };
  const sources = Object.keys(SOURCES) as Source[];
  return withChatApi(stores, services.gatewayURL, (pairs + WARMUP_PAIRS) * sources.length, runtime, async (api) => {
    const turns = Object.fromEntries(sources.map((source) => [source, { first: emptyTurns(), followUp: emptyTurns() }])) as RuntimeFigures["turns"];
    const figures: RuntimeFigures = { runtime: runtime.name, floor: NaN, turns };
    // Timed between the pairs, under the same conditions as the turns beside them.
    const floors: number[] = [];
    let n = 0;
    const turn = async (into: TurnFigures | undefined, source: Source, sessionId: string) => {
      const start = countsOf(proxied);
      let atFirstToken = start;
      const { firstToken } = await api.exchange(`What happened in the storm, and why? (${n++})`, SOURCES[source], sessionId, () => {
        atFirstToken = countsOf(proxied);
      });
      await sleep(SETTLE_MS);
      if (!into) return;
      into.firstToken.push(firstToken);
      into.before.push(minus(atFirstToken, start));
      into.total.push(minus(countsOf(proxied), start));
    };
    for (let i = 0; i < pairs + WARMUP_PAIRS; i++) {
      const measured = i >= WARMUP_PAIRS;
      if (measured && (i - WARMUP_PAIRS) % 5 === 0) progress(`first-token on ${runtime.name}: pair ${i - WARMUP_PAIRS + 1} of ${pairs}`);
      if (measured) floors.push(await floorOnce(services, indexes));
      for (const source of sources) {
        const session = api.takeSession();
        await turn(measured ? turns[source].first : undefined, source, session);
        await turn(measured ? turns[source].followUp : undefined, source, session);
      }
    }
    figures.floor = median(floors);
    for (const t of sources.flatMap((source) => [turns[source].first, turns[source].followUp])) t.added = t.firstToken.map((ms) => ms - figures.floor);
    return figures;
  }, atPage);
}

const median = (values: readonly number[]) => percentile(values, 50);
const countCell = (counts: readonly Counts[], name: keyof Counts) => String(median(counts.map((c) => c[name])));

export function figuresRows(figures: readonly RuntimeFigures[]): string[][] {
  return figures.flatMap((f) =>
    (Object.keys(f.turns) as Source[]).flatMap((source) => (["first", "followUp"] as const).map((kind) => {
      const t = f.turns[source][kind];
      const s = summarise(t.added);
      return [
        f.runtime,
        SOURCE_LABELS[source],
        kind === "first" ? "first turn" : "follow-up",
        formatSummary(summarise(t.firstToken)),
        `${median(t.added).toFixed(0)} (p90 ${percentile(t.added, 90).toFixed(0)}, min ${s.min.toFixed(0)})`,
        `${countCell(t.before, "Postgres")} / ${countCell(t.total, "Postgres")}`,
        `${countCell(t.before, "Redis")} / ${countCell(t.total, "Redis")}`,
        `${countCell(t.before, "indexes")} / ${countCell(t.total, "indexes")}`,
      ];
    })),
  );
}

export async function firstTokenSection(ctx: BenchContext & { runtimes?: readonly string[]; pairs?: number }): Promise<BenchSection> {
  const pairs = ctx.pairs ?? reps(ctx, 20, 3);
  const services = await startServices();
  const figures: RuntimeFigures[] = [];
  const skipped: string[] = [];
  try {
    for (const name of ctx.runtimes ?? DEFAULT_RUNTIMES) {
      const result = await measureRuntime(apiRuntime(name), services, pairs, ctx.progress);
      if (typeof result === "string") skipped.push(`${name}: ${result}`);
      else figures.push(result);
    }
  } finally {
    services.stop();
  }
  const floor = figures.map((f) => `${f.runtime} ${f.floor.toFixed(0)} ms`).join(", ");
  const body = [
    `Services behind loopback proxies adding a round trip: Postgres ${DELAYS.postgres} ms, Redis ${DELAYS.redis} ms, Qdrant and Typesense ${DELAYS.indexes} ms; the gateway's rewrite ${DELAYS.rewrite} ms, embedding ${DELAYS.embedding} ms, rerank ${DELAYS.rerank} ms, first token ${DELAYS.firstToken} ms. ${pairs} sessions per runtime (after ${WARMUP_PAIRS} unmeasured), each a first turn and a follow-up, for a reader at 60 % given in the body (\`reading_position\`) and for one whose 60 % is only their user_library page (as the frontend's requests, which carry no position), every message distinct. Floor (the model and index chain timed from the bench process before each pair, median): ${floor}.`,
    "",
    markdownTable(
      ["runtime", "reader's position", "turn", "time to first token, ms", "added by the backend, ms", "Postgres round trips before first token / per turn", "Redis round trips before / per turn", "index round trips before / per turn"],
      figuresRows(figures),
    ),
    ...(skipped.length ? ["", `Not measured: ${skipped.join("; ")}.`] : []),
  ].join("\n");
  return { title: "Time to first token with the services a network away", body };
}

if (import.meta.main) {
  if (process.argv.includes("--services")) serveServices();
  else {
    answerHelp("usage: bun bench/first-token.ts [--quick] [--runtimes bun,deno,workerd-bundle] [--pairs 20]");
    const quick = process.argv.includes("--quick");
    const runtimes = option("--runtimes")?.split(",");
    const pairsOption = option("--pairs");
    console.log(`${machineHeader()} · load average ${loadavg().map((x) => x.toFixed(1)).join(", ")}\n${versions()}\n`);
    const section = await firstTokenSection({
      quick,
      books: [],
      progress: (line) => console.error(line),
      ...(runtimes ? { runtimes } : {}),
      ...(pairsOption ? { pairs: Number(pairsOption) } : {}),
    });
    console.log(`## ${section.title}\n\n${section.body}`);
    process.exit(0);
  }
}
