// The API on Cloudflare Workers (workerd): `wrangler dev` locally, `wrangler deploy` (wrangler.jsonc).
// Same app and HTTP surface as on Bun, on the production drivers only (common/edge-deps.ts); no chat
// page. See docs/operations.md.
import { env } from "cloudflare:workers";
import { CloudflareAdapter } from "elysia/adapter/cloudflare-worker";
import css from "swagger-ui-dist/swagger-ui.css";
import script from "swagger-ui-dist/swagger-ui-bundle.js";
import icon from "swagger-ui-dist/favicon-32x32.png";
import { ConfigError, loadEdgeConfig } from "../../common/config.ts";
import { BunOnlyError } from "../../common/edge-deps.ts";
import type { SwaggerUiAssets } from "../docs.ts";
import { createEdgeApi, type EdgeApi } from "./app.ts";

/** A Worker answers on the network, under whatever names its routes give it (ALLOWED_HOSTS narrows them). */
const WORKERS_DEFAULTS = { HOST: "0.0.0.0" };

/** Swagger UI's files, carried in the bundle (wrangler.jsonc's Text and Data rules). */
const SWAGGER_UI_FILES = { "swagger-ui.css": css, "swagger-ui-bundle.js": script, "favicon-32x32.png": icon };
const swaggerUiAssets: SwaggerUiAssets = async (file) => SWAGGER_UI_FILES[file];

/** Variables and secrets are strings; other bindings are not configuration. */
const variables = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => typeof entry[1] === "string"));

// Built in global scope: workerd lets the framework generate its handlers only here, never in a request.
function build(): EdgeApi {
  try {
    // A WebSocket belongs to the request that opened it: database connections are per request.
    return createEdgeApi(loadEdgeConfig(variables, WORKERS_DEFAULTS), { adapter: CloudflareAdapter, swaggerUiAssets, databaseConnections: "per-request" });
  } catch (err) {
    if (err instanceof ConfigError || err instanceof BunOnlyError) throw new Error(`configuration error: ${err.message}`, { cause: err });
    throw err;
  }
}
const api = build();
/**
 * A Worker has no start-up hook, and its global scope may do no I/O: the services are probed on its
 * first request instead, after the response (waitUntil), once per isolate.
 */
let dependenciesChecked = false;

export default {
  fetch(request: Request, _env: unknown, ctx: ExecutionContext): Promise<Response> {
    if (!dependenciesChecked) {
      dependenciesChecked = true;
      ctx.waitUntil(api.checkDependencies());
    }
    // The stream's end, the lock released, the summary fold: all after the response is returned.
    return api.fetch(request, (work) => ctx.waitUntil(work));
  },
};
