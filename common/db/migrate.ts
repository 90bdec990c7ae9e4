import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Database, Queryable } from "./index.ts";
import { findSchemaProblem, FRONTEND_COLUMNS, SchemaError } from "../contract/frontend-columns.ts";

export const MIGRATIONS_DIR = fileURLToPath(new URL("../contract/migrations/", import.meta.url));

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/**
 * Every process that migrates takes this transaction-scoped advisory lock first, so when the API and
 * workers start together one applies a migration and the others wait, then see it recorded.
 */
const LOCK = "SELECT pg_advisory_xact_lock(hashtext('backend_schema_migrations'))";

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS backend_schema_migrations (
  version    text PRIMARY KEY,
  name       text NOT NULL,
  checksum   text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)`;

export interface Migration {
  version: string;
  /** The file name, e.g. `0001_initial.sql`. */
  name: string;
  sql: string;
  checksum: string;
}

export class MigrationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "MigrationError";
  }
}

/** Reads `NNNN_name.sql` files in version order; other files in the folder are ignored. */
export async function readMigrations(directory: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const names = (await readdir(directory)).filter((n) => FILE_NAME.test(n)).sort();
  const migrations: Migration[] = [];
  for (const name of names) {
    const version = FILE_NAME.exec(name)![1]!;
    if (migrations.some((m) => m.version === version)) {
      throw new MigrationError(`two migrations share version ${version}: ${name}`);
    }
    const sql = await readFile(join(directory, name), "utf8");
    migrations.push({ version, name, sql, checksum: createHash("sha256").update(sql).digest("hex") });
  }
  return migrations;
}

async function appliedChecksums(tx: Queryable): Promise<Map<string, string>> {
  await tx.query(LOCK);
  await tx.exec(CREATE_TABLE);
  const rows = await tx.query<{ version: string; checksum: string }>("SELECT version, checksum FROM backend_schema_migrations");
  return new Map(rows.map((r) => [r.version, r.checksum]));
}

/**
 * Applies the migrations not yet recorded in backend_schema_migrations, in version order, each in its own
 * transaction together with its record. Returns the names of the files it applied (empty when the
 * schema is current). A recorded migration whose file has changed since is an error: the database
 * no longer matches the code. Then checks the frontend's tables for the columns the backend needs
 * (SchemaError, one line, when one is missing).
 */
export async function migrate(db: Database, options: { directory?: string } = {}): Promise<string[]> {
  const migrations = await readMigrations(options.directory);
  const applied: string[] = [];
  const known = await db.transaction(appliedChecksums);
  for (const migration of migrations) {
    if (known.has(migration.version)) {
      if (known.get(migration.version) !== migration.checksum) {
        throw new MigrationError(`migration ${migration.name} was changed after it was applied`);
      }
      continue;
    }
    const ran = await db.transaction(async (tx) => {
      // Another process may have applied it while this one waited for the lock.
      if ((await appliedChecksums(tx)).has(migration.version)) return false;
      try {
        await tx.exec(migration.sql);
      } catch (err) {
        throw new MigrationError(`migration ${migration.name} failed: ${(err as Error).message}`, { cause: err });
      }
      await tx.query("INSERT INTO backend_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)", [
        migration.version,
        migration.name,
        migration.checksum,
      ]);
      return true;
    });
    if (ran) applied.push(migration.name);
  }
  await checkSharedSchema(db);
  return applied;
}

/** Reads the catalogue of the current schema and throws SchemaError (one line) when a needed column is missing or incompatible. */
export async function checkSharedSchema(db: Queryable): Promise<void> {
  const rows = await db.query<{ table_name: string; column_name: string; data_type: string; udt_name: string; labels: string[] | null }>(
    `SELECT c.table_name, c.column_name, c.data_type, c.udt_name,
            (SELECT jsonb_agg(e.enumlabel ORDER BY e.enumsortorder)
               FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid
              WHERE t.typname = c.udt_name) AS labels
       FROM information_schema.columns c
      WHERE c.table_schema = current_schema()
        AND c.table_name IN (SELECT jsonb_object_keys($1::jsonb))`,
    [FRONTEND_COLUMNS],
  );
  const problem = findSchemaProblem(
    rows.map((r) => ({ table: r.table_name, column: r.column_name, dataType: r.data_type, udtName: r.udt_name, enumLabels: r.labels })),
  );
  if (problem) throw new SchemaError(problem);
}
