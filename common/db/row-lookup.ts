import type { Camelize } from "../contract/rows.ts";
import type { Queryable, Row } from "./index.ts";

/**
 * What every table's module (books.ts, characters.ts, sessions.ts, …) shares: rows come back in
 * camelCase through `camelize`, and an id that is not a UUID finds nothing. Functions that need a
 * transaction take a Database; the rest take any Queryable, so they can also run inside someone
 * else's transaction.
 */

/** Column names are few and repeat on every row: each is converted once. */
const camelKeys = new Map<string, string>();

export function camelize<T extends Row>(row: T): Camelize<T> {
  const out: Row = {};
  for (const key of Object.keys(row)) {
    let camel = camelKeys.get(key);
    if (camel === undefined) {
      camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
      camelKeys.set(key, camel);
    }
    out[camel] = (row as Row)[key];
  }
  return out as Camelize<T>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A malformed id names no row; answering "not found" spares callers a database error for user input. */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}

export async function findById<T extends Row>(db: Queryable, table: string, columns: string, id: string): Promise<Camelize<T> | null> {
  if (!isUuid(id)) return null;
  const [row] = await db.query<T>(`SELECT ${columns} FROM ${table} WHERE id = $1`, [id]);
  return row ? camelize(row) : null;
}
