import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { CONFIG_VARIABLES, loadConfig } from "../../common/config.ts";
import { DEFAULT_METRICS_PORT } from "../../common/config-defaults.ts";
import { silentLogger } from "../../common/log.ts";
import { createMetrics } from "../../common/metrics/index.ts";
import { DEFAULT_VISIBILITY_TIMEOUT_SECONDS, PROCESSING_QUEUE, queueKeys } from "../../common/queue.ts";
import { DEFAULT_MAX_SILENCE_MS, RENEWALS_PER_LEASE } from "../../ingest/jobs/lease-keeper.ts";
import { DEFAULT_SHUTDOWN_GRACE_MS, DEFAULT_WORKER_CONCURRENCY, type WorkerHandle } from "../../ingest/jobs/queue-consumer.ts";
import { serveWorkerMetrics } from "../../ingest/jobs/worker-endpoint.ts";
import { buildKustomization, DEPLOY_DIR, find, uncommentedExampleSecret, type Manifest } from "../support/deploy-manifests.ts";

/**
 * What the manifests under deploy/ say about the code agrees with the code: the ports the processes
 * listen on and the paths they answer, the worker's shutdown grace against the pod's, the liveness
 * probe against the worker's own idea of a stuck main thread, the queue's keys, and every variable
 * set being one the configuration reads. Each figure is read from the code's own constants, so a
 * change on either side fails here.
 */

interface Probe {
  httpGet: { path: string; port: string | number };
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
}
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
}
interface Container {
  name: string;
  image: string;
  ports: { name: string; containerPort: number }[];
  env: EnvVar[];
  startupProbe?: Probe;
  livenessProbe: Probe;
  readinessProbe: Probe;
}
interface PodTemplate {
  metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
  spec: { terminationGracePeriodSeconds: number; containers: Container[] };
}

const manifests = buildKustomization();
const template = (name: string) => (find(manifests, "Deployment", name).spec as { template: PodTemplate }).template;
const container = (name: string) => template(name).spec.containers[0]!;
const env = (c: Container) => Object.fromEntries(c.env.map((e) => [e.name, e]));
const portOf = (c: Container, port: string | number) => (typeof port === "number" ? port : c.ports.find((p) => p.name === port)?.containerPort);
const probes = (c: Container) => [c.startupProbe, c.livenessProbe, c.readinessProbe].filter((p): p is Probe => p !== undefined);
/** How long a probe tolerates no answer before it acts, in ms. */
const toleranceMs = (p: Probe) => (p.periodSeconds ?? 10) * (p.failureThreshold ?? 3) * 1000;

const worker = container("book-ingest");
const api = container("book-api");

describe("deploy/ agrees with the code", () => {
  test("the worker listens on METRICS_PORT, which is the container port, the probes' port and the scrape port", () => {
    const port = Number(env(worker).METRICS_PORT!.value);
    expect(port).toBe(DEFAULT_METRICS_PORT);
    expect(worker.ports.map((p) => p.containerPort)).toEqual([port]);
    for (const probe of probes(worker)) expect(portOf(worker, probe.httpGet.port)).toBe(port);
    expect(template("book-ingest").metadata.annotations?.["prometheus.io/port"]).toBe(String(port));
    const service = find(manifests, "Service", "book-ingest-metrics").spec as { ports: { port: number; targetPort: string }[] };
    expect(service.ports.map((p) => portOf(worker, p.targetPort))).toEqual([port]);
    // The image says the same: Dockerfile.ingest exposes and sets this port.
    const dockerfile = readFileSync(join(DEPLOY_DIR, "..", "Dockerfile.ingest"), "utf8");
    expect(dockerfile).toContain(`EXPOSE ${port}`);
    expect(dockerfile).toContain(`METRICS_PORT=${port}`);
  });

  test("the API listens on PORT on every address, which is the container port, the probes' port and the Service's target", () => {
    const port = Number(env(api).PORT!.value);
    expect(env(api).HOST!.value).toBe("0.0.0.0");
    expect(api.ports.map((p) => p.containerPort)).toEqual([port]);
    for (const probe of probes(api)) expect(portOf(api, probe.httpGet.port)).toBe(port);
    const service = find(manifests, "Service", "book-api").spec as { ports: { targetPort: string }[] };
    expect(service.ports.map((p) => portOf(api, p.targetPort))).toEqual([port]);
  });

  test("the probes ask /health, which the API documents and the worker's endpoint answers, beside /metrics", async () => {
    for (const c of [worker, api]) expect(new Set(probes(c).map((p) => p.httpGet.path))).toEqual(new Set(["/health"]));
    expect(template("book-ingest").metadata.annotations?.["prometheus.io/path"]).toBe("/metrics");
    expect(template("book-api").metadata.annotations?.["prometheus.io/path"]).toBe("/metrics");
    const openapi = parse(readFileSync(join(DEPLOY_DIR, "..", "openapi.yaml"), "utf8")) as { paths: Record<string, unknown> };
    expect(Object.keys(openapi.paths)).toEqual(expect.arrayContaining(["/health", "/metrics"]));

    let running = true;
    const handle = { id: "w", stopped: Promise.resolve(), stop: async () => {}, state: () => ({ id: "w", running, jobId: null, jobIds: [], jobsHandled: 0 }) } satisfies WorkerHandle;
    const server = serveWorkerMetrics({ metrics: createMetrics({ defaultMetrics: false, roles: ["worker"] }), logger: silentLogger }, handle, { port: 0, host: "127.0.0.1" });
    afterAll(() => server.stop(true));
    const get = (path: string) => fetch(`http://127.0.0.1:${server.port}${path}`);
    expect((await get("/health")).status).toBe(200);
    expect(await (await get("/metrics")).text()).toContain("processing_queue_depth");
    // A draining worker says so, and the readiness probe takes the pod out of the metrics Service.
    running = false;
    expect((await get("/health")).status).toBe(503);
  });

  test("a draining worker pod has time to hand its jobs back: the grace period covers the worker's own shutdown grace with room to spare", () => {
    const graceMs = template("book-ingest").spec.terminationGracePeriodSeconds * 1000;
    // After its own grace the worker aborts its jobs, returns them to the queue and closes its connections.
    const handBackMs = 10_000;
    expect(graceMs).toBeGreaterThanOrEqual(DEFAULT_SHUTDOWN_GRACE_MS + handBackMs);
    // Killed at the end of the grace period anyway, the job comes back when its lease lapses: a
    // lease shorter than the grace would make that the usual path rather than the exception.
    expect(DEFAULT_VISIBILITY_TIMEOUT_SECONDS * 1000).toBeGreaterThan(graceMs);
    expect(RENEWALS_PER_LEASE).toBeGreaterThan(1);
  });

  test("liveness never restarts a worker whose main thread is busy but not yet stuck by the worker's own measure", () => {
    expect(toleranceMs(worker.livenessProbe)).toBeGreaterThanOrEqual(DEFAULT_MAX_SILENCE_MS);
  });

  test("KEDA watches processing_queue and its in-flight list, with the worker's concurrency per pod for running jobs", () => {
    const keys = queueKeys();
    expect(keys.queue).toBe(PROCESSING_QUEUE);
    const scaled = find(manifests, "ScaledObject", "book-ingest").spec as {
      scaleTargetRef: { name: string };
      minReplicaCount: number;
      triggers: { type: string; metadata: Record<string, string>; authenticationRef: { name: string } }[];
    };
    expect(scaled.scaleTargetRef.name).toBe("book-ingest");
    expect(scaled.minReplicaCount).toBe(0);
    expect(scaled.triggers.map((t) => [t.type, t.metadata.listName])).toEqual([
      ["redis", keys.queue],
      ["redis", keys.inFlight],
    ]);
    expect(Number(scaled.triggers[1]!.metadata.listLength)).toBe(DEFAULT_WORKER_CONCURRENCY);
    for (const t of scaled.triggers) expect(find(manifests, "TriggerAuthentication", t.authenticationRef.name)).toBeDefined();
  });

  test("every variable the manifests set is one the configuration reads", () => {
    for (const c of [worker, api]) expect(c.env.map((e) => e.name).filter((name) => !CONFIG_VARIABLES.includes(name))).toEqual([]);
    expect(CONFIG_VARIABLES).toContain("ALLOWED_HOSTS");
    expect(Object.keys(env(api))).toContain("ALLOWED_HOSTS");
  });

  test("the manifests' settings load without a configuration error once the secrets are filled in, listening on every address", () => {
    const secret = uncommentedExampleSecret() as Manifest & { stringData: Record<string, string> };
    for (const c of [worker, api]) {
      const values = Object.fromEntries(c.env.map((e) => [e.name, e.value ?? secret.stringData[e.valueFrom!.secretKeyRef!.key]]));
      // On loopback the kubelet's probes and Prometheus could not reach the process.
      expect(loadConfig(values).host).toBe("0.0.0.0");
    }
  });

  test("credentials come by reference from the one Secret, whose template names every key referred to", () => {
    const secret = uncommentedExampleSecret() as Manifest & { stringData: Record<string, string> };
    const credentials = new Set(["DATABASE_URL", "REDIS_URL", "QDRANT_API_KEY", "TYPESENSE_API_KEY", "LLM_API_KEY", "RERANK_API_KEY"]);
    const refs = [worker, api].flatMap((c) => c.env.filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.valueFrom!.secretKeyRef!));
    for (const c of [worker, api]) for (const e of c.env) if (credentials.has(e.name)) expect({ name: e.name, value: e.value }).toEqual({ name: e.name, value: undefined });
    const keda = (find(manifests, "TriggerAuthentication", "book-ingest-redis").spec as { secretTargetRef: { name: string; key: string }[] }).secretTargetRef;
    for (const ref of [...refs, ...keda]) {
      expect(ref.name).toBe(secret.metadata.name);
      expect(Object.keys(secret.stringData)).toContain(ref.key);
    }
  });

  test("the Services, budgets and autoscaler select the pods of their Deployment", () => {
    const labels = (name: string) => template(name).metadata.labels;
    const matches = (selector: Record<string, string>, name: string) => Object.entries(selector).every(([k, v]) => labels(name)[k] === v);
    expect(matches((find(manifests, "Service", "book-ingest-metrics").spec as { selector: Record<string, string> }).selector, "book-ingest")).toBe(true);
    expect(matches((find(manifests, "Service", "book-api").spec as { selector: Record<string, string> }).selector, "book-api")).toBe(true);
    for (const name of ["book-ingest", "book-api"]) {
      const pdb = find(manifests, "PodDisruptionBudget", name).spec as { selector: { matchLabels: Record<string, string> } };
      expect(matches(pdb.selector.matchLabels, name)).toBe(true);
    }
    expect((find(manifests, "HorizontalPodAutoscaler", "book-api").spec as { scaleTargetRef: { kind: string; name: string } }).scaleTargetRef).toMatchObject({ kind: "Deployment", name: "book-api" });
  });
});
