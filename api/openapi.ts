// npm run openapi (bun run openapi): writes the OpenAPI document of the routes to openapi.yaml.

import { usage } from "../common/cli-usage.ts";
import { generateOpenApiDocument, OPENAPI_FILE, toYaml } from "./openapi-document.ts";

if (process.argv.includes("--help")) {
  console.log(`${usage("openapi", "")}\n\nWrites the OpenAPI document of the routes in api/ to openapi.yaml.`);
  process.exit(0);
}
await Bun.write(OPENAPI_FILE, toYaml(await generateOpenApiDocument()));
console.log(`wrote ${OPENAPI_FILE.pathname}`);
