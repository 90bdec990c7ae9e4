import { openapi } from "@elysiajs/openapi";
import { Elysia } from "elysia";
import { z } from "zod";
import type { ChatRequest, ProcessingRequest } from "../common/contract/schemas.ts";

/**
 * OpenAPI document and Swagger UI. The UI's script and stylesheet are served by the API itself from
 * the swagger-ui-dist package, so the page works on a network with no route to a CDN.
 */

export const DOCS_PATH = "/docs";
export const OPENAPI_JSON_PATH = `${DOCS_PATH}/json`;
const ASSETS_PATH = `${DOCS_PATH}/assets`;

const ASSETS = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "favicon-32x32.png": "image/png",
} as const;

export type SwaggerUiFile = keyof typeof ASSETS;
/** The content of one of Swagger UI's files: read where the package is installed, or bundled into an edge build. */
export type SwaggerUiAssets = (file: SwaggerUiFile) => Promise<BodyInit>;

const isAsset = (file: string): file is SwaggerUiFile => Object.hasOwn(ASSETS, file);

/**
 * The files of the installed swagger-ui-dist package, read with fetch over a file: URL (Bun, and Deno
 * with node_modules). A runtime with no files (workerd) passes the files its bundle carries instead.
 */
const installedAssets: SwaggerUiAssets = async (file) => {
  const response = await fetch(new URL(file, import.meta.resolve("swagger-ui-dist/package.json")));
  if (!response.ok || !response.body) throw new Error(`swagger-ui-dist/${file} is not readable (${response.status})`);
  return response.body;
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

/** Requests that work on this service as it runs (`npm start`'s sample story), shown as the document's examples. */
export interface RequestExamples {
  chat?: ChatRequest;
  processing?: ProcessingRequest;
}

const EXAMPLE_PATHS: Record<keyof RequestExamples, string> = { chat: "/character/chat", processing: "/character/processing" };

/**
 * The OpenAPI document with the request examples of `POST /character/chat` and `POST
 * /character/processing` replaced by requests that work here, so Swagger UI's "Try it out" streams a
 * reply and queues a book instead of answering 404 or 422 for made-up ids and addresses.
 */
export async function withRequestExamples(response: Response, examples: RequestExamples): Promise<Response> {
  const document = (await response.json()) as OpenApiDocument;
  for (const [name, path] of Object.entries(EXAMPLE_PATHS) as [keyof RequestExamples, string][]) {
    const example = examples[name];
    const media = document.paths?.[path]?.post?.requestBody?.content?.["application/json"];
    if (!example || !media) continue;
    media.example = example;
    if (media.schema) media.schema.example = example;
  }
  return Response.json(document, { status: response.status });
}

export function docs(assets: SwaggerUiAssets = installedAssets) {
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
      async ({ params, status }) => {
        if (!isAsset(params.file)) return status(404, { error: "not found" });
        return new Response(await assets(params.file), {
          headers: { "content-type": ASSETS[params.file], "cache-control": "public, max-age=86400" },
        });
      },
      { detail: { hide: true } },
    );
}
