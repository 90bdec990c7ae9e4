import { Elysia, ValidationError, type ElysiaAdapter } from "elysia";
import { ErrorBody } from "../common/contract/schemas.ts";
import { chatRoutes } from "./chat/index.ts";
import { createChatService, type ChatDeps, type ChatService } from "./chat/turn.ts";
import { docs, DOCS_PATH, OPENAPI_JSON_PATH, withRequestExamples, type RequestExamples, type SwaggerUiAssets } from "./docs.ts";
import { asHttpError, HttpError } from "./errors.ts";
import { withHttpMetrics, withRouteMetrics } from "./http-metrics.ts";
import { processingRoutes } from "./processing/index.ts";
import type { ProcessingDeps } from "./processing/service.ts";
import type { Config } from "../common/config.ts";
import { unhandledFailure } from "../common/http-server.ts";
import type { LocalChatOptions } from "../common/local/sessions.ts";
import { localFileRoute } from "./local-file.ts";
import { playgroundRoutes } from "./playground/index.ts";
import { createRequestGuard, type RequestGuardOptions } from "./request-guard.ts";

export interface AppDeps extends ProcessingDeps, ChatDeps {
  /** The chat's settings (ChatDeps), and the keep-alive interval of its stream; 15 s when absent. */
  config?: NonNullable<ChatDeps["config"]> & Partial<Pick<Config, "sseKeepAliveSeconds">>;
  /** Serve the chat page (api/playground), with these rules for the local sessions it opens; absent, no page. */
  playground?: LocalChatOptions;
  /** Requests that work here (`npm start`'s sample session and book), shown as the docs' examples once known. */
  requestExamples?: () => RequestExamples;
  /** A book file served at a hidden route for the API to download itself (api/local-file.ts); absent, none. */
  localFile?: string;
  /** Which hosts and origins may use the API (api/request-guard.ts); loopback and same-origin only when absent. */
  requestGuard?: RequestGuardOptions;
  /** The framework's adapter for the runtime (workerd's precompiles at start-up, where code generation is allowed); the runtime's default when absent. */
  adapter?: ElysiaAdapter;
  /** Swagger UI's files; read from the installed package when absent (api/docs.ts). */
  swaggerUiAssets?: SwaggerUiAssets;
}

const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
const HEALTH_HEADERS = { "content-type": "text/plain; charset=utf-8" };
const health = () => new Response("ok", { headers: HEALTH_HEADERS });

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
 * app's handler wrapped with the HTTP metrics. `routes` are the answers a Bun server gives with its
 * own router before `fetch` (the same answers `fetch` gives, counted alike). `settle` resolves once the
 * work requests left running after their responses (chat summary folds) has finished; a server awaits
 * it before closing the stores. `settleStarted` waits for the work started so far only (one request's).
 */
export function createApp(deps: AppDeps) {
  const chat = createChatService(deps);
  const app = buildRoutes(deps, chat);
  const refuse = createRequestGuard(deps.requestGuard);
  const log = deps.logger.child({ component: "api" });
  // The framework's own error handler (onError below) sees only what its routes throw; the handlers here see the rest (the guard,
  // the docs' examples), so that no failure reaches the runtime's error page or prints a stack.
  const guardedHealth = (request: Request) => {
    try {
      return refuse(request) ?? health();
    } catch (error) {
      return unhandledFailure(log, request, error);
    }
  };
  const handle = async (request: Request) => {
    try {
      const refused = refuse(request);
      if (refused) return refused;
      const response = await app.handle(request);
      const examples = deps.requestExamples?.();
      return examples && response.ok && new URL(request.url).pathname === OPENAPI_JSON_PATH ? withRequestExamples(response, examples) : response;
    } catch (error) {
      return unhandledFailure(log, request, error);
    }
  };
  return {
    app,
    fetch: withHttpMetrics(app, handle, deps.metrics),
    routes: {
      "/health": { GET: withRouteMetrics(deps.metrics, "GET", "/health", guardedHealth), HEAD: withRouteMetrics(deps.metrics, "HEAD", "/health", guardedHealth) },
    },
    settle: chat.settle,
    settleStarted: chat.settleStarted,
  };
}

type KnownRoute = { method: string; path: string };

/** The methods the app serves at a path (a request's path that matched no route), for 405 and `Allow`. */
function methodsAt(routes: readonly KnownRoute[], pathname: string): string[] {
  const methods = routes
    .filter((r) => new RegExp(`^${r.path.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/:[^/]+/g, "[^/]+").replace(/\*/g, ".*")}$`).test(pathname))
    .map((r) => r.method.toUpperCase());
  return [...new Set(methods)].filter((m) => m !== "ALL").sort();
}

function buildRoutes(deps: AppDeps, chat: ChatService) {
  const log = deps.logger.child({ component: "api" });
  // Filled in once the routes are built: the error handler below answers 405 from them.
  let knownRoutes: () => readonly KnownRoute[] = () => [];
  // By default the router assumes a host name of at least four characters and would read the path of
  // http://api/character/chat (a cluster service named `api`) as /chat: every request would be a 404.
  // Read only when present: the OpenAPI generator (api/openapi.ts) passes deps that refuse any other read.
  const adapter = "adapter" in deps ? deps.adapter : undefined;
  const swaggerUiAssets = "swaggerUiAssets" in deps ? deps.swaggerUiAssets : undefined;
  const app = new Elysia({ handler: { standardHostname: false }, ...(adapter ? { adapter } : {}) })
    .onError({ as: "global" }, ({ code, error, set, request }) => {
      const known = asHttpError(error);
      if (known) {
        set.status = known.status;
        if (known.status >= 500) log.error("request failed", { method: request.method, url: request.url, error: known.cause ?? error });
        return { error: known.message } satisfies ErrorBody;
      }
      switch (code) {
        case "VALIDATION":
          set.status = 400;
          return { error: describeValidation(error) };
        case "PARSE":
          // Our own body parser says what it refused and how (400, or 413 for a body over the limit);
          // the framework wraps whatever a parser throws.
          set.status = error.cause instanceof HttpError ? error.cause.status : 400;
          return { error: error.cause instanceof HttpError ? error.cause.message : "body is not valid JSON" };
        case "NOT_FOUND": {
          const allowed = methodsAt(knownRoutes(), new URL(request.url).pathname);
          if (allowed.length > 0) {
            set.status = 405;
            set.headers.allow = allowed.join(", ");
            return { error: `method not allowed: use ${allowed.join(" or ")}` };
          }
          set.status = 404;
          return { error: "not found" };
        }
        case "INVALID_COOKIE_SIGNATURE":
        case "INVALID_FILE_TYPE":
          set.status = 400;
          return { error: "invalid request" };
      }
      return unhandledFailure(log, request, error, { code });
    })
    .use(docs(swaggerUiAssets))
    // The API's front page is its documentation.
    .get("/", () => new Response(null, { status: 302, headers: { location: DOCS_PATH } }), { detail: { hide: true } })
    .get("/health", health, {
      detail: {
        tags: ["Operations"],
        summary: "Liveness",
        description: "Always `ok` while the process serves HTTP. Checks no dependency, so a slow database never restarts the pod.",
        responses: { 200: { description: "The process is up.", content: { "text/plain": { schema: { type: "string", example: "ok" } } } } },
      },
    })
    .get(
      "/metrics",
      async () => {
        const { aggregation, registry } = deps.metrics;
        if (!aggregation) return new Response(await registry.metrics(), { headers: { "content-type": PROMETHEUS_CONTENT_TYPE } });
        try {
          return new Response(await aggregation.render(), { headers: { "content-type": PROMETHEUS_CONTENT_TYPE } });
        } catch (err) {
          // The sums live in the key-value store: without it there is nothing meaningful to show.
          log.error("metrics store unavailable", { error: err });
          return Response.json({ error: "metrics store unavailable" } satisfies ErrorBody, { status: 503 });
        }
      },
      {
        detail: {
          tags: ["Operations"],
          summary: "Prometheus metrics",
          description: "Prometheus text exposition of the HTTP, processing, indexing, chat and LLM token metrics. With METRICS_AGGREGATION=kv, the sums over every process (isolate) from the key-value store; 503 when that store fails.",
          responses: {
            200: { description: "Metrics in the Prometheus text format.", content: { "text/plain": { schema: { type: "string" } } } },
            503: { description: "METRICS_AGGREGATION=kv and the key-value store failed.", content: { "application/json": { schema: { type: "object", properties: { error: { type: "string" } }, required: ["error"] } } } },
          },
        },
      },
    )
    .use(processingRoutes(deps))
    .use(chatRoutes(chat, deps.config?.sseKeepAliveSeconds ? { keepAliveMs: deps.config.sseKeepAliveSeconds * 1000 } : {}))
    .use(deps.playground ? playgroundRoutes(deps.db, deps.textIndex, deps.playground) : new Elysia({ name: "playground" }))
    .use(deps.localFile ? localFileRoute(deps.localFile) : new Elysia({ name: "local-file" }));
  knownRoutes = () => app.routes;
  return app;
}

export type App = ReturnType<typeof buildRoutes>;
