// The index stand-in (dev/edge/index-stand-in.ts) driven through the production adapters: it
// must keep what they send, answer their searches as Qdrant and Typesense would, and keep every
// exchange within the published documents.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import type { IndexedChunk } from "../../common/contract/search.ts";
import { createTypesenseTextIndex } from "../../common/text-index/typesense.ts";
import type { VectorPoint } from "../../common/vector/index.ts";
import { createQdrantVectorIndex } from "../../common/vector/qdrant.ts";
import { quietQdrantKeyWarning } from "../support/index-contracts.ts";
import { startIndexStandIn, type IndexStandIn } from "../../dev/edge/index-stand-in.ts";
import { upstreamFailure } from "../support/outcomes.ts";

const BOOK = "3f2c9a1e-8b7d-4c6e-9f0a-1d2e3c4b5a69";
const OTHER_BOOK = "c8e1d2f3-4a5b-4c6d-8e7f-901a2b3c4d5e";

let indexes: IndexStandIn;
beforeEach(() => {
  indexes = startIndexStandIn();
});
afterEach(async () => {
  await indexes.close();
});

let restoreWarn: () => void;
beforeAll(() => (restoreWarn = quietQdrantKeyWarning()));
afterAll(() => restoreWarn());

const qdrant = (apiKey = indexes.qdrant.apiKey) => createQdrantVectorIndex({ url: indexes.qdrant.url, apiKey });
const typesense = (apiKey = indexes.typesense.apiKey) => createTypesenseTextIndex({ url: indexes.typesense.url, apiKey, maxRetries: 0 });

/** A raw call to one of the stand-in's services, with its key. */
async function call(service: "qdrant" | "typesense", method: string, path: string, body?: unknown, contentType = "application/json") {
  const { url, apiKey } = indexes[service];
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { "content-type": contentType, ...(service === "qdrant" ? { "api-key": apiKey } : { "x-typesense-api-key": apiKey }) },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  return { status: res.status, text: await res.text() };
}

describe("the index stand-in as Qdrant", () => {
  const points: VectorPoint[] = [
    { chunkIndex: 0, text: "The lamp on the gallery.", vector: [1, 0, 0, 0] },
    { chunkIndex: 1, text: "The ledger on the table.", vector: [0, 1, 0, 0] },
    { chunkIndex: 2, text: "The lamp and the ledger.", vector: [0.6, 0.8, 0, 0] },
  ];
  const query = [0.8, 0.6, 0, 0];

  test("keeps each book's points and answers a query with the asked book's nearest only, best first by cosine", async () => {
    const index = qdrant();
    await index.upsert(BOOK, points);
    // The other book holds the exact query vector: a search that leaked across books would rank it first.
    await index.upsert(OTHER_BOOK, [{ chunkIndex: 0, text: "Another book altogether.", vector: [8, 6, 0, 0] }]);

    const hits = await index.search(BOOK, query);
    expect(hits.map((h) => [h.chunkIndex, h.text])).toEqual([
      [2, points[2]!.text],
      [0, points[0]!.text],
      [1, points[1]!.text],
    ]);
    expect(hits.map((h) => h.score)).toEqual([0.96, 0.8, 0.6].map(Math.fround));
    expect((await index.search(OTHER_BOOK, query)).map((h) => [h.text, h.score])).toEqual([["Another book altogether.", 1]]);
    expect(indexes.problems()).toEqual([]);
  });

  test("honours the spoiler filter and the hit count, counts, replaces a point and drops a book", async () => {
    const index = qdrant();
    await index.upsert(BOOK, points);
    await index.upsert(OTHER_BOOK, points.slice(0, 1));
    expect((await index.search(BOOK, query, { maxChunkIndex: 1 })).map((h) => h.chunkIndex)).toEqual([0, 1]);
    expect((await index.search(BOOK, query, { limit: 1 })).map((h) => h.chunkIndex)).toEqual([2]);
    await index.upsert(BOOK, [{ chunkIndex: 2, text: "Replaced.", vector: [0, 0, 1, 0] }]);
    expect([await index.count(BOOK), await index.count(OTHER_BOOK)]).toEqual([3, 1]);
    expect((await index.search(BOOK, query)).map((h) => h.chunkIndex)).toEqual([0, 1, 2]);
    expect(indexes.qdrant.points(BOOK).map((p) => [p.id, p.payload])).toEqual([
      [0, { chunk_index: 0, text: points[0]!.text, book_id: BOOK }],
      [1, { chunk_index: 1, text: points[1]!.text, book_id: BOOK }],
      [2, { chunk_index: 2, text: "Replaced.", book_id: BOOK }],
    ]);
    await index.deleteBook(BOOK);
    expect([await index.count(BOOK), await index.search(BOOK, query), await index.count(OTHER_BOOK)]).toEqual([0, [], 1]);
    await index.deleteBook(BOOK);
    expect(indexes.problems()).toEqual([]);
  });

  test("a Dot collection scores by the dot product: a long vector outranks a closer short one", async () => {
    expect((await call("qdrant", "PUT", "/collections/dots", { vectors: { size: 2, distance: "Dot" } })).status).toBe(200);
    const upsert = await call("qdrant", "PUT", "/collections/dots/points?wait=true", {
      points: [
        { id: 1, vector: [1, 0], payload: { chunk_index: 1 } },
        { id: 2, vector: [3, 3], payload: { chunk_index: 2 } },
      ],
    });
    expect(upsert.status).toBe(200);
    const answer = await call("qdrant", "POST", "/collections/dots/points/query", { query: [1, 0.2], with_payload: true });
    const { result } = JSON.parse(answer.text) as { result: { points: { id: number; score: number; payload: object }[] } };
    expect(result.points.map((p) => [p.id, p.score, p.payload])).toEqual([
      [2, Math.fround(3.6), { chunk_index: 2 }],
      [1, 1, { chunk_index: 1 }],
    ]);
    expect(indexes.problems()).toEqual([]);
  });

  test("refuses a vector of another dimension (400), a second creation (409) and a wrong key (401), as Qdrant does", async () => {
    const index = qdrant();
    await index.upsert(BOOK, points);
    const wrongSize = await upstreamFailure(index.upsert(BOOK, [{ chunkIndex: 3, text: "x", vector: [1, 0, 0] }]));
    expect(wrongSize.status).toBe(400);
    expect(wrongSize.message).toEndWith("HTTP 400: Wrong input: Vector dimension error: expected dim: 4, got 3");
    expect((await upstreamFailure(index.search(BOOK, [1, 0]))).status).toBe(400);
    expect((await call("qdrant", "PUT", `/collections/${BOOK}`, { vectors: { size: 4, distance: "Cosine" } })).status).toBe(409);
    expect((await upstreamFailure(qdrant("wrong-key").count(BOOK))).status).toBe(401);
    expect(await index.count(BOOK)).toBe(3);
    expect(indexes.problems()).toEqual([]);
  });
});

describe("the index stand-in as Typesense", () => {
  const chunks: IndexedChunk[] = [
    { chunkIndex: 0, text: "Agnes lit the lamp at dusk." },
    { chunkIndex: 1, text: "The ledger lay open by the lamp: lamp oil, lamp wicks, the ledger's figures." },
    { chunkIndex: 2, text: "Gulls wheeled over the grey sea." },
  ];

  test("keeps each book's chunks and ranks a keyword query by BM25 within the asked book only, best first", async () => {
    const index = typesense();
    await index.upsert(BOOK, chunks);
    await index.upsert(OTHER_BOOK, [{ chunkIndex: 0, text: "lamp ledger lamp ledger lamp ledger" }]);

    const hits = await index.search(BOOK, "the LEDGER and its lamp");
    expect(hits.map((h) => h.chunkIndex)).toEqual([1, 0, 2]);
    expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
    expect(hits.map((h) => h.text)).toEqual([chunks[1]!.text, chunks[0]!.text, chunks[2]!.text]);
    expect((await index.search(BOOK, "ledger")).map((h) => h.chunkIndex)).toEqual([1]);
    expect(await index.search(BOOK, "lighthouse")).toEqual([]);
    expect((await index.search(OTHER_BOOK, "ledger")).map((h) => h.text)).toEqual(["lamp ledger lamp ledger lamp ledger"]);
    expect(indexes.problems()).toEqual([]);
  });

  test("honours the spoiler filter and the hit count, looks chunks up by index, counts, replaces and drops", async () => {
    const index = typesense();
    await index.upsert(BOOK, chunks);
    expect((await index.search(BOOK, "lamp", { maxChunkIndex: 0 })).map((h) => h.chunkIndex)).toEqual([0]);
    // Three lamps outweigh one, and a rare word outweighs a common one.
    expect((await index.search(BOOK, "lamp", { limit: 1 })).map((h) => h.chunkIndex)).toEqual([1]);
    expect((await index.search(BOOK, "lamp gulls", { limit: 1 })).map((h) => h.chunkIndex)).toEqual([2]);
    expect(await index.get(BOOK, [2, 7, 0])).toEqual([chunks[2]!, chunks[0]!]);
    await index.upsert(BOOK, [{ chunkIndex: 2, text: "The lamp again." }]);
    expect(await index.count(BOOK)).toBe(3);
    expect(indexes.typesense.documents(BOOK).map((d) => [d.id, d.text])).toEqual([
      [`${BOOK}:0`, chunks[0]!.text],
      [`${BOOK}:1`, chunks[1]!.text],
      [`${BOOK}:2`, "The lamp again."],
    ]);
    await index.deleteBook(BOOK);
    expect([await index.count(BOOK), await index.search(BOOK, "lamp"), await index.get(BOOK, [0])]).toEqual([0, [], []]);
    await index.deleteBook(BOOK);
    expect(indexes.problems()).toEqual([]);
  });

  test("filter_by takes a book_id match and a chunk_index list; a wildcard search lists by chunk_index, largest first", async () => {
    await typesense().upsert(BOOK, chunks);
    const params = new URLSearchParams({ q: "*", query_by: "text", filter_by: `book_id:=${BOOK} && chunk_index:[0,2]` });
    const answer = await call("typesense", "GET", `/collections/${BOOK}/documents/search?${params}`);
    const result = JSON.parse(answer.text) as { found: number; out_of: number; hits: { document: { chunk_index: number } }[] };
    expect([answer.status, result.found, result.out_of, result.hits.map((h) => h.document.chunk_index)]).toEqual([200, 2, 3, [2, 0]]);
    const otherBook = new URLSearchParams({ q: "*", query_by: "text", filter_by: `book_id:=${OTHER_BOOK}` });
    expect(JSON.parse((await call("typesense", "GET", `/collections/${BOOK}/documents/search?${otherBook}`)).text)).toMatchObject({ found: 0, hits: [] });
    const missing = new URLSearchParams({ q: "*", query_by: "text", filter_by: "chapter:=1" });
    expect((await call("typesense", "GET", `/collections/${BOOK}/documents/search?${missing}`)).status).toBe(404);
    expect(indexes.problems()).toEqual([]);
  });

  test("an import is answered line by line, refusing the documents that break the collection's fields", async () => {
    await typesense().upsert(BOOK, chunks.slice(0, 1));
    const lines = [
      { id: `${BOOK}:5`, chunk_index: 5, text: "fine", book_id: BOOK },
      { id: `${BOOK}:6`, chunk_index: "six", text: "bad index", book_id: BOOK },
      { id: `${BOOK}:7`, chunk_index: 7, book_id: BOOK },
    ];
    const answer = await call("typesense", "POST", `/collections/${BOOK}/documents/import?action=upsert`, lines.map((l) => JSON.stringify(l)).join("\n"), "text/plain");
    expect(answer.text.split("\n").map((l) => JSON.parse(l) as { success: boolean; error?: string })).toEqual([
      { success: true },
      expect.objectContaining({ success: false, error: "Field `chunk_index` must be an int32." }),
      expect.objectContaining({ success: false, error: "Field `text` has been declared in the schema, but is not found in the document." }),
    ]);
    expect(indexes.typesense.documents(BOOK).map((d) => d.chunk_index)).toEqual([0, 5]);
    const failure = await upstreamFailure(typesense("wrong-key").search(BOOK, "lamp"));
    expect(failure.status).toBe(401);
    expect(indexes.problems()).toEqual([]);
  });
});

describe("what the index stand-in reports", () => {
  test("a request outside the contract and a call it does not serve are listed as problems", async () => {
    await typesense().upsert(BOOK, [{ chunkIndex: 0, text: "lamp" }]);
    await call("typesense", "GET", `/collections/${BOOK}/documents/search?q=lamp&query_by=text&perpage=3`);
    expect(indexes.problems().join("\n")).toContain("query parameter perpage is not in the spec");

    await qdrant().upsert(BOOK, [{ chunkIndex: 0, text: "lamp", vector: [1, 0] }]);
    const fused = await call("qdrant", "POST", `/collections/${BOOK}/points/query`, { query: { fusion: "rrf" }, prefetch: [{ query: [1, 0] }] });
    expect(fused.status).toBe(500);
    expect(indexes.problems().join("\n")).toContain("the index stand-in does not serve a query with prefetch");

    await fetch(`${indexes.url}/elsewhere`);
    expect(indexes.problems()).toContain("no service at GET /elsewhere");
  });
});
