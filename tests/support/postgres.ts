import { SQL } from "bun";
import { redactedUrl } from "./redis.ts";

/**
 * Live Postgres for test suites: where it is, whether it answers, and a throwaway database per
 * suite so suites running at the same time (or an earlier run that crashed) never see each other.
 */

/** DATABASE_URL_TEST points the live suites at another server; otherwise the CI defaults are tried in turn. */
export const DEFAULT_TEST_POSTGRES_URLS = ["postgres://postgres@127.0.0.1:5432/test", "postgres://root@127.0.0.1:5432/test"];
const TEST_DATABASE_PREFIX = "bcc_test_";
/** Throwaway databases older than this belong to a run that died before dropping them. */
const STALE_AFTER_MS = 60 * 60 * 1000;

export type PostgresProbe = { reachable: true; url: string } | { reachable: false; reason: string };

async function withAdmin<T>(url: string, use: (sql: SQL) => Promise<T>): Promise<T> {
  const sql = new SQL({ url, max: 1, connectionTimeout: 2 });
  try {
    return await use(sql);
  } finally {
    await sql.close();
  }
}

let probe: Promise<PostgresProbe> | undefined;

/** The first candidate URL whose server answers and lets us create databases; memoised per process. */
export function probePostgres(): Promise<PostgresProbe> {
  probe ??= (async () => {
    const candidates = process.env.DATABASE_URL_TEST ? [process.env.DATABASE_URL_TEST] : DEFAULT_TEST_POSTGRES_URLS;
    const failures: string[] = [];
    for (const url of candidates) {
      try {
        const [row] = await withAdmin(url, (sql) =>
          sql.unsafe("SELECT rolcreatedb OR rolsuper AS can_create FROM pg_roles WHERE rolname = current_user"),
        );
        if (row?.can_create) return { reachable: true, url };
        failures.push(`${redactedUrl(url)} (role may not create databases)`);
      } catch (err) {
        failures.push(`${redactedUrl(url)} (${err instanceof Error ? err.message : String(err)})`);
      }
    }
    return { reachable: false, reason: `no usable Postgres: ${failures.join("; ")}` };
  })();
  return probe;
}

export interface TestDatabase {
  /** URL of the new, empty database. */
  url: string;
  /** Drops it, disconnecting whoever is still connected. */
  drop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Creates an empty database on the server at adminUrl, after dropping stale ones left by crashed runs. */
export async function createTestDatabase(adminUrl: string): Promise<TestDatabase> {
  const name = `${TEST_DATABASE_PREFIX}${Date.now()}_${crypto.randomUUID().slice(0, 8)}`;
  await withAdmin(adminUrl, async (sql) => {
    const existing = await sql.unsafe<{ datname: string }[]>("SELECT datname FROM pg_database WHERE datname LIKE $1", [
      `${TEST_DATABASE_PREFIX}%`,
    ]);
    for (const { datname } of existing) {
      const createdAt = Number(datname.slice(TEST_DATABASE_PREFIX.length).split("_")[0]);
      if (Date.now() - createdAt > STALE_AFTER_MS) await sql.unsafe(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    }
    await sql.unsafe(`CREATE DATABASE "${name}"`);
  });
  return {
    url: withDatabase(adminUrl, name),
    drop: () => withAdmin(adminUrl, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => {}),
  };
}
