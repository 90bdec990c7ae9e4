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
