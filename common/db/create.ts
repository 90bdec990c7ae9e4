import type { DatabaseConfig } from "../config.ts";
import type { Logger } from "../log.ts";
import type { Database } from "./index.ts";

/**
 * Opens the database the configuration names; PGlite when no DATABASE_URL is set. Drivers are
 * imported on demand so a process loads only the one it uses.
 */
export async function createDatabase(config: DatabaseConfig, options: { logger?: Logger } = {}): Promise<Database> {
  switch (config.driver) {
    case "pglite": {
      const { createPgliteDatabase } = await import("./pglite.ts");
      return createPgliteDatabase({ dataDir: config.dataDir, thread: true });
    }
    case "postgres": {
      const { createPostgresDatabase } = await import("./postgres.ts");
      return createPostgresDatabase({ url: config.url });
    }
    case "neon": {
      const { createNeonDatabase } = await import("./neon.ts");
      return createNeonDatabase({
        url: config.url,
        ...(config.wsProxy ? { wsProxy: config.wsProxy } : {}),
        ...(options.logger ? { logger: options.logger } : {}),
      });
    }
  }
}
