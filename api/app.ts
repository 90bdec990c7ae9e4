import { Elysia, ValidationError } from "elysia";
import { ErrorBody } from "../common/schemas.ts";
import { chatRoutes } from "./chat/index.ts";
import { createChatService, type ChatDeps, type ChatService } from "./chat/service.ts";
import { docs } from "./docs.ts";
import { HttpError } from "./errors.ts";
import { withHttpMetrics } from "./http-metrics.ts";
import { processingRoutes } from "./processing/index.ts";
import type { ProcessingDeps } from "./processing/service.ts";

export interface AppDeps extends ProcessingDeps, ChatDeps {}

const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** The first problem of a validation failure, as `field: reason`. */
function describeValidation(error: Readonly<ValidationError>): string {
  const first = error.all[0] as { path?: string; message?: string; summary?: string } | undefined;
  const field = first?.path?.replace(/^\//, "").replaceAll("/", ".");
  const reason = first?.message ?? first?.summary ?? "is invalid";
  if (!field || field === "root") return error.type === "body" ? "body must be a JSON object" : reason;
  return reason.startsWith(field) ? reason : `${field}: ${reason}`;
}

/**
 * Builds the whole HTTP API from its dependencies. `fetch` is what a server (or a test) calls: the
 * app's handler wrapped with the HTTP metrics. `settle` resolves once the work requests left running
 * after their responses (chat summary folds) has finished; a server awaits it before closing the stores.
 */
export function createApp(deps: AppDeps) {
  const chat = createChatService(deps);
  const app = buildRoutes(deps, chat);
  return { app, fetch: withHttpMetrics(app, (request) => app.handle(request), deps.metrics), settle: chat.settle };
}

function buildRoutes(deps: AppDeps, chat: ChatService) {
  const log = deps.logger.child({ component: "api" });
  // By default the router assumes a host name of at least four characters and would read the path of
  // http://api/character/chat (a cluster service named `api`) as /chat: every request would be a 404.
  return new Elysia({ handler: { standardHostname: false } })
    .onError({ as: "global" }, ({ code, error, set, request }) => {
      if (error instanceof HttpError) {
        set.status = error.status;
        if (error.status >= 500) log.error("request failed", { method: request.method, url: request.url, error: error.cause ?? error });
        return { error: error.message } satisfies ErrorBody;
      }
      switch (code) {
        case "VALIDATION":
          set.status = 400;
          return { error: describeValidation(error) };
        case "PARSE":
          set.status = 400;
          // Our own body parser explains what it refused; the framework wraps whatever a parser throws.
          return { error: error.cause instanceof HttpError ? error.cause.message : "body is not valid JSON" };
        case "NOT_FOUND":
          set.status = 404;
          return { error: "not found" };
        case "INVALID_COOKIE_SIGNATURE":
        case "INVALID_FILE_TYPE":
          set.status = 400;
          return { error: "invalid request" };
      }
      log.error("unhandled error", { method: request.method, url: request.url, code, error });
      set.status = 500;
      return { error: "internal error" };
    })
    .use(docs())
    .get("/health", () => new Response("ok", { headers: { "content-type": "text/plain; charset=utf-8" } }), {
      detail: {
        tags: ["Operations"],
        summary: "Liveness",
        description: "Always `ok` while the process serves HTTP. Checks no dependency, so a slow database never restarts the pod.",
        responses: { 200: { description: "The process is up.", content: { "text/plain": { schema: { type: "string", example: "ok" } } } } },
      },
    })
    .get(
      "/metrics",
      async () => new Response(await deps.metrics.registry.metrics(), { headers: { "content-type": PROMETHEUS_CONTENT_TYPE } }),
      {
        detail: {
          tags: ["Operations"],
          summary: "Prometheus metrics",
          description: "Prometheus text exposition of the HTTP, processing, indexing, chat and LLM token metrics.",
          responses: { 200: { description: "Metrics in the Prometheus text format.", content: { "text/plain": { schema: { type: "string" } } } } },
        },
      },
    )
    .use(processingRoutes(deps))
    .use(chatRoutes(chat));
}

export type App = ReturnType<typeof buildRoutes>;
