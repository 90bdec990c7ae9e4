import { loadConfigOrExit } from "../common/config.ts";
import { buildDepsOrExit, type Deps } from "../common/deps.ts";
import { downloadBook } from "../common/file-url.ts";
import { createApp, type AppDeps } from "./app.ts";
import { DOCS_PATH } from "./docs.ts";
import { listenAddress } from "../common/local/listen-address.ts";
import { usage } from "../common/local/commands.ts";
import { onStopSignals } from "../common/stop-signals.ts";

/** Builds the app from the composition root's dependencies and serves it on config.host:config.port. */
export function startApi(deps: Deps, options: Pick<AppDeps, "playground" | "chatExample"> = {}) {
  const { config } = deps;
  const { fetch, routes, settle } = createApp({
    ...deps,
    ...options,
    requestGuard: { allowedHosts: config.allowedHosts, allowedOrigins: config.allowedOrigins },
    probeBook: (fileUrl) => downloadBook(fileUrl, { allowedHosts: config.fileUrlAllowedHosts, maxBytes: config.maxBookBytes }),
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
  });
  const { bound, url } = listenAddress(config.host, server.port!);
  deps.logger.info("api listening", { address: bound, url, docs: `${url}${DOCS_PATH}` });
  return { server, settle };
}

if (import.meta.main) {
  if (process.argv.includes("--help")) {
    console.log(`${usage("api", "")}\n\nThe HTTP API alone, on HOST:PORT (127.0.0.1:3000 unless set; a deployment sets HOST=0.0.0.0). PLAYGROUND=on adds the chat page.`);
    process.exit(0);
  }
  const config = loadConfigOrExit();
  const deps = await buildDepsOrExit(config, { metricsRoles: ["api"] });
  // The chat page is a local convenience: a deployment shows it only with PLAYGROUND=on.
  const { server, settle } = startApi(deps, deps.config.playground ? { playground: {} } : {});
  const stop = async () => {
    await server.stop();
    // Summary folds still running write to the database and the cache: let them finish first.
    await settle();
    await deps.close();
    process.exit(0);
  };
  onStopSignals(() => void stop());
}
