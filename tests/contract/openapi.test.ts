import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import { parse } from "yaml";
import { OPENAPI_FILE, generateOpenApiDocument, toYaml } from "../../api/openapi-document.ts";
import { buildTestApp } from "../support/app.ts";

type Operation = {
  summary?: string;
  description?: string;
  requestBody?: { content: Record<string, { schema: Record<string, unknown> }> };
  responses: Record<string, { description: string; content?: Record<string, { schema?: Record<string, unknown> }> }>;
};

describe("OpenAPI document", () => {
  test("the checked-in openapi.yaml is what the app generates (run `bun run openapi` after changing a route)", async () => {
    const generated = toYaml(await generateOpenApiDocument());
    expect(await Bun.file(OPENAPI_FILE).text()).toBe(generated);
  });

  test("openapi.yaml is a valid OpenAPI 3.1 document", async () => {
    const validator = new Validator();
    const result = await validator.validate(parse(await Bun.file(OPENAPI_FILE).text()));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  test("every operation has a summary, a description and described responses with schemas", async () => {
    const doc = (await generateOpenApiDocument()) as { paths: Record<string, Record<string, Operation>> };
    const operations = Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([m, op]) => [`${m.toUpperCase()} ${path}`, op] as const));
    expect(operations.map(([name]) => name as string).sort()).toEqual(["GET /health", "GET /metrics", "POST /character/chat", "POST /character/processing"].sort());
    for (const [name, op] of operations) {
      expect({ name, summary: Boolean(op.summary), description: Boolean(op.description) }).toEqual({ name, summary: true, description: true });
      for (const [status, response] of Object.entries(op.responses)) {
        expect({ name, status, described: response.description.length > 0 }).toEqual({ name, status, described: true });
        for (const media of Object.values(response.content ?? {})) expect(media.schema).toBeDefined();
      }
    }
  });

  test("book submission documents its request example and every error status", async () => {
    const doc = (await generateOpenApiDocument()) as { paths: Record<string, Record<string, Operation>> };
    const op = doc.paths["/character/processing"]!.post!;
    expect(Object.keys(op.requestBody!.content)).toEqual(["application/json"]);
    expect(op.requestBody!.content["application/json"]!.schema.example).toBeDefined();
    expect(Object.keys(op.responses).sort()).toEqual(["202", "400", "403", "413", "415", "422", "500"]);
    expect(op.responses["202"]!.content!["application/json"]!.schema!.example).toBeDefined();
  });
});

describe("Swagger UI", () => {
  // One app for the four: the docs' routes read no store, and each app starts an embedded database.
  let t: Awaited<ReturnType<typeof buildTestApp>>;
  beforeAll(async () => {
    t = await buildTestApp();
  }, 60_000);
  afterAll(() => t?.deps.db.close());

  test("the page loads its script and stylesheet from the API itself, never from another host", async () => {
    const res = await t.request("/docs");
    expect(res.status).toBe(200);
    const html = await res.text();
    const references = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(references.sort()).toEqual(["/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"]);
    expect(html).not.toMatch(/https?:\/\/(?!localhost)/);
    expect(html).toContain(`"url":"/docs/json"`);
  });

  test.each([
    ["/docs/assets/swagger-ui-bundle.js", "text/javascript", "SwaggerUIBundle"],
    ["/docs/assets/swagger-ui.css", "text/css", ".swagger-ui"],
  ])("%s is served with %s", async (path, type, marker) => {
    const res = await t.request(path);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith(type);
    expect(await res.text()).toContain(marker);
  });

  test("an unknown asset is a 404, and asset names cannot walk out of the package", async () => {
    expect((await t.request("/docs/assets/package.json")).status).toBe(404);
    expect((await t.request("/docs/assets/..%2F..%2Fpackage.json")).status).toBe(404);
  });
});
