import { loadConfigOrExit } from "../common/config.ts";
import { buildDeps, type Deps } from "../common/deps.ts";
import { downloadBook } from "../common/file-url.ts";
import { createApp } from "./app.ts";
import { DOCS_PATH } from "./docs.ts";

/** Requests with a larger body are refused with 413 before they are parsed. */
export const MAX_REQUEST_BODY_BYTES = 1024 * 1024;

/** Builds the app from the composition root's dependencies and serves it on config.port. */
export function startApi(deps: Deps) {
  const { config } = deps;
  const { fetch, settle } = createApp({
    ...deps,
    probeBook: (fileUrl) => downloadBook(fileUrl, { allowedHosts: config.fileUrlAllowedHosts, maxBytes: config.maxBookBytes }),
  });
  const server = Bun.serve({
    port: config.port,
    hostname: "0.0.0.0",
    maxRequestBodySize: MAX_REQUEST_BODY_BYTES,
    // Chat streams can be quiet while the model thinks; Bun's default idle timeout (10 s) would cut them.
    idleTimeout: 255,
    fetch,
  });
  deps.logger.info("api listening", { url: `http://localhost:${server.port}`, docs: `http://localhost:${server.port}${DOCS_PATH}` });
  return { server, settle };
}

if (import.meta.main) {
  const config = loadConfigOrExit();
  const deps = await buildDeps(config);
  const { server, settle } = startApi(deps);
  const stop = async () => {
    await server.stop();
    // Summary folds still running write to the database and the cache: let them finish first.
    await settle();
    await deps.close();
    process.exit(0);
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}
