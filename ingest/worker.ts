// npm run worker (bun run worker; the ingest image's command): the ingest worker alone, with its
// /metrics and /health endpoint. The queue consumer is ingest/jobs/queue-consumer.ts.

import { loadConfigOrExit } from "../common/config.ts";
import { buildDepsOrExit } from "../common/deps.ts";
import { checkDependencies } from "../common/deps-assembly.ts";
import { usage } from "../common/cli-usage.ts";
import { onStopSignals } from "../common/stop-signals.ts";
import { startWorker } from "./jobs/queue-consumer.ts";
import { serveWorkerMetrics } from "./jobs/worker-endpoint.ts";

if (process.argv.includes("--help")) {
  console.log(`${usage("worker", "")}\n\nThe ingest worker alone: takes books from the queue (REDIS_URL or UPSTASH_*), serves /metrics and /health on HOST:METRICS_PORT.`);
  process.exit(0);
}
const config = loadConfigOrExit();
const deps = await buildDepsOrExit(config, { metricsRoles: ["worker"] });
if (deps.kv.driver === "memory") {
  deps.logger.warn("the worker runs alone on the in-process key-value store: it cannot see jobs queued by the API; set REDIS_URL or UPSTASH_REDIS_REST_URL");
}
const worker = startWorker(deps);
void checkDependencies(deps);
const server = serveWorkerMetrics(deps, worker, { port: config.metricsPort, host: config.host });
const shutdown = async (signal: string) => {
  deps.logger.info("shutting down", { signal });
  await worker.stop();
  await server.stop();
  await deps.close();
  process.exit(0);
};
onStopSignals((signal) => void shutdown(signal));
