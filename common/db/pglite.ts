import { mkdir } from "node:fs/promises";
import { PGlite, type Transaction } from "@electric-sql/pglite";
import type { Database, Queryable, Row } from "./index.ts";
import { TYPE_PARSERS, driverCall, encodeParams, runTransaction } from "./adapter-support.ts";

export interface PgliteDatabaseOptions {
  /** Folder holding the database files; omitted, the database lives in memory and dies with the process. */
  dataDir?: string;
}

type PgliteQueryable = Pick<Transaction, "query" | "exec">;

function queryable(pg: PgliteQueryable): Queryable {
  return {
    query: <R extends Row = Row>(text: string, params?: readonly unknown[]) =>
      driverCall(async () => (await pg.query<R>(text, encodeParams(params, { json: false }))).rows),
    exec: (sql: string) =>
      driverCall(async () => {
        await pg.exec(sql);
      }),
  };
}

/**
 * Embedded Postgres (WASM), the default when no DATABASE_URL is set. One connection: queries and
 * transactions from the same process are serialised by PGlite itself. Opening a fresh data dir runs
 * initdb (seconds); reopening an existing one is much faster.
 */
export async function createPgliteDatabase(options: PgliteDatabaseOptions = {}): Promise<Database> {
  if (options.dataDir) await mkdir(options.dataDir, { recursive: true });
  const pg = await driverCall(() =>
    PGlite.create({ ...(options.dataDir ? { dataDir: options.dataDir } : {}), parsers: TYPE_PARSERS }),
  );
  return {
    driver: "pglite",
    ...queryable(pg),
    transaction: (fn) => runTransaction((body) => pg.transaction((tx) => body(queryable(tx))), fn),
    close: () => driverCall(() => pg.close()),
  };
}
