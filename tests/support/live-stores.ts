import { createDatabase } from "../../common/db/create.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { createTestDatabase } from "./postgres.ts";
import { deleteKeysWithPrefix, uniqueKeyPrefix } from "./redis.ts";

export interface LiveStores {
  /** The throwaway database, for processes the test starts. */
  dbUrl: string;
  db: Database;
  kv: KeyValueStore;
  /** Every key the test writes goes under it, so close() can remove them. */
  prefix: string;
  /** Closes both clients, deletes the keys under the prefix and drops the database. */
  close(): Promise<void>;
}

/**
 * A migrated throwaway database on the live Postgres and a Redis client with a fresh key prefix, for
 * one test on the production stores; nothing of it outlives close().
 */
export async function openLiveStores(suite: string, postgresUrl: string, redisUrl: string): Promise<LiveStores> {
  const testDb = await createTestDatabase(postgresUrl);
  const db = await createDatabase({ driver: "postgres", url: testDb.url });
  const prefix = uniqueKeyPrefix(suite);
  const kv = createRedisKeyValueStore({ url: redisUrl });
  const close = async () => {
    await kv.close();
    await db.close();
    await deleteKeysWithPrefix(prefix, redisUrl);
    await testDb.drop();
  };
  try {
    await migrate(db);
  } catch (err) {
    await close();
    throw err;
  }
  return { dbUrl: testDb.url, db, kv, prefix, close };
}
