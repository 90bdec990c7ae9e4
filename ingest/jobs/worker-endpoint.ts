import { serverErrorHandling } from "../../common/http-server.ts";
import { listenAddress } from "../../common/listen-address.ts";
import type { WorkerDeps, WorkerHandle } from "./queue-consumer.ts";

/** The worker's own HTTP endpoint when it runs alone: /metrics for Prometheus, /health for probes. */
export function serveWorkerMetrics(deps: Pick<WorkerDeps, "metrics" | "logger">, worker: WorkerHandle, { port, host }: { port: number; host: string }) {
  const server = Bun.serve({
    port,
    hostname: host,
    async fetch(request) {
      // An HTTP/1.0 probe may send no Host; Bun then gives the bare path as the URL.
      const { pathname } = new URL(request.url, "http://worker");
      if (request.method !== "GET") return new Response("method not allowed", { status: 405 });
      if (pathname === "/metrics") {
        return new Response(await deps.metrics.registry.metrics(), { headers: { "content-type": deps.metrics.registry.contentType } });
      }
      if (pathname === "/health") {
        const state = worker.state();
        return Response.json({ status: state.running ? "ok" : "stopping", worker: state }, { status: state.running ? 200 : 503 });
      }
      return new Response("not found", { status: 404 });
    },
    ...serverErrorHandling(deps.logger),
  });
  const { bound, url } = listenAddress(host, server.port!);
  deps.logger.info("worker metrics listening", { address: bound, url: `${url}/metrics` });
  return server;
}
