import { mkdir } from "node:fs/promises";
import { Worker } from "node:worker_threads";
import { PGlite, type Transaction } from "@electric-sql/pglite";
import type { Database, Queryable, Row } from "./index.ts";
import { driverCall, encodeParams, runTransaction } from "./adapter-support.ts";
import { DatabaseError } from "./index.ts";
import { pgliteCreateOptions } from "./pglite-options.ts";
import type { ThreadAnswer, ThreadRequest } from "./pglite-thread.ts";

export interface PgliteDatabaseOptions {
  /** Folder holding the database files; omitted, the database lives in memory and dies with the process. */
  dataDir?: string;
  /**
   * Run Postgres in a worker thread. Every statement is CPU work (Postgres compiled to WASM), and on
   * the main thread it holds up everything else the process serves: under concurrent chats it was
   * close to half of the API's CPU time. The composition root turns this on; tests that open many
   * short-lived databases leave it off.
   */
  thread?: boolean;
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
  if (options.thread) return openInThread(options.dataDir);
  const pg = await driverCall(() =>
    PGlite.create(pgliteCreateOptions(options.dataDir)),
  );
  return {
    driver: "pglite",
    ...queryable(pg),
    transaction: (fn) => runTransaction((body) => pg.transaction((tx) => body(queryable(tx))), fn),
    close: () => driverCall(() => pg.close()),
  };
}

type Request = ThreadRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

/**
 * PGlite in a worker thread, behind the same Database interface. The worker answers requests in
 * order, as one connection would; a transaction holds that connection, so statements issued outside
 * it wait until it ends (as they do on PGlite's own connection).
 */
async function openInThread(dataDir: string | undefined): Promise<Database> {
  const worker = new Worker(new URL("./pglite-thread.ts", import.meta.url));
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>();
  let nextId = 0;
  // The worker keeps the process alive only while a request is waiting for it.
  worker.unref();
  worker.on("message", (answer: ThreadAnswer) => {
    const waiter = pending.get(answer.id);
    pending.delete(answer.id);
    if (pending.size === 0) worker.unref();
    if (answer.ok) waiter?.resolve(answer.value);
    else waiter?.reject(new DatabaseError(answer.error.message, answer.error.code, answer.error.sqlState));
  });
  worker.on("error", (err: Error) => {
    const error = new DatabaseError(`database thread failed: ${err.message}`, "connection", undefined, { cause: err });
    for (const waiter of pending.values()) waiter.reject(error);
    pending.clear();
  });
  const call = <T>(request: Request): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      if (pending.size === 0) worker.ref();
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      worker.postMessage({ ...request, id });
    });

  try {
    await call({ op: "open", dataDir });
  } catch (err) {
    await worker.terminate();
    throw err;
  }
  const connection: Queryable = {
    query: <R extends Row = Row>(text: string, params?: readonly unknown[]) => call<R[]>({ op: "query", text, params: encodeParams(params, { json: false }) }),
    exec: (sql: string) => call<void>({ op: "exec", sql }),
  };
  /** Settles when no transaction holds the connection. */
  let free: Promise<void> = Promise.resolve();
  const outside = async <T>(run: () => Promise<T>): Promise<T> => {
    await free;
    return run();
  };
  return {
    driver: "pglite",
    query: (text, params) => outside(() => connection.query(text, params)),
    exec: (sql) => outside(() => connection.exec(sql)),
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const previous = free;
      let release!: () => void;
      free = new Promise((resolve) => (release = resolve));
      await previous;
      try {
        return await runTransaction<Queryable, T>(async (body) => {
          await connection.exec("BEGIN");
          try {
            const result = await body(connection);
            await connection.exec("COMMIT");
            return result;
          } catch (err) {
            await connection.exec("ROLLBACK").catch(() => {});
            throw err;
          }
        }, fn);
      } finally {
        release();
      }
    },
    async close() {
      await outside(() => call({ op: "close" }));
      await worker.terminate();
    },
  };
}
