import { AsyncLocalStorage } from "node:async_hooks";
import { Client, type ClientConfig, neon, neonConfig, Pool, type PoolClient, types } from "@neondatabase/serverless";
import { type Logger, silentLogger } from "../log.ts";
import type { Database, Queryable, Row } from "./index.ts";
import {
  type PoolOptions,
  TYPE_PARSERS,
  driverCall,
  encodeParams,
  poolSettings,
  runTransaction,
  severalStatementsError,
} from "./adapter-support.ts";

export interface NeonDatabaseOptions extends PoolOptions {
  /**
   * WebSocket-to-TCP proxy for a Postgres that is not Neon, as `host:port[/path]`; `ws://` (the default)
   * or `wss://` in front picks the scheme. Omitted, the driver talks to Neon's own endpoint.
   */
  wsProxy?: string;
  /** Where errors of idle pooled connections go (e.g. the server restarted). */
  logger?: Logger;
  /**
   * `shared` (the default): one pool for the process. `per-request`, for workerd, where a WebSocket
   * may only be used by the request that opened it: a single statement (`query`) is one HTTP request
   * to Neon's SQL endpoint, with no connection to open (see httpEndpoint); transactions and `exec`
   * made inside a scope (`openScope`) share that scope's connections, closed when it ends; outside
   * any scope they get a connection of their own.
   */
  connections?: NeonConnections;
  /**
   * Neon's HTTP SQL endpoint for `per-request` single statements: by default Neon's own (`https://api.{host}/sql`),
   * unless `wsProxy` is set without this, in which case (a Postgres that is not Neon, behind a WebSocket
   * proxy only) every statement goes over a WebSocket.
   */
  httpEndpoint?: string;
  /**
   * With `shared` connections, single statements over the HTTP endpoint all the same (transactions
   * keep the pool): for Deno, whose WebSocket client holds back a message of more than about 1 KB
   * for some 40 ms (measured: a statement of 1,200 characters takes 45-60 ms more than one of 800,
   * to the same bridge; Bun's client does not), where a fetch is not held back. Needs an HTTP
   * endpoint: Neon's own, or `httpEndpoint` for a Postgres behind a proxy.
   */
  statementsOverHttp?: boolean;
}

export type NeonConnections = "shared" | "per-request";

/** One request's share of the database: what `run` starts queries on the scope's connections. */
export interface DatabaseScope {
  run<T>(fn: () => T): T;
  /** Closes the scope's connections; a query the scope's work makes afterwards gets one of its own. */
  end(): Promise<void>;
}

export interface NeonDatabase extends Database {
  /** A scope for one request (with `connections: "per-request"`; with a shared pool, `run` just runs). */
  openScope(): DatabaseScope;
}

type NeonQueryable = Pick<PoolClient, "query">;

/**
 * The HTTP endpoints configured per database host. The driver asks one process-wide function for a
 * host's endpoint; it answers from here, else as the driver would have.
 */
const httpEndpoints = new Map<string, string>();
function routeHttpEndpoint(url: string, endpoint: string): void {
  const { hostname, port } = new URL(url);
  const first = httpEndpoints.size === 0;
  httpEndpoints.set(`${hostname}:${port}`, endpoint);
  if (!first) return;
  const fallback = neonConfig.fetchEndpoint;
  neonConfig.fetchEndpoint = (host, hostPort, options) =>
    httpEndpoints.get(`${host}:${hostPort}`) ?? (typeof fallback === "function" ? fallback(host, hostPort, options) : fallback);
}

/** One statement over HTTP: no connection to open, which on workerd would be every request's. */
function httpQueryable(url: string): Pick<Queryable, "query"> {
  const sql = neon(url, { fullResults: true });
  const typeOptions = { getTypeParser: (id: number, format?: "text" | "binary") => TYPE_PARSERS[id] ?? types.getTypeParser(id, format) };
  return {
    query: <R extends Row = Row>(text: string, params?: readonly unknown[]) =>
      driverCall(async () => (await sql.query(text, encodeParams(params, { json: true }) as unknown[], { fullResults: true, types: typeOptions })).rows as R[]),
  };
}

function queryable(target: NeonQueryable): Queryable {
  return {
    query: <R extends Row = Row>(text: string, params?: readonly unknown[]) =>
      driverCall(async () => {
        // node-postgres does not look at parameter types, so arrays are sent as JSON here explicitly.
        const result: unknown = await target.query<R>(text, encodeParams(params, { json: true }));
        if (Array.isArray(result)) throw severalStatementsError();
        return (result as { rows: R[] }).rows;
      }),
    exec: (sql: string) =>
      driverCall(async () => {
        await target.query(sql);
      }),
  };
}

/**
 * A Pool whose connections go through the given proxy. The settings live on each connection rather
 * than on the process-wide neonConfig, so two pools with different proxies can coexist.
 */
function proxiedPool(wsProxy: string): typeof Pool {
  const secure = wsProxy.startsWith("wss://");
  const address = wsProxy.replace(/^wss?:\/\//, "");
  class ProxiedClient extends Client {
    constructor(config?: string | ClientConfig) {
      super(config);
      const socket = this.neonConfig;
      socket.wsProxy = address;
      socket.useSecureWebSocket = secure;
      // Neon's endpoint accepts a pipelined start-up; a plain Postgres behind a proxy does not.
      socket.pipelineConnect = false;
      socket.pipelineTLS = false;
    }
  }
  return class ProxiedPool extends Pool {
    override Client = ProxiedClient;
  };
}

/** The connections of one request's scope, opened on its first query. */
interface Scope {
  pool?: Pool;
  ended: boolean;
}

/** Postgres through Neon's serverless driver: node-postgres over a WebSocket. */
export function createNeonDatabase(options: NeonDatabaseOptions): NeonDatabase {
  const PoolClass = options.wsProxy ? proxiedPool(options.wsProxy) : Pool;
  const settings = poolSettings(options);
  // Without a listener, an idle connection dropped by the server would crash the process.
  const logger = options.logger ?? silentLogger;
  const newPool = (max = settings.max) => {
    const pool = new PoolClass({
      connectionString: options.url,
      max,
      connectionTimeoutMillis: settings.connectTimeoutSeconds * 1000,
      idleTimeoutMillis: settings.idleTimeoutSeconds * 1000,
      types: {
        getTypeParser: (id: number, format?: "text" | "binary") => TYPE_PARSERS[id] ?? types.getTypeParser(id, format),
      },
    });
    pool.on("error", (err: unknown) => logger.warn("idle database connection failed", { err }));
    return pool;
  };
  const endPool = (pool: Pool) => pool.end().catch((err: unknown) => logger.warn("closing database connections failed", { err }));

  const shared = options.connections === "per-request" ? undefined : newPool();
  const overHttp = (!shared || options.statementsOverHttp === true) && (options.httpEndpoint !== undefined || !options.wsProxy);
  if (overHttp && options.httpEndpoint !== undefined) routeHttpEndpoint(options.url, options.httpEndpoint);
  const http = overHttp ? httpQueryable(options.url) : undefined;
  const scopes = new AsyncLocalStorage<Scope>();
  /** Runs fn on the pool the caller may use: the process's, its request scope's, or one of its own. */
  async function withPool<T>(fn: (pool: Pool) => Promise<T>): Promise<T> {
    if (shared) return fn(shared);
    const scope = scopes.getStore();
    if (scope && !scope.ended) return fn((scope.pool ??= newPool()));
    const own = newPool(1);
    try {
      return await fn(own);
    } finally {
      await endPool(own);
    }
  }

  return {
    driver: "neon",
    query: (text, params) => (http ? http.query(text, params) : withPool((pool) => queryable(pool).query(text, params))),
    exec: (sql) => withPool((pool) => queryable(pool).exec(sql)),
    transaction: (fn) =>
      withPool((pool) =>
        runTransaction(async (body) => {
          const client = await pool.connect();
          let healthy = true;
          try {
            await client.query("BEGIN");
            const result = await body(queryable(client));
            await client.query("COMMIT");
            return result;
          } catch (err) {
            await client.query("ROLLBACK").catch(() => {
              healthy = false;
            });
            throw err;
          } finally {
            // A connection that could not roll back is in an unknown state: destroy it.
            client.release(!healthy);
          }
        }, fn),
      ),
    openScope() {
      if (shared) return { run: (fn) => fn(), end: async () => {} };
      const scope: Scope = { ended: false };
      return {
        run: (fn) => scopes.run(scope, fn),
        async end() {
          scope.ended = true;
          const pool = scope.pool;
          scope.pool = undefined;
          if (pool) await endPool(pool);
        },
      };
    },
    close: async () => {
      if (shared) await driverCall(() => shared.end());
    },
  };
}
