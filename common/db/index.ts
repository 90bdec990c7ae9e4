/**
 * Database port. Every adapter returns the same JavaScript types for the same SQL:
 * int8/numeric counts as numbers, timestamptz as Date, jsonb as parsed objects, uuid as string,
 * void (e.g. `SELECT pg_advisory_lock(...)`) as null.
 * Parameters use Postgres positional placeholders ($1, $2, ...). `undefined` binds as NULL. A plain
 * object or an array binds as JSON on every adapter, so bind it to a json/jsonb parameter; for a set
 * of values write `x IN (SELECT jsonb_array_elements_text($1))` rather than a Postgres array, which
 * the drivers encode differently. Never bind pre-serialised JSON text to a jsonb parameter: Bun's
 * client would store it as a JSON string.
 * Inside `transaction(fn)`, use only the `tx` that fn receives: PGlite has one connection, so a query
 * on the outer Database waits for the transaction to finish.
 */

export type Row = Record<string, unknown>;

export interface Queryable {
  /** One statement with positional parameters; returns the rows (empty for statements without RETURNING). */
  query<R extends Row = Row>(text: string, params?: readonly unknown[]): Promise<R[]>;
  /** One or more statements without parameters (migrations, DDL). */
  exec(sql: string): Promise<void>;
}

export interface Database extends Queryable {
  readonly driver: "pglite" | "postgres" | "neon";
  /** Runs fn in a transaction: committed when fn resolves, rolled back when it throws (the error is rethrown). */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export type DatabaseErrorCode =
  | "unique_violation"
  | "foreign_key_violation"
  | "check_violation"
  | "not_null_violation"
  | "invalid_input"
  | "connection"
  | "other";

const SQLSTATE_CODES: Record<string, DatabaseErrorCode> = {
  "23505": "unique_violation",
  "23503": "foreign_key_violation",
  "23514": "check_violation",
  "23502": "not_null_violation",
  "22P02": "invalid_input",
  "22007": "invalid_input",
  "22008": "invalid_input",
  "22023": "invalid_input",
};

/** The one error type adapters throw; `code` is stable across drivers, `sqlState` is Postgres's own. */
export class DatabaseError extends Error {
  constructor(
    message: string,
    readonly code: DatabaseErrorCode,
    readonly sqlState?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "DatabaseError";
  }

  /** Maps any driver error to a DatabaseError, reading the SQLSTATE wherever the driver keeps it. */
  static from(err: unknown): DatabaseError {
    if (err instanceof DatabaseError) return err;
    const e = (err ?? {}) as { code?: unknown; errno?: unknown; message?: unknown; sqlState?: unknown };
    const candidates = [e.code, e.errno, e.sqlState].filter((c): c is string => typeof c === "string");
    const sqlState = candidates.find((c) => /^[0-9A-Z]{5}$/.test(c));
    const message = typeof e.message === "string" ? e.message : String(err);
    if (sqlState) {
      // Class 08 is a broken connection; 57P01-57P03 are a server shutting down, crashed or starting up.
      const code = SQLSTATE_CODES[sqlState] ?? (sqlState.startsWith("08") || /^57P0[123]$/.test(sqlState) ? "connection" : "other");
      return new DatabaseError(message, code, sqlState, { cause: err });
    }
    const connection = /ECONNREFUSED|ECONNRESET|ENOTFOUND|closed|terminat|connect/i.test(message);
    return new DatabaseError(message, connection ? "connection" : "other", undefined, { cause: err });
  }
}
