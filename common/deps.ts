import { join } from "node:path";
import { secretsOf, type Config } from "./config.ts";
import { createDatabase } from "./db/create.ts";
import { assembleDeps, type Deps } from "./deps-assembly.ts";
import { migrate, MigrationError } from "./db/migrate.ts";
import { SchemaError } from "./contract/frontend-columns.ts";
import { createKeyValueStore } from "./kv/create.ts";
import { createLanguageModel } from "./llm/create.ts";
import { createLogger, toStdout, type Logger } from "./log.ts";
import { listenAddress } from "./listen-address.ts";
import { createMetrics, type Metrics, type MetricsRole } from "./metrics/index.ts";
import { detectProcessingStatuses } from "./db/processing-status.ts";
import { createEmbeddedTextIndex } from "./text-index/embedded.ts";
import { createTypesenseTextIndex } from "./text-index/typesense.ts";
import { createEmbeddedVectorIndex } from "./vector/embedded.ts";
import { createQdrantVectorIndex } from "./vector/qdrant.ts";

/**
 * The composition root: reads the typed config once and builds every adapter. The API, the worker
 * and the CLIs take what they need from here; nothing else chooses an adapter.
 */
export type { Deps } from "./deps-assembly.ts";

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
  const deps = assembleDeps({
    config,
    logger,
    metrics,
    db,
    kv,
    llm: (onUsage) => createLanguageModel(config.llm, { onUsage }),
    vectorIndex: config.qdrant ? createQdrantVectorIndex(config.qdrant) : createEmbeddedVectorIndex({ dir: join(config.dataDir, "vectors") }),
    textIndex: config.typesense ? createTypesenseTextIndex(config.typesense) : createEmbeddedTextIndex({ dir: join(config.dataDir, "text") }),
  });
  if (deps.llm.provider === "offline") logger[localDefaults ? "info" : "warn"]("LLM gateway not configured: offline provider (deterministic, no model)");
  return deps;
}
