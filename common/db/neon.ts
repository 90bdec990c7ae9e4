import { Client, type ClientConfig, Pool, type PoolClient, types } from "@neondatabase/serverless";
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
}

type NeonQueryable = Pick<PoolClient, "query">;

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

/** Postgres through Neon's serverless driver: node-postgres over a WebSocket. */
export function createNeonDatabase(options: NeonDatabaseOptions): Database {
  const PoolClass = options.wsProxy ? proxiedPool(options.wsProxy) : Pool;
  const settings = poolSettings(options);
  const pool = new PoolClass({
    connectionString: options.url,
    max: settings.max,
    connectionTimeoutMillis: settings.connectTimeoutSeconds * 1000,
    idleTimeoutMillis: settings.idleTimeoutSeconds * 1000,
    types: {
      getTypeParser: (id: number, format?: "text" | "binary") => TYPE_PARSERS[id] ?? types.getTypeParser(id, format),
    },
  });
  // Without a listener, an idle connection dropped by the server would crash the process.
  const logger = options.logger ?? silentLogger;
  pool.on("error", (err: unknown) => logger.warn("idle database connection failed", { err }));

  return {
    driver: "neon",
    ...queryable(pool),
    transaction: (fn) =>
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
    close: () => driverCall(() => pool.end()),
  };
}
