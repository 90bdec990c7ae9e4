import { DatabaseError } from "./index.ts";

/**
 * What the adapters share so that the same SQL yields the same JavaScript values and errors: the
 * drivers disagree on int8 (number in PGlite, string in Bun SQL and node-postgres), numeric (string
 * everywhere) and void (empty string), and on how a JS array binds (JSON or a Postgres array).
 */

export const DEFAULT_POOL_SIZE = 10;
export const DEFAULT_CONNECT_TIMEOUT_SECONDS = 10;
export const DEFAULT_IDLE_TIMEOUT_SECONDS = 30;

/** Options of the adapters that keep a pool of connections to a Postgres server. */
export interface PoolOptions {
  url: string;
  /** Connections in the pool. */
  max?: number;
  connectTimeoutSeconds?: number;
  idleTimeoutSeconds?: number;
}

/** The pool options with the defaults filled in, so both pooled adapters size and time out alike. */
export function poolSettings(options: PoolOptions): Required<Omit<PoolOptions, "url">> {
  return {
    max: options.max ?? DEFAULT_POOL_SIZE,
    connectTimeoutSeconds: options.connectTimeoutSeconds ?? DEFAULT_CONNECT_TIMEOUT_SECONDS,
    idleTimeoutSeconds: options.idleTimeoutSeconds ?? DEFAULT_IDLE_TIMEOUT_SECONDS,
  };
}

const OID = { int8: 20, numeric: 1700, void: 2278 } as const;

/** Text-format parsers by type OID; numbers beyond 2^53 lose precision, which our counts never reach. */
export const TYPE_PARSERS: Readonly<Record<number, (text: string) => unknown>> = {
  [OID.int8]: Number,
  [OID.numeric]: Number,
  [OID.void]: () => null,
};

function isPlainObject(value: unknown): value is object {
  if (typeof value !== "object" || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * `undefined` becomes NULL; with `json: true` (drivers that do not look at parameter types),
 * arrays and plain objects become JSON text, which is what the type-aware drivers send for a jsonb
 * parameter anyway.
 */
export function encodeParams(params: readonly unknown[] | undefined, options: { json: boolean }): unknown[] {
  if (!params) return [];
  return params.map((p) => {
    if (p === undefined) return null;
    if (options.json && (Array.isArray(p) || isPlainObject(p))) return JSON.stringify(p);
    return p;
  });
}

/**
 * Bun SQL and node-postgres switch to the simple protocol when a query has no parameters, which runs
 * any number of statements and returns one result per statement; PGlite refuses. query() promises
 * rows of one statement, so the others refuse too (after the fact: use exec() for several).
 */
export function severalStatementsError(): DatabaseError {
  return new DatabaseError("query() runs one statement; use exec() for several", "invalid_input");
}

/** Awaits a driver call and rethrows anything it throws as a DatabaseError. */
export async function driverCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw DatabaseError.from(err);
  }
}

/**
 * Runs a driver's transaction so that an error thrown by the caller's fn comes back unchanged while
 * failures of the driver itself (BEGIN, COMMIT, a lost connection) come back as DatabaseError.
 */
export async function runTransaction<Tx, T>(
  begin: (body: (tx: Tx) => Promise<T>) => Promise<T>,
  fn: (tx: Tx) => Promise<T>,
): Promise<T> {
  let thrownByFn: { error: unknown } | undefined;
  try {
    return await begin(async (tx) => {
      try {
        return await fn(tx);
      } catch (error) {
        thrownByFn = { error };
        throw error;
      }
    });
  } catch (err) {
    if (thrownByFn && err === thrownByFn.error) throw err;
    throw DatabaseError.from(err);
  }
}
