import type { ElysiaAdapter } from "elysia";
import type { Config } from "../../common/config.ts";
import { buildEdgeDeps, type EdgeBuildOptions } from "../../common/edge-deps.ts";
import { downloadBook } from "../../common/file-url.ts";
import { createApp } from "../app.ts";
import type { SwaggerUiAssets } from "../docs.ts";
import { sseStreamEnd } from "../sse.ts";

export interface EdgeApiOptions extends EdgeBuildOptions {
  adapter?: ElysiaAdapter;
  swaggerUiAssets?: SwaggerUiAssets;
}

export interface EdgeApi {
  /** Answers one request. */
  fetch(request: Request): Promise<Response>;
  /**
   * Settles once the work a response leaves behind is done: its stream ended (or the client left
   * and the turn let go of its lock), then the summary folds and store writes running after it. A
   * Worker hands this to `ctx.waitUntil` so the isolate is not stopped under them.
   */
  afterResponse(response: Response): Promise<void>;
}

/**
 * The whole API on an edge runtime: the same app as on Bun (api/app.ts) over the edge's composition
 * root (common/edge-deps.ts), without the chat page. Built without I/O and compiled at once, so a
 * Worker can build it in global scope, the one place workerd lets the framework generate its code.
 */
export function createEdgeApi(config: Config, options: EdgeApiOptions = {}): EdgeApi {
  const deps = buildEdgeDeps(config, options);
  const { app, fetch, settle } = createApp({
    ...deps,
    ...(options.adapter ? { adapter: options.adapter } : {}),
    ...(options.swaggerUiAssets ? { swaggerUiAssets: options.swaggerUiAssets } : {}),
    requestGuard: { allowedHosts: config.allowedHosts, allowedOrigins: config.allowedOrigins },
    probeBook: (fileUrl) => downloadBook(fileUrl, { allowedHosts: config.fileUrlAllowedHosts, maxBytes: config.maxBookBytes }),
  });
  app.compile();
  deps.logger.info("components", {
    database: deps.db.driver,
    kv: deps.kv.driver,
    llm: deps.llm.provider,
    vector_index: deps.vectorIndex.adapter,
    text_index: deps.textIndex.adapter,
    reranker: deps.reranker ? "http" : "rank fusion",
  });
  return {
    fetch,
    async afterResponse(response) {
      await sseStreamEnd(response);
      await settle();
    },
  };
}
