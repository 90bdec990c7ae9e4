import type { Config } from "./config.ts";
import type { Database } from "./db/index.ts";
import { downloadBook, type DownloadResult } from "./file-url.ts";
import type { KeyValueStore } from "./kv/index.ts";
import type { LanguageModel, UsageListener } from "./llm/index.ts";
import type { Logger } from "./log.ts";
import type { Metrics } from "./metrics/index.ts";
import { enableKvMetricsAggregation } from "./metrics/kv-aggregation.ts";
import { countTokens } from "./metrics/llm.ts";
import { createHttpReranker } from "./rerank/http.ts";
import type { Reranker } from "./rerank/index.ts";
import type { TextIndex } from "./text-index/index.ts";
import type { VectorIndex } from "./vector/index.ts";

/**
 * What the API, the worker and the CLIs are given: the typed config and an adapter per port, built
 * by a composition root, common/deps.ts on Bun or common/edge-deps.ts on the edge. Each root chooses
 * the adapters its runtime can run; what follows the choice is the same on both and is done once,
 * here, so that neither root can forget a part of it.
 */
export interface Deps {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  db: Database;
  kv: KeyValueStore;
  llm: LanguageModel;
  vectorIndex: VectorIndex;
  textIndex: TextIndex;
  /** Without one, retrieval orders passages by rank fusion. */
  reranker: Reranker | undefined;
  /** Downloads file_url with every check (address policy, size, time, text) and discards the bytes. */
  probeBook: (fileUrl: string) => Promise<DownloadResult>;
  close(): Promise<void>;
}

/** The adapters a composition root chose; the language model is built once the tokens it uses can be counted. */
export interface ChosenAdapters<D extends Database> {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  db: D;
  kv: KeyValueStore;
  llm: (onUsage: UsageListener) => LanguageModel;
  vectorIndex: VectorIndex;
  textIndex: TextIndex;
}

export function assembleDeps<D extends Database>(chosen: ChosenAdapters<D>): Deps & { db: D } {
  const { config, logger, metrics, db, kv, vectorIndex, textIndex } = chosen;
  // A scrape reaches one process (or isolate) of many: the series are summed through the key-value store.
  if (config.metricsAggregation) enableKvMetricsAggregation(metrics, kv, { ...config.metricsAggregation, logger });
  const llm = chosen.llm((purpose, usage) => countTokens(metrics, purpose, usage.promptTokens, usage.completionTokens));
  const reranker = config.rerank ? createHttpReranker(config.rerank) : undefined;
  const probeBook = (fileUrl: string) => downloadBook(fileUrl, { allowedHosts: config.fileUrlAllowedHosts, maxBytes: config.maxBookBytes });

  logger.info("components", {
    database: db.driver,
    kv: kv.driver,
    llm: llm.provider,
    vector_index: vectorIndex.adapter,
    text_index: textIndex.adapter,
    reranker: reranker ? "http" : "rank fusion",
  });

  return {
    config,
    logger,
    metrics,
    db,
    kv,
    llm,
    vectorIndex,
    textIndex,
    reranker,
    probeBook,
    async close() {
      // The last requests' series reach the store before it closes.
      await metrics.aggregation?.close();
      await Promise.allSettled([kv.close(), vectorIndex.close?.(), textIndex.close?.()]);
      await db.close();
    },
  };
}

/** How long a start-up probe of one dependency may take before it counts as unreachable. */
export const DEPENDENCY_PROBE_TIMEOUT_MS = 5_000;

interface DependencyProbe {
  /** The variable that names it, as an operator would look for it. */
  variable: string;
  host: string;
  probe(signal: AbortSignal): Promise<unknown>;
}

/** host:port of a URL, without credentials or path. */
const hostOf = (url: string) => new URL(url).host;

/** The configured (not embedded) services, each with the cheapest request that proves it answers. */
function dependencyProbes(deps: Pick<Deps, "config" | "db" | "kv">): DependencyProbe[] {
  const { config } = deps;
  // Any HTTP answer, even a 401 or 404, proves the service is there; only no answer is a problem.
  const http = (variable: string, url: string, headers: Record<string, string> = {}): DependencyProbe => ({
    variable,
    host: hostOf(url),
    probe: (signal) => fetch(url, { signal, headers }).then((r) => r.body?.cancel()),
  });
  const probes: DependencyProbe[] = [];
  if (config.database.driver !== "pglite") probes.push({ variable: "DATABASE_URL", host: hostOf(config.database.url), probe: () => deps.db.query("SELECT 1") });
  if (config.kv.driver !== "memory") {
    const variable = config.kv.driver === "upstash" ? "UPSTASH_REDIS_REST_URL" : "REDIS_URL";
    probes.push({ variable, host: hostOf(config.kv.url), probe: () => deps.kv.llen("processing_queue") });
  }
  // Each index at its documented health endpoint (Qdrant's /healthz, Typesense's /health), with its key as the documents ask.
  const { qdrant, typesense } = config;
  if (qdrant) probes.push(http("QDRANT_URL", `${qdrant.url.replace(/\/+$/, "")}/healthz`, qdrant.apiKey ? { "api-key": qdrant.apiKey } : {}));
  if (typesense) probes.push(http("TYPESENSE_URL", `${typesense.url.replace(/\/+$/, "")}/health`, { "x-typesense-api-key": typesense.apiKey }));
  if (config.llm.gatewayUrl) probes.push(http("LLM_GATEWAY_URL", config.llm.gatewayUrl));
  if (config.rerank) probes.push(http("RERANK_URL", config.rerank.url));
  return probes;
}

/**
 * One probe of every configured service at start, each one that does not answer named in one log
 * line (`dependency unreachable`, its variable and host), so that a start against a wrong address
 * says so at once rather than at the first request that needs it. Nothing fails on it: /health
 * stays a liveness probe with no dependency checks (SPEC: Endpoints), and a store that comes up
 * later is used when it does. Returns the variables of those unreachable.
 */
export async function checkDependencies(deps: Pick<Deps, "config" | "db" | "kv" | "logger">, timeoutMs = DEPENDENCY_PROBE_TIMEOUT_MS): Promise<string[]> {
  const results = await Promise.all(
    dependencyProbes(deps).map(async ({ variable, host, probe }) => {
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        await Promise.race([
          probe(signal),
          new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error(`no answer within ${timeoutMs} ms`)), { once: true })),
        ]);
        return undefined;
      } catch (err) {
        deps.logger.error("dependency unreachable", { variable, host, error: err instanceof Error ? err.message : String(err) });
        return variable;
      }
    }),
  );
  return results.filter((v): v is string => v !== undefined);
}
