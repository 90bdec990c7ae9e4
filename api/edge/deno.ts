// The API on Deno: `deno task api` (deno.json), or `npm run api:deno`. Same app and HTTP surface as on
// Bun, on the production drivers only (common/edge-deps.ts); no chat page. See docs/operations.md.
import css from "swagger-ui-dist/swagger-ui.css" with { type: "text" };
import script from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "text" };
import icon from "swagger-ui-dist/favicon-32x32.png" with { type: "bytes" };
import { ConfigError, loadEdgeConfig, secretsOf } from "../../common/config.ts";
import { BunOnlyError } from "../../common/edge-deps.ts";
import { listenAddress } from "../../common/listen-address.ts";
import { createLogger } from "../../common/log.ts";
import { onStopSignals } from "../../common/stop-signals.ts";
import { DOCS_PATH, type SwaggerUiAssets } from "../docs.ts";
import { createEdgeApi, type EdgeApi } from "./app.ts";

declare const Deno: {
  serve(
    options: { port: number; hostname: string; onListen?: (address: { port: number }) => void },
    handler: (request: Request) => Promise<Response>,
  ): { finished: Promise<void>; shutdown(): Promise<void> };
};

/** Swagger UI's files, carried in the module graph (raw imports), so the page needs neither a CDN nor node_modules at run time. */
const SWAGGER_UI_FILES = { "swagger-ui.css": css, "swagger-ui-bundle.js": script, "favicon-32x32.png": icon };
const swaggerUiAssets: SwaggerUiAssets = async (file) => SWAGGER_UI_FILES[file];

let config;
let api: EdgeApi;
try {
  config = loadEdgeConfig();
  // Statements over HTTP: Deno's WebSocket client holds a longer statement back by some 40 ms (common/db/neon.ts).
  api = createEdgeApi(config, { swaggerUiAssets, statementsOverHttp: true });
} catch (err) {
  if (!(err instanceof ConfigError || err instanceof BunOnlyError)) throw err;
  console.error(`configuration error: ${err.message}`);
  process.exit(1);
}

const { host } = config;
const server = Deno.serve(
  {
    port: config.port,
    hostname: host,
    onListen: ({ port }) => {
      const { bound, url } = listenAddress(host, port);
      // In LOG_FORMAT like every other line: plain text unless json is asked for.
      const log = createLogger({ level: config.logLevel, format: config.logFormat, secrets: secretsOf(config), write: (line) => console.log(line) });
      log.info("api listening", { runtime: "deno", address: bound, url, docs: `${url}${DOCS_PATH}` });
      void api.checkDependencies();
    },
  },
  // Deno keeps a process running: the work after a response just runs on.
  (request) => api.fetch(request, () => {}),
);

onStopSignals(() => {
  void server.shutdown().then(() => process.exit(0));
});
