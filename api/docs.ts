import { openapi } from "@elysiajs/openapi";
import { Elysia } from "elysia";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import type { ChatRequest } from "../common/contract/schemas.ts";

/**
 * OpenAPI document and Swagger UI. The UI's script and stylesheet are served by the API itself from
 * the swagger-ui-dist package, so the page works on a network with no route to a CDN.
 */

export const DOCS_PATH = "/docs";
export const OPENAPI_JSON_PATH = `${DOCS_PATH}/json`;
const ASSETS_PATH = `${DOCS_PATH}/assets`;

const SWAGGER_UI_DIR = dirname(fileURLToPath(import.meta.resolve("swagger-ui-dist/package.json")));
const ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "favicon-32x32.png": "image/png",
};

export const API_TITLE = "Book character chat API";
export const API_VERSION = "1.0.0";

const DESCRIPTION = `Backend of an AI reading companion: submit a book for ingestion, then chat with its characters
in their own voice, grounded in passages of the book. Internal service: the JSON body is trusted; there is
no authentication of its own.`;

/** Zod to JSON Schema, without the `$schema` marker that OpenAPI 3.1 schema objects do not need. */
export function toOpenApiSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { unrepresentable: "any", io: "input" });
  return rest;
}

type MediaType = { schema?: { example?: unknown }; example?: unknown };
type OpenApiDocument = { paths?: Record<string, Record<string, { requestBody?: { content?: Record<string, MediaType> } }>> };

/**
 * The OpenAPI document with the example of `POST /character/chat` replaced by a request that works
 * on this service (`npm start` passes the sample story's real ids), so Swagger UI's "Try it out"
 * streams a reply instead of answering 404 for made-up ids.
 */
export async function withChatExample(response: Response, example: ChatRequest): Promise<Response> {
  const document = (await response.json()) as OpenApiDocument;
  const media = document.paths?.["/character/chat"]?.post?.requestBody?.content?.["application/json"];
  if (media) {
    media.example = example;
    if (media.schema) media.schema.example = example;
  }
  return Response.json(document, { status: response.status });
}

export function docs() {
  return new Elysia({ name: "docs" })
    .use(
      openapi({
        provider: "swagger-ui",
        path: DOCS_PATH,
        specPath: OPENAPI_JSON_PATH,
        mapJsonSchema: { zod: toOpenApiSchema },
        exclude: { paths: [`${ASSETS_PATH}/:file`] },
        documentation: {
          info: { title: API_TITLE, version: API_VERSION, description: DESCRIPTION },
          tags: [
            { name: "Operations", description: "Health and Prometheus metrics" },
            { name: "Books", description: "Book ingestion" },
            { name: "Chat", description: "In-character chat over Server-Sent Events" },
          ],
        },
        swagger: {
          // The plugin links the document relatively ("docs/json"), which breaks at "/docs/"; link it absolutely.
          ...{ url: OPENAPI_JSON_PATH },
          theme: `${ASSETS_PATH}/swagger-ui.css`,
          cdn: `${ASSETS_PATH}/swagger-ui-bundle.js`,
          autoDarkMode: false,
        },
      }),
    )
    .get(
      `${ASSETS_PATH}/:file`,
      ({ params, status }) => {
        const type = ASSETS[params.file];
        if (!type) return status(404, { error: "not found" });
        return new Response(Bun.file(join(SWAGGER_UI_DIR, params.file)), {
          headers: { "content-type": type, "cache-control": "public, max-age=86400" },
        });
      },
      { detail: { hide: true } },
    );
}
