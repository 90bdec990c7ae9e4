import type { Deps } from "../common/deps.ts";
import { createApp, type AppDeps } from "./app.ts";
import { DOCS_PATH } from "./docs.ts";
import { serverErrorHandling } from "../common/http-server.ts";
import { listenAddress } from "../common/listen-address.ts";

/** Builds the app from the composition root's dependencies and serves it on config.host:config.port. */
export function startApi(deps: Deps, options: Pick<AppDeps, "playground" | "requestExamples" | "localFile"> = {}) {
  const { config } = deps;
  const { fetch, routes, settle } = createApp({
    ...deps,
    ...options,
    requestGuard: { allowedHosts: config.allowedHosts, allowedOrigins: config.allowedOrigins },
  });
  const server = Bun.serve({
    port: config.port,
    hostname: config.host,
    // The body limit is the app's (api/json-body.ts), so that its 413 carries {error}; Bun's own
    // check would refuse first with an empty body. Bodies are streamed, never buffered before that check.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    // Chat streams can be quiet while the model thinks; Bun's default idle timeout (10 s) would cut them.
    idleTimeout: 255,
    routes,
    fetch,
    ...serverErrorHandling(deps.logger.child({ component: "api" })),
  });
  const { bound, url } = listenAddress(config.host, server.port!);
  deps.logger.info("api listening", { address: bound, url, docs: `${url}${DOCS_PATH}` });
  return { server, settle };
}
