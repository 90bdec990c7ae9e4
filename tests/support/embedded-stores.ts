import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import { createMemoryKeyValueStore, type MemoryKeyValueStore, type MemoryKeyValueStoreOptions } from "../../common/kv/memory.ts";

/** A migrated in-memory PGlite: the database of every in-process suite. */
export async function openEmbeddedDatabase(): Promise<Database> {
  const db = await createPgliteDatabase();
  await migrate(db);
  return db;
}

export interface EmbeddedStores {
  db: Database;
  kv: MemoryKeyValueStore;
  /** Closes the key-value store, then the database. */
  close(): Promise<void>;
}

/** A migrated PGlite and an in-process key-value store, as a laptop runs them. */
export async function openEmbeddedStores(kvOptions: MemoryKeyValueStoreOptions = {}): Promise<EmbeddedStores> {
  const db = await openEmbeddedDatabase();
  const kv = createMemoryKeyValueStore(kvOptions);
  return {
    db,
    kv,
    async close() {
      await kv.close();
      await db.close();
    },
  };
}
