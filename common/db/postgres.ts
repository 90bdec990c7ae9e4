import { SQL } from "bun";
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

type Rows<R> = R[] & { columns?: readonly SQL.ResultColumn[] | null };

/** Bun's client has no per-type parsers: it hands int8/numeric/void over as text, fixed up here by column OID. */
function normaliseRows<R extends Row>(result: Rows<R>): R[] {
  if (Array.isArray(result[0])) throw severalStatementsError();
  const fix = (result.columns ?? []).flatMap((c) => {
    const parse = TYPE_PARSERS[c.type];
    return parse ? [{ name: c.name, parse }] : [];
  });
  if (fix.length === 0) return Array.from(result);
  return result.map((row) => {
    const out: Row = { ...row };
    for (const { name, parse } of fix) {
      const value = out[name];
      if (typeof value === "string") out[name] = parse(value);
    }
    return out as R;
  });
}

function queryable(sql: SQL): Queryable {
  return {
    query: <R extends Row = Row>(text: string, params?: readonly unknown[]) =>
      driverCall(async () => normaliseRows<R>(await sql.unsafe<Rows<R>>(text, encodeParams(params, { json: false })))),
    exec: (text: string) =>
      driverCall(async () => {
        // The simple protocol is the one that accepts several statements in one string.
        await sql.unsafe(text).simple();
      }),
  };
}

/** Plain Postgres over TCP through Bun's built-in client, with a connection pool. */
export function createPostgresDatabase(options: PoolOptions): Database {
  const settings = poolSettings(options);
  const sql = new SQL({
    url: options.url,
    max: settings.max,
    connectionTimeout: settings.connectTimeoutSeconds,
    idleTimeout: settings.idleTimeoutSeconds,
  });
  return {
    driver: "postgres",
    ...queryable(sql),
    transaction: (fn) => runTransaction((body) => sql.begin((tx) => body(queryable(tx))), fn),
    close: () => driverCall(() => sql.close()),
  };
}
