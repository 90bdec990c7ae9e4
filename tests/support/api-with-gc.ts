// The API server process exactly as `bun run api` starts it, plus one thing for bench/load.ts: on
// SIGUSR2 it runs a full garbage collection and appends the live heap to $DATA_DIR/heap.jsonl, so
// memory can be compared over a run without the noise of when the collector happens to run.
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { heapStats } from "bun:jsc";
import { startApi } from "../../api/listen.ts";
import { loadConfigOrExit } from "../../common/config.ts";
import { buildDeps } from "../../common/deps.ts";

const config = loadConfigOrExit();
const deps = await buildDeps(config);
const { server, settle } = startApi(deps);
process.on("SIGUSR2", () => {
  Bun.gc(true);
  const stats = heapStats();
  appendFileSync(join(config.dataDir, "heap.jsonl"), `${JSON.stringify({ at: Date.now(), heapBytes: stats.heapSize, objects: stats.objectCount })}\n`);
});
process.once("SIGTERM", async () => {
  await server.stop();
  await settle();
  await deps.close();
  process.exit(0);
});
