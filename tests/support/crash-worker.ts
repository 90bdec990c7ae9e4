// A real worker process for the fault tests: the project's composition root and startWorker, with the
// queue under FAULTS_QUEUE_PREFIX (so a shared Redis is safe), a short lease and a fast reaper, so that a
// job whose worker was killed is back on the queue within seconds. Stops on SIGTERM like `bun run worker`.
import { loadConfigOrExit } from "../../common/config.ts";
import { buildDeps } from "../../common/deps.ts";
import { queueKeys } from "../../common/queue.ts";
import { startWorker } from "../../ingest/jobs/queue-consumer.ts";
import { TEST_PIPELINE_OPTIONS } from "../fixtures/ingest/harness.ts";

const setting = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

const deps = await buildDeps(loadConfigOrExit());
const worker = startWorker(deps, {
  keys: queueKeys(`${process.env.FAULTS_QUEUE_PREFIX ?? ""}processing_queue`),
  visibilityTimeoutSeconds: setting("FAULTS_VISIBILITY_SECONDS", 2),
  claimGraceMs: setting("FAULTS_CLAIM_GRACE_MS", 300),
  reapIntervalMs: setting("FAULTS_REAP_INTERVAL_MS", 250),
  minPollMs: 20,
  maxPollMs: 200,
  pipeline: TEST_PIPELINE_OPTIONS,
});
process.stdout.write(`worker ready ${worker.id}\n`);
process.once("SIGTERM", async () => {
  await worker.stop();
  await deps.close();
  process.exit(0);
});
