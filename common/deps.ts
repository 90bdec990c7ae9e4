import { join } from "node:path";
import { secretsOf, type Config } from "./config.ts";
import { createDatabase } from "./db/create.ts";
import type { Database } from "./db/index.ts";
import { migrate, MigrationError } from "./db/migrate.ts";
import { SchemaError } from "./contract/frontend-columns.ts";
import { createKeyValueStore } from "./kv/create.ts";
import type { KeyValueStore } from "./kv/index.ts";
import { createLanguageModel } from "./llm/create.ts";
import type { LanguageModel } from "./llm/index.ts";
import { createLogger, toStdout, type Logger } from "./log.ts";
import { listenAddress } from "./local/listen-address.ts";
import { createMetrics, type Metrics, type MetricsRole } from "./metrics/index.ts";
import { enableKvMetricsAggregation } from "./metrics/kv-aggregation.ts";
import { countTokens } from "./metrics/llm.ts";
import { createHttpReranker } from "./rerank/http.ts";
import { detectProcessingStatuses } from "./db/processing-status.ts";
import type { Reranker } from "./rerank/index.ts";
import { createEmbeddedTextIndex } from "./text-index/embedded.ts";
import type { TextIndex } from "./text-index/index.ts";
import { createTypesenseTextIndex } from "./text-index/typesense.ts";
import { createEmbeddedVectorIndex } from "./vector/embedded.ts";
import type { VectorIndex } from "./vector/index.ts";
import { createQdrantVectorIndex } from "./vector/qdrant.ts";

/**
 * The composition root: reads the typed config once and builds every adapter. The API, the worker
 * and the CLIs take what they need from here; nothing else chooses an adapter.
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
  reranker: Reranker | undefined;
  close(): Promise<void>;
}

export interface BuildOptions {
  logger?: Logger;
  metrics?: Metrics;
  /** Whose metrics the process exposes (see common/metrics/index.ts); both roles unless it runs only one. */
  metricsRoles?: readonly MetricsRole[];
}

/**
 * buildDeps for an entry point: a database the backend cannot work with (a frontend table without a
 * column it needs, a failed migration) stops the process with one line, like a bad configuration.
 */
export async function buildDepsOrExit(config: Config, options: BuildOptions = {}): Promise<Deps> {
  try {
    return await buildDeps(config, options);
  } catch (err) {
    if (err instanceof SchemaError || err instanceof MigrationError) {
      console.error(`database schema error: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
}

export async function buildDeps(config: Config, options: BuildOptions = {}): Promise<Deps> {
  const logger = options.logger ?? createLogger({ level: config.logLevel, format: config.logFormat, secrets: secretsOf(config), write: toStdout });
  const metrics = options.metrics ?? createMetrics(options.metricsRoles ? { roles: options.metricsRoles } : {});

  const db = await createDatabase(config.database, { logger });
  const applied = await migrate(db);
  if (applied.length > 0) logger.info("migrations applied", { migrations: applied });
  await detectProcessingStatuses(db, logger);

  // The embedded database on a loopback address is a laptop's install, where the in-process store and
  // the offline provider are the expected defaults: noted in the log, not warned about on every command.
  // Anywhere else (a shared database, or HOST opened to the network) they are a deployment's mistake.
  const localDefaults = config.database.driver === "pglite" && !listenAddress(config.host, config.port).network;
  const kv = createKeyValueStore(config.kv, logger, { inProcessExpected: localDefaults });
  if (config.metricsAggregation) enableKvMetricsAggregation(metrics, kv, { ...config.metricsAggregation, logger });
  const llm = createLanguageModel(config.llm, {
    onUsage: (purpose, usage) => countTokens(metrics, purpose, usage.promptTokens, usage.completionTokens),
  });
  const vectorIndex = config.qdrant
    ? createQdrantVectorIndex(config.qdrant)
    : createEmbeddedVectorIndex({ dir: join(config.dataDir, "vectors") });
  const textIndex = config.typesense
    ? createTypesenseTextIndex(config.typesense)
    : createEmbeddedTextIndex({ dir: join(config.dataDir, "text") });
  const reranker = config.rerank ? createHttpReranker(config.rerank) : undefined;

  logger.info("components", {
    database: db.driver,
    kv: kv.driver,
    llm: llm.provider,
    vector_index: vectorIndex.adapter,
    text_index: textIndex.adapter,
    reranker: reranker ? "http" : "rank fusion",
  });
  if (llm.provider === "offline") logger[localDefaults ? "info" : "warn"]("LLM gateway not configured: offline provider (deterministic, no model)");

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
    async close() {
      // The last requests' series reach the store before it closes.
      await metrics.aggregation?.close();
      await Promise.allSettled([kv.close(), vectorIndex.close?.(), textIndex.close?.()]);
      await db.close();
    },
  };
}
