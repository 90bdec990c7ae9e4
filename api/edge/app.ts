import type { ElysiaAdapter } from "elysia";
import type { Config } from "../../common/config.ts";
import { checkDependencies } from "../../common/deps-assembly.ts";
import { buildEdgeDeps, type EdgeBuildOptions } from "../../common/edge-deps.ts";
import { unhandledFailure } from "../../common/http-server.ts";
import { createApp } from "../app.ts";
import type { SwaggerUiAssets } from "../docs.ts";
import { sseStreamEnd } from "../sse.ts";

export interface EdgeApiOptions extends EdgeBuildOptions {
  adapter?: ElysiaAdapter;
  swaggerUiAssets?: SwaggerUiAssets;
}

/** Keeps work alive after the response has gone (a Worker's `ctx.waitUntil`). */
export type WaitUntil = (work: Promise<unknown>) => void;

export interface EdgeApi {
  /**
   * Answers one request. The work its response leaves behind (the stream's end or the client's
   * leaving with the lock let go, then the summary folds and store writes it started) goes to
   * `waitUntil`, after which the request's database connections are closed.
   */
  fetch(request: Request, waitUntil: WaitUntil): Promise<Response>;
  /**
   * Probes every service once and logs `dependency unreachable` for each that does not answer
   * (common/deps-assembly.ts); the variables of those. Inside a database scope of its own, as a
   * request's work, so that on workerd it may run from a request's waitUntil.
   */
  checkDependencies(): Promise<string[]>;
}

/**
 * The whole API on an edge runtime: the same app as on Bun (api/app.ts) over the edge's composition
 * root (common/edge-deps.ts), without the chat page. Built without I/O and compiled at once, so a
 * Worker can build it in global scope, the one place workerd lets the framework generate its code.
 */
export function createEdgeApi(config: Config, options: EdgeApiOptions = {}): EdgeApi {
  const deps = buildEdgeDeps(config, options);
  const { app, fetch, settleStarted } = createApp({
    ...deps,
    ...(options.adapter ? { adapter: options.adapter } : {}),
    ...(options.swaggerUiAssets ? { swaggerUiAssets: options.swaggerUiAssets } : {}),
    requestGuard: { allowedHosts: config.allowedHosts, allowedOrigins: config.allowedOrigins },
  });
  app.compile();
  return {
    async fetch(request, waitUntil) {
      const scope = deps.db.openScope();
      // The app answers its own failures; this catches what fails around it, so that neither Deno's
      // error answer (text and a multi-line stack) nor a Worker's error page is ever what a client sees.
      let response: Response;
      try {
        response = await scope.run(() => fetch(request));
      } catch (error) {
        waitUntil(scope.end());
        return unhandledFailure(deps.logger, request, error);
      }
      const afterResponse = scope.run(async () => {
        await sseStreamEnd(response);
        await settleStarted();
        await deps.metrics.aggregation?.settled();
      });
      waitUntil(afterResponse.finally(() => scope.end()));
      return response;
    },
    async checkDependencies() {
      const scope = deps.db.openScope();
      try {
        return await scope.run(() => checkDependencies(deps));
      } finally {
        await scope.end();
      }
    },
  };
}
