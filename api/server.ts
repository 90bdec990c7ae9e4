// npm run api (bun run api): the HTTP API alone, without the ingest worker. See api/listen.ts for how it serves.

import { loadConfigOrExit } from "../common/config.ts";
import { buildDepsOrExit } from "../common/deps.ts";
import { checkDependencies } from "../common/deps-assembly.ts";
import { usage } from "../common/cli-usage.ts";
import { onStopSignals } from "../common/stop-signals.ts";
import { startApi } from "./listen.ts";

if (process.argv.includes("--help")) {
  console.log(`${usage("api", "")}\n\nThe HTTP API alone, on HOST:PORT (127.0.0.1:3000 unless set; a deployment sets HOST=0.0.0.0). PLAYGROUND=on adds the chat page.`);
  process.exit(0);
}
const config = loadConfigOrExit();
const deps = await buildDepsOrExit(config, { metricsRoles: ["api"] });
// The chat page is a local convenience: a deployment shows it only with PLAYGROUND=on.
const { server, settle } = startApi(deps, deps.config.playground ? { playground: {} } : {});
void checkDependencies(deps);
const stop = async () => {
  await server.stop();
  // Summary folds still running write to the database and the cache: let them finish first.
  await settle();
  await deps.close();
  process.exit(0);
};
onStopSignals(() => void stop());
