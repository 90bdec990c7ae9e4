import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createQdrantVectorIndex, type QdrantVectorIndexOptions } from "../../common/vector/qdrant.ts";
import type { VectorPoint } from "../../common/vector/index.ts";
import { QDRANT_SPEC_FILE, extractQdrantSubset } from "../fixtures/openapi/extract.ts";
import { qdrantContract, qdrantSubset, quietQdrantKeyWarning } from "../support/index-contracts.ts";
import { liveQdrant } from "../support/live-index-env.ts";
import {
  jsonBody,
  type Exchange,
  type Json,
  type RecordedRequest,
  type Recorder,
  type ScriptedResponse,
} from "../support/openapi-recorder.ts";
import { upstreamFailure } from "../support/outcomes.ts";
import { operationIds, queryOf, scriptedServer, subsetFreshnessTest } from "../support/wire-suite.ts";

const contract = qdrantContract();

const BOOK = "0b6c1f9e-3d52-4c1a-9a57-2f1f3c0d8e11";
const KEY = "qdrant-test-key";

const ok = (result: Json): ScriptedResponse => ({ json: { result, status: "ok", time: 0.0012 } });
const failure = (status: number, error: string): ScriptedResponse => ({ status, json: { status: { error }, time: 0.0001 } });
const missing = failure(404, `Not found: Collection \`${BOOK}\` doesn't exist!`);
const UPDATED = ok({ operation_id: 7, status: "completed" });
const CREATED = { create_collection: ok(true), create_field_index: UPDATED };

const points: VectorPoint[] = [
  { chunkIndex: 0, text: "Alice was beginning to get very tired of sitting by her sister on the bank.", vector: [1, 0, 0, 0] },
  { chunkIndex: 1, text: "Down, down, down. Would the fall never come to an end?", vector: [0, 1, 0, 0] },
  { chunkIndex: 2, text: "'Off with her head!' the Queen shouted at the top of her voice.", vector: [0, 0, 1, 0] },
];

const serve = scriptedServer(contract);

const indexFor = (r: Recorder, options: Partial<QdrantVectorIndexOptions> = {}) =>
  createQdrantVectorIndex({ url: r.url, apiKey: KEY, ...options });

let restoreWarn: () => void;
beforeAll(() => (restoreWarn = quietQdrantKeyWarning()));
afterAll(() => restoreWarn());

describe("Qdrant vector index on the wire", () => {
  test("the first upsert creates a cosine collection sized to the vectors, indexes chunk_index, then writes the points", async () => {
    const r = serve({ ...CREATED, upsert_points: UPDATED });
    await indexFor(r).upsert(BOOK, points);

    expect(operationIds(r)).toEqual(["create_collection", "create_field_index", "upsert_points"]);
    const [create, fieldIndex, upsert] = r.exchanges as [Exchange, Exchange, Exchange];
    expect(create.operation?.params).toEqual({ collection_name: BOOK });
    expect(jsonBody(create)).toEqual({ vectors: { size: 4, distance: "Cosine" } });
    expect(jsonBody(fieldIndex)).toEqual({ field_name: "chunk_index", field_schema: "integer" });
    expect(queryOf(fieldIndex)).toEqual({ wait: "true" });
    expect(queryOf(upsert)).toEqual({ wait: "true" });
    expect(jsonBody(upsert)).toEqual({
      points: points.map((p) => ({ id: p.chunkIndex, vector: p.vector, payload: { chunk_index: p.chunkIndex, text: p.text, book_id: BOOK } })),
    });
    for (const e of r.exchanges) expect(e.request.headers["api-key"]).toBe(KEY);
    expect(r.problems()).toEqual([]);
  });

  test("later upserts for the same book reuse the collection", async () => {
    const r = serve({ ...CREATED, upsert_points: UPDATED });
    const index = indexFor(r);
    await index.upsert(BOOK, points.slice(0, 1));
    await index.upsert(BOOK, points.slice(1));
    expect(operationIds(r)).toEqual(["create_collection", "create_field_index", "upsert_points", "upsert_points"]);
    expect(r.problems()).toEqual([]);
  });

  test("concurrent first upserts create the collection once", async () => {
    const r = serve({ ...CREATED, upsert_points: UPDATED });
    const index = indexFor(r);
    await Promise.all([index.upsert(BOOK, points.slice(0, 1)), index.upsert(BOOK, points.slice(1))]);
    expect(r.calls("create_collection")).toHaveLength(1);
    expect(r.calls("upsert_points")).toHaveLength(2);
    expect(r.problems()).toEqual([]);
  });

  test("upserts are sent in batches of the configured size", async () => {
    const many = Array.from({ length: 5 }, (_, i) => ({ chunkIndex: i, text: `chunk ${i}`, vector: [i, 1, 0, 0] }));
    const r = serve({ ...CREATED, upsert_points: UPDATED });
    await indexFor(r, { batchSize: 2 }).upsert(BOOK, many);
    const sent = r.calls("upsert_points").map((e) => (jsonBody(e) as { points: { id: number }[] }).points.map((p) => p.id));
    expect(sent).toEqual([[0, 1], [2, 3], [4]]);
    expect(r.problems()).toEqual([]);
  });

  test("an empty upsert sends nothing and creates no collection", async () => {
    const r = serve({});
    await indexFor(r).upsert(BOOK, []);
    expect(r.exchanges).toEqual([]);
  });

  test("a collection another worker created first (409) is adopted and still gets its chunk_index index", async () => {
    const r = serve({
      create_collection: failure(409, `Wrong input: Collection \`${BOOK}\` already exists!`),
      create_field_index: UPDATED,
      upsert_points: UPDATED,
    });
    await indexFor(r).upsert(BOOK, points);
    expect(operationIds(r)).toEqual(["create_collection", "create_field_index", "upsert_points"]);
    expect(r.problems()).toEqual([]);
  });

  test("a collection deleted elsewhere after creation is created again on the next upsert", async () => {
    let upserts = 0;
    const r = serve({ ...CREATED, upsert_points: () => (++upserts === 2 ? missing : UPDATED) });
    const index = indexFor(r);
    await index.upsert(BOOK, points.slice(0, 1));
    await index.upsert(BOOK, points.slice(1));
    expect(operationIds(r)).toEqual([
      "create_collection",
      "create_field_index",
      "upsert_points",
      "upsert_points",
      "create_collection",
      "create_field_index",
      "upsert_points",
    ]);
    expect(r.problems()).toEqual([]);
  });

  test("a chunk index that cannot be a point id is refused before anything is sent", async () => {
    const r = serve({ ...CREATED, upsert_points: UPDATED });
    await expect(indexFor(r).upsert(BOOK, [{ chunkIndex: -1, text: "x", vector: [1, 0, 0, 0] }])).rejects.toThrow(RangeError);
    expect(r.calls("upsert_points")).toEqual([]);
  });

  test("search asks the Query API for the nearest points with payload and returns chunks best first", async () => {
    const r = serve({
      query_points: ok({
        points: [
          { id: 2, version: 3, score: 0.91, payload: { chunk_index: 2, text: points[2]!.text, book_id: BOOK } },
          { id: 0, version: 3, score: 0.42, payload: { chunk_index: 0, text: points[0]!.text, book_id: BOOK } },
        ],
      }),
    });
    const hits = await indexFor(r).search(BOOK, [0, 0.1, 0.9, 0]);
    expect(hits).toEqual([
      { chunkIndex: 2, text: points[2]!.text, score: 0.91 },
      { chunkIndex: 0, text: points[0]!.text, score: 0.42 },
    ]);
    const [query] = r.calls("query_points") as [Exchange];
    expect(query.request.path).toBe(`/collections/${BOOK}/points/query`);
    expect(jsonBody(query)).toEqual({ query: [0, 0.1, 0.9, 0], limit: 10, with_payload: true });
    expect(r.problems()).toEqual([]);
  });

  test("search with a spoiler limit filters on chunk_index <= the limit and honours the hit count", async () => {
    const r = serve({ query_points: ok({ points: [] }) });
    expect(await indexFor(r).search(BOOK, [1, 0, 0, 0], { maxChunkIndex: 41, limit: 3 })).toEqual([]);
    expect(jsonBody(r.calls("query_points")[0]!)).toEqual({
      query: [1, 0, 0, 0],
      limit: 3,
      with_payload: true,
      filter: { must: [{ key: "chunk_index", range: { lte: 41 } }] },
    });
    expect(r.problems()).toEqual([]);
  });

  test("search in a book that has no collection finds nothing", async () => {
    const r = serve({ query_points: missing });
    expect(await indexFor(r).search(BOOK, [1, 0, 0, 0])).toEqual([]);
    expect(r.problems()).toEqual([]);
  });

  test("a hit without the chunk payload is reported as an invalid response", async () => {
    const r = serve({ query_points: ok({ points: [{ id: 5, version: 1, score: 0.5, payload: null }] }) });
    const err = await upstreamFailure(indexFor(r).search(BOOK, [1, 0, 0, 0]));
    expect(err.kind).toBe("invalid_response");
    expect(r.problems()).toEqual([]);
  });

  test("count asks for an exact count and returns it", async () => {
    const r = serve({ count_points: ok({ count: 1234 }) });
    expect(await indexFor(r).count(BOOK)).toBe(1234);
    expect(jsonBody(r.calls("count_points")[0]!)).toEqual({ exact: true });
    expect(r.problems()).toEqual([]);
  });

  test("count is 0 for a book that has no collection", async () => {
    const r = serve({ count_points: missing });
    expect(await indexFor(r).count(BOOK)).toBe(0);
    expect(r.problems()).toEqual([]);
  });

  test("deleteBook drops the book's collection, and the next upsert creates it again", async () => {
    const r = serve({ ...CREATED, upsert_points: UPDATED, delete_collection: ok(true) });
    const index = indexFor(r);
    await index.upsert(BOOK, points);
    await index.deleteBook(BOOK);
    await index.upsert(BOOK, points);
    expect(operationIds(r)).toEqual([
      "create_collection",
      "create_field_index",
      "upsert_points",
      "delete_collection",
      "create_collection",
      "create_field_index",
      "upsert_points",
    ]);
    const [drop] = r.calls("delete_collection") as [Exchange];
    expect(drop.request.method).toBe("DELETE");
    expect(drop.request.bodyText).toBe("");
    expect(r.problems()).toEqual([]);
  });

  test.each([
    ["answers 404", missing],
    ["answers false", ok(false)],
  ])("deleteBook succeeds when the collection is already gone (server %s)", async (_, response) => {
    const r = serve({ delete_collection: response });
    await indexFor(r).deleteBook(BOOK);
    expect(r.calls("delete_collection")).toHaveLength(1);
    expect(r.problems()).toEqual([]);
  });

  const failing = [
    ["upsert", "create_collection", (i: ReturnType<typeof indexFor>) => i.upsert(BOOK, points)],
    ["search", "query_points", (i: ReturnType<typeof indexFor>) => i.search(BOOK, [1, 0, 0, 0])],
    ["count", "count_points", (i: ReturnType<typeof indexFor>) => i.count(BOOK)],
    ["deleteBook", "delete_collection", (i: ReturnType<typeof indexFor>) => i.deleteBook(BOOK)],
  ] as const;

  for (const status of [500, 503]) {
    test.each(failing)(`%s fails with a retryable qdrant UpstreamError carrying HTTP ${status}`, async (_, operationId, run) => {
      const r = serve({ [operationId]: failure(status, "Service internal error: RocksDB write failed") });
      const err = await upstreamFailure(run(indexFor(r)));
      expect(err.service).toBe("qdrant");
      expect(err.kind).toBe("http");
      expect(err.status).toBe(status);
      expect(err.retryable).toBe(true);
      expect(err.message).toContain("RocksDB write failed");
      expect(r.problems()).toEqual([]);
    });
  }

  test("a 400 (e.g. a vector of the wrong size) is not retryable and keeps Qdrant's reason", async () => {
    const r = serve({
      ...CREATED,
      upsert_points: failure(400, "Wrong input: Vector dimension error: expected dim: 4, got 3"),
    });
    const err = await upstreamFailure(indexFor(r).upsert(BOOK, [{ chunkIndex: 0, text: "x", vector: [1, 0, 0] }]));
    expect(err.status).toBe(400);
    expect(err.retryable).toBe(false);
    expect(err.message).toContain("expected dim: 4");
    expect(r.problems()).toEqual([]);
  });

  test("a 429 with Retry-After is a retryable rate-limit error", async () => {
    const r = serve({ count_points: { ...failure(429, "Too many requests"), headers: { "retry-after": "1" } } });
    const err = await upstreamFailure(indexFor(r).count(BOOK));
    expect(err.status).toBe(429);
    expect(err.retryable).toBe(true);
    expect(r.problems()).toEqual([]);
  });

  test("a server that does not answer in time fails with a timeout error", async () => {
    const r = serve({ query_points: { hang: true } });
    const err = await upstreamFailure(indexFor(r, { timeoutMs: 100 }).search(BOOK, [1, 0, 0, 0]));
    expect(err.kind).toBe("timeout");
    expect(err.retryable).toBe(true);
  });

  test("an unreachable server fails with a connection error", async () => {
    const r = serve({});
    const { url } = r;
    await r.close();
    const err = await upstreamFailure(createQdrantVectorIndex({ url, apiKey: KEY }).count(BOOK));
    expect(err.kind).toBe("connection");
  });

  test("a path in the URL is kept as a prefix, for Qdrant behind a reverse proxy", async () => {
    const r = serve({ count_points: ok({ count: 2 }) }, { basePath: "/vectors" });
    expect(await createQdrantVectorIndex({ url: `${r.url}/vectors/`, apiKey: KEY }).count(BOOK)).toBe(2);
    expect(r.exchanges[0]?.request.path).toBe(`/collections/${BOOK}/points/count`);
    expect(r.problems()).toEqual([]);
  });
});

describe("the Qdrant contract check itself", () => {
  const request = (body: unknown, headers: Record<string, string> = { "api-key": KEY }): RecordedRequest => ({
    method: "POST",
    path: `/collections/${BOOK}/points/query`,
    query: [],
    headers: { "content-type": "application/json", ...headers },
    bodyText: JSON.stringify(body),
  });

  test("accepts a well-formed query", () => {
    expect(contract.validateRequest(request({ query: [1, 0], limit: 10, with_payload: true })).problems).toEqual([]);
  });

  test("rejects a misspelled body field", () => {
    const { problems } = contract.validateRequest(request({ query: [1, 0], with_payloads: true }));
    expect(problems.join("\n")).toContain("with_payloads");
  });

  test("rejects a range bound that is not a number", () => {
    const body = { query: [1, 0], filter: { must: [{ key: "chunk_index", range: { lte: "41" } }] } };
    expect(contract.validateRequest(request(body)).problems).not.toEqual([]);
  });

  test("rejects a request without credentials", () => {
    const { problems } = contract.validateRequest(request({ query: [1, 0] }, {}));
    expect(problems.join("\n")).toContain("credentials");
  });

  test("rejects an operation outside the ones the adapter may use", () => {
    const { operation, problems } = contract.validateRequest({ ...request({ vector: [1, 0] }), path: `/collections/${BOOK}/points/search` });
    expect(operation).toBeUndefined();
    expect(problems).toHaveLength(1);
  });

  test("rejects a query parameter of the wrong type", () => {
    const { problems } = contract.validateRequest({ ...request({ query: [1, 0] }), query: [["timeout", "soon"]] });
    expect(problems.join("\n")).toContain("timeout");
  });

  test("rejects a response point without the fields Qdrant always sends", () => {
    const operation = contract.match("POST", `/collections/${BOOK}/points/query`)!;
    const body = JSON.stringify({ result: { points: [{ id: 1, score: 0.5 }] }, status: "ok", time: 0.001 });
    expect(contract.validateResponse(operation, 200, "application/json", body).join("\n")).toContain("version");
  });
});

subsetFreshnessTest("Qdrant", QDRANT_SPEC_FILE, qdrantSubset, extractQdrantSubset);

const live = liveQdrant();
if (live.skip) console.log(`skipping live Qdrant suite: ${live.skip}`);
describe.skipIf(live.skip !== undefined)("Qdrant vector index against a live server", () => {
  test("stores chunks, finds the nearest, honours the spoiler filter, counts and deletes", async () => {
    const index = (live.skip === undefined ? createQdrantVectorIndex({ url: live.url, ...(live.apiKey ? { apiKey: live.apiKey } : {}) }) : undefined)!;
    const book = crypto.randomUUID();
    try {
      await index.upsert(book, points);
      expect(await index.count(book)).toBe(3);
      const [best] = await index.search(book, [0.1, 0, 0.95, 0.05]);
      expect(best?.chunkIndex).toBe(2);
      expect(best?.text).toBe(points[2]!.text);
      const filtered = await index.search(book, [0.1, 0, 0.95, 0.05], { maxChunkIndex: 1 });
      expect(filtered.map((h) => h.chunkIndex).sort()).toEqual([0, 1]);
      await index.upsert(book, [{ chunkIndex: 2, text: "replaced", vector: [0, 0, 1, 0] }]);
      expect(await index.count(book)).toBe(3);
      await index.deleteBook(book);
      expect(await index.count(book)).toBe(0);
      expect(await index.search(book, [1, 0, 0, 0])).toEqual([]);
    } finally {
      await index.deleteBook(book);
    }
  });
});
