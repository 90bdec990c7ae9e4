import { loadConfigOrExit, secretsOf } from "../config.ts";
import { createLogger } from "../log.ts";
import { createDatabase } from "./create.ts";
import { migrate } from "./migrate.ts";
import { usage } from "../cli-usage.ts";

if (process.argv.includes("--help")) {
  console.log(`${usage("migrate", "")}\n\nApplies pending migrations (common/contract/migrations) to the configured database: DATABASE_URL, or the embedded one under DATA_DIR.`);
  process.exit(0);
}

const config = loadConfigOrExit();
const db = await createDatabase(config.database, { logger: createLogger({ level: config.logLevel, secrets: secretsOf(config) }) });
try {
  const applied = await migrate(db);
  const where = config.database.driver === "pglite" ? config.database.dataDir : config.database.driver;
  if (applied.length === 0) console.log(`schema is up to date (${where})`);
  else for (const name of applied) console.log(`applied ${name} (${where})`);
} catch (err) {
  console.error(`migration failed: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  await db.close();
}
