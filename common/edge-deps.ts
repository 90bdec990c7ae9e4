import { secretsOf, type Config } from "./config.ts";
import { assembleDeps, type Deps } from "./deps-assembly.ts";
import { createNeonDatabase, type NeonConnections, type NeonDatabase } from "./db/neon.ts";
import { createUpstashKeyValueStore } from "./kv/upstash.ts";
import { createOpenAiLanguageModel } from "./llm/gateway.ts";
import { createLogger, type Logger } from "./log.ts";
import { createCatalogueMetrics } from "./metrics/catalogue.ts";
import { createTypesenseTextIndex } from "./text-index/typesense.ts";
import { createQdrantVectorIndex } from "./vector/qdrant.ts";

/**
 * The composition root of the API on an edge runtime (Deno, workerd): the production adapters only,
 * each over HTTP or a WebSocket. It imports none of the embedded defaults (PGlite, the in-process
 * store, the local indexes, the offline model) nor Bun's SQL and Redis clients, so an edge build
 * carries none of them; asking for one is a start-up error naming what to set.
 *
 * Nothing here does I/O: a Worker builds its app in global scope, where workerd allows no network
 * and no timers. Migrations are not applied from here: the ingest worker and `npm run migrate`
 * apply them (docs/operations.md).
 */

export class BunOnlyError extends Error {
  constructor(
    /** Every setting at fault, so that one start names them all. */
    readonly variables: readonly string[],
    message: string,
  ) {
    super(message);
    this.name = "BunOnlyError";
  }
}

/** What each embedded default needs on the edge; every one missing is named in one error, not one per start. */
function refuseEmbeddedDefaults(config: Config): void {
  const problems: { variable: string; message: string }[] = [];
  const refuse = (variable: string, message: string) => problems.push({ variable, message });
  if (config.database.driver === "pglite") refuse("DATABASE_URL", "DATABASE_URL is not set: the embedded database (PGlite) runs on Bun only; set a Postgres URL (Neon serverless driver; NEON_WS_PROXY for a Postgres that is not Neon)");
  if (config.database.driver === "postgres") refuse("DATABASE_DRIVER", "DATABASE_DRIVER=postgres (Bun's SQL client) runs on Bun only; use neon (NEON_WS_PROXY for a Postgres that is not Neon)");
  if (config.kv.driver === "memory") refuse("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN are not set: the in-process key-value store runs on Bun only");
  if (config.kv.driver === "redis") refuse("REDIS_URL", "REDIS_URL (Redis over TCP) runs on Bun only; set UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN");
  if (!config.qdrant) refuse("QDRANT_URL", "QDRANT_URL is not set: the embedded vector index runs on Bun only");
  if (!config.typesense) refuse("TYPESENSE_URL", "TYPESENSE_URL is not set: the embedded full-text index runs on Bun only");
  if (!config.llm.gatewayUrl) refuse("LLM_GATEWAY_URL", "LLM_GATEWAY_URL is not set: the offline provider runs on Bun only");
  if (config.playground) refuse("PLAYGROUND", "PLAYGROUND=on: the chat page runs on Bun only (npm start, npm run api)");
  if (problems.length === 0) return;
  const message =
    problems.length === 1 ? problems[0]!.message : `${problems.length} settings the edge needs:\n${problems.map((p) => `  - ${p.message}`).join("\n")}`;
  throw new BunOnlyError(
    problems.map((p) => p.variable),
    message,
  );
}

export interface EdgeBuildOptions {
  /** Where log lines go; the runtime's console by default (a Worker's logs, Deno's stdout). */
  write?: (line: string) => void;
  logger?: Logger;
  /** `per-request` on workerd, where a connection may serve only the request that opened it (common/db/neon.ts). */
  databaseConnections?: NeonConnections;
  /** Single statements over Neon's HTTP endpoint beside a shared pool (on Deno: NeonDatabaseOptions.statementsOverHttp). */
  statementsOverHttp?: boolean;
}

/** The edge's dependencies: the database can scope its connections to a request. */
export type EdgeDeps = Deps & { db: NeonDatabase };

/** The API's dependencies on an edge runtime; throws BunOnlyError when the configuration asks for an embedded default. */
export function buildEdgeDeps(config: Config, options: EdgeBuildOptions = {}): EdgeDeps {
  refuseEmbeddedDefaults(config);
  const { database, kv: kvConfig, qdrant, typesense } = config;
  const { gatewayUrl } = config.llm;
  if (database.driver !== "neon" || kvConfig.driver !== "upstash" || !qdrant || !typesense || !gatewayUrl) {
    throw new Error("unreachable: refuseEmbeddedDefaults checked the drivers");
  }
  const logger =
    options.logger ??
    createLogger({ level: config.logLevel, format: config.logFormat, secrets: secretsOf(config), write: options.write ?? ((line) => console.log(line)) });
  // One registry per isolate: what it counts is this isolate's share of the traffic (docs/operations.md).
  const metrics = createCatalogueMetrics({ roles: ["api"] });
  const db = createNeonDatabase({
    url: database.url,
    ...(database.wsProxy ? { wsProxy: database.wsProxy } : {}),
    ...(database.httpEndpoint ? { httpEndpoint: database.httpEndpoint } : {}),
    ...(options.databaseConnections ? { connections: options.databaseConnections } : {}),
    ...(options.statementsOverHttp ? { statementsOverHttp: true } : {}),
    logger,
  });
  return assembleDeps({
    config,
    logger,
    metrics,
    db,
    kv: createUpstashKeyValueStore({ url: kvConfig.url, token: kvConfig.token }),
    llm: (onUsage) =>
      createOpenAiLanguageModel({
        baseURL: gatewayUrl,
        ...(config.llm.apiKey ? { apiKey: config.llm.apiKey } : {}),
        chatModel: config.llm.chatModel,
        embedModel: config.llm.embedModel,
        onUsage,
      }),
    vectorIndex: createQdrantVectorIndex(qdrant),
    textIndex: createTypesenseTextIndex(typesense),
  });
}
