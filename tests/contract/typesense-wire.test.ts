import { describe, expect, test } from "bun:test";
import type { IndexedChunk } from "../../common/contract/search.ts";
import {
  ARABIC_SCRIPT_LOCALE,
  createTypesenseTextIndex,
  textLocaleFor,
  type TypesenseTextIndexOptions,
} from "../../common/text-index/typesense.ts";
import { TYPESENSE_SPEC_FILE, extractTypesenseSubset } from "../fixtures/openapi/extract.ts";
import { typesenseContract, typesenseSubset } from "../support/index-contracts.ts";
import { liveTypesense } from "../support/live-index-env.ts";
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

const contract = typesenseContract();

const BOOK = "7d1e4c2a-5b8f-4e0a-b3c6-9f2d1a0e8c47";
const KEY = "typesense-test-key";
const NOW = 1_732_200_000;

const chunks: IndexedChunk[] = [
  { chunkIndex: 0, text: "Alice was beginning to get very tired of sitting by her sister on the bank." },
  { chunkIndex: 1, text: "Down, down, down. Would the fall never come to an end?" },
  { chunkIndex: 2, text: "'Off with her head!' the Queen shouted at the top of her voice." },
];
const urduChunks: IndexedChunk[] = [
  { chunkIndex: 0, text: "ملکہ نے پوری آواز سے چلا کر کہا۔ اس کا سر قلم کر دو!" },
  { chunkIndex: 1, text: "ایلس، جو اپنی بہن کے پاس کنارے پر بیٹھی تھی، تھکنے لگی؟" },
];

/** A collection as the server describes it after creation (fields gain their defaults). */
function collection(numDocuments: number, locale = ""): ScriptedResponse {
  const field = (name: string, type: string, extra: Record<string, Json> = {}) => ({
    name,
    type,
    facet: false,
    index: true,
    infix: false,
    locale: "",
    optional: false,
    sort: false,
    stem: false,
    stem_dictionary: "",
    store: true,
    ...extra,
  });
  return {
    status: 200,
    json: {
      name: BOOK,
      created_at: NOW,
      num_documents: numDocuments,
      default_sorting_field: "chunk_index",
      enable_nested_fields: false,
      symbols_to_index: [],
      token_separators: [],
      fields: [field("text", "string", { locale }), field("chunk_index", "int32", { sort: true }), field("book_id", "string")],
    },
  };
}
const CREATED: ScriptedResponse = { ...collection(0), status: 201 };
const notFound = (message = "Not Found"): ScriptedResponse => ({ status: 404, json: { message } });

/**
 * Answers an import the way the server does: one result line per document, in order, checking
 * each document against the fields the adapter itself declared when it created the collection.
 */
function importAnswer(reject: (doc: Record<string, unknown>) => string | undefined = () => undefined) {
  return (request: RecordedRequest): ScriptedResponse => {
    const lines = request.bodyText.split("\n").map((line) => {
      const doc = JSON.parse(line) as Record<string, unknown>;
      const error =
        typeof doc.id !== "string"
          ? "Document is missing the `id` field."
          : typeof doc.text !== "string"
            ? "Field `text` must be a string."
            : !Number.isInteger(doc.chunk_index)
              ? "Field `chunk_index` must be an int32."
              : typeof doc.book_id !== "string"
                ? "Field `book_id` must be a string."
                : reject(doc);
      return JSON.stringify(error ? { code: 400, document: line, error, success: false } : { success: true });
    });
    return { status: 200, text: lines.join("\n"), contentType: "text/plain; charset=utf8" };
  };
}

function searchResult(hits: { chunkIndex: number; text: string; textMatch: number }[], q: string): ScriptedResponse {
  return {
    json: {
      facet_counts: [],
      found: hits.length,
      out_of: 3,
      page: 1,
      request_params: { collection_name: BOOK, first_q: q, per_page: 10, q },
      search_cutoff: false,
      search_time_ms: 0,
      hits: hits.map((h) => ({
        document: { book_id: BOOK, chunk_index: h.chunkIndex, id: `${BOOK}:${h.chunkIndex}`, text: h.text },
        highlight: { text: { matched_tokens: ["Queen"], snippet: h.text.replace("Queen", "<mark>Queen</mark>") } },
        highlights: [{ field: "text", matched_tokens: ["Queen"], snippet: h.text.replace("Queen", "<mark>Queen</mark>") }],
        text_match: h.textMatch,
        text_match_info: {
          best_field_score: "1108091339008",
          best_field_weight: 15,
          fields_matched: 1,
          num_tokens_dropped: 0,
          score: String(h.textMatch),
          tokens_matched: 1,
          typo_prefix_score: 0,
        },
      })),
    },
  };
}

const serve = scriptedServer(contract);

const indexFor = (r: Recorder, options: Partial<TypesenseTextIndexOptions> = {}) =>
  createTypesenseTextIndex({ url: r.url, apiKey: KEY, maxRetries: 0, ...options });

const importedLines = (e: Exchange) => e.request.bodyText.split("\n").map((line) => JSON.parse(line) as unknown);

describe("choosing the text field's locale", () => {
  test.each([
    ["English prose keeps Typesense's default tokenizer", chunks.map((c) => c.text).join(" "), undefined],
    ["Urdu prose gets ICU word segmentation", urduChunks.map((c) => c.text).join(" "), ARABIC_SCRIPT_LOCALE],
    ["Arabic prose gets the same segmentation", "قالت الملكة بأعلى صوتها: اقطعوا رأسها!", ARABIC_SCRIPT_LOCALE],
    ["Persian prose gets the same segmentation", "آلیس کم‌کم از نشستن کنار خواهرش خسته می‌شد.", ARABIC_SCRIPT_LOCALE],
    ["English with a few Urdu words stays on the default", "The word for queen is ملکہ, said the tutor to Alice in the garden.", undefined],
    ["text without letters stays on the default", "1832. — 12, 13; 14!", undefined],
    ["empty text stays on the default", "", undefined],
  ])("%s", (_, sample, expected) => {
    expect(textLocaleFor(sample)).toBe(expected);
  });
});

describe("Typesense text index on the wire", () => {
  test("the first upsert creates the book's collection, then imports the chunks as JSONL upserts", async () => {
    const r = serve({ createCollection: CREATED, importDocuments: importAnswer() });
    await indexFor(r).upsert(BOOK, chunks);

    expect(operationIds(r)).toEqual(["createCollection", "importDocuments"]);
    const [create, imported] = r.exchanges as [Exchange, Exchange];
    expect(jsonBody(create)).toEqual({
      name: BOOK,
      fields: [
        { name: "text", type: "string" },
        { name: "chunk_index", type: "int32", sort: true },
        { name: "book_id", type: "string", facet: false },
      ],
      default_sorting_field: "chunk_index",
    });
    expect(imported.operation?.params).toEqual({ collectionName: BOOK });
    expect(queryOf(imported).action).toBe("upsert");
    expect(importedLines(imported)).toEqual(
      chunks.map((c) => ({ id: `${BOOK}:${c.chunkIndex}`, chunk_index: c.chunkIndex, text: c.text, book_id: BOOK })),
    );
    for (const e of r.exchanges) expect(e.request.headers["x-typesense-api-key"]).toBe(KEY);
    expect(r.problems()).toEqual([]);
  });

  test("an Urdu book's text field is created with the ICU-segmenting locale", async () => {
    const r = serve({ createCollection: { ...collection(0, ARABIC_SCRIPT_LOCALE), status: 201 }, importDocuments: importAnswer() });
    await indexFor(r).upsert(BOOK, urduChunks);
    const { fields } = jsonBody(r.calls("createCollection")[0]!) as { fields: { name: string; locale?: string }[] };
    expect(fields.find((f) => f.name === "text")?.locale).toBe(ARABIC_SCRIPT_LOCALE);
    expect(importedLines(r.calls("importDocuments")[0]!)).toHaveLength(2);
    expect(r.problems()).toEqual([]);
  });

  test("later upserts reuse the collection, and concurrent first upserts create it once", async () => {
    const r = serve({ createCollection: CREATED, importDocuments: importAnswer() });
    const index = indexFor(r);
    await Promise.all([index.upsert(BOOK, chunks.slice(0, 1)), index.upsert(BOOK, chunks.slice(1, 2))]);
    await index.upsert(BOOK, chunks.slice(2));
    expect(r.calls("createCollection")).toHaveLength(1);
    expect(r.calls("importDocuments")).toHaveLength(3);
    expect(r.problems()).toEqual([]);
  });

  test("imports are sent in batches of the configured size", async () => {
    const many = Array.from({ length: 5 }, (_, i) => ({ chunkIndex: i, text: `chunk number ${i}` }));
    const r = serve({ createCollection: CREATED, importDocuments: importAnswer() });
    await indexFor(r, { batchSize: 2 }).upsert(BOOK, many);
    const sent = r.calls("importDocuments").map((e) => importedLines(e).map((d) => (d as { chunk_index: number }).chunk_index));
    expect(sent).toEqual([[0, 1], [2, 3], [4]]);
    expect(r.problems()).toEqual([]);
  });

  test("an empty upsert sends nothing", async () => {
    const r = serve({});
    await indexFor(r).upsert(BOOK, []);
    expect(r.exchanges).toEqual([]);
  });

  test("a collection another worker created first (409) is adopted", async () => {
    const r = serve({ createCollection: { status: 409, json: { message: `A collection with name \`${BOOK}\` already exists.` } }, importDocuments: importAnswer() });
    await indexFor(r).upsert(BOOK, chunks);
    expect(operationIds(r)).toEqual(["createCollection", "importDocuments"]);
    expect(r.problems()).toEqual([]);
  });

  test("documents the server rejects line by line fail the upsert with the server's reason", async () => {
    const r = serve({
      createCollection: CREATED,
      importDocuments: importAnswer((doc) => (doc.chunk_index === 1 ? "Document exceeds the maximum size." : undefined)),
    });
    const err = await upstreamFailure(indexFor(r).upsert(BOOK, chunks));
    expect(err.service).toBe("typesense");
    expect(err.status).toBe(400);
    expect(err.message).toContain("rejected 1 of 3");
    expect(err.message).toContain("maximum size");
    expect(r.problems()).toEqual([]);
  });

  test("a collection deleted elsewhere is created again when an import finds it missing", async () => {
    let imports = 0;
    const r = serve({
      createCollection: CREATED,
      importDocuments: (req) => (++imports === 2 ? notFound() : importAnswer()(req)),
    });
    const index = indexFor(r);
    await index.upsert(BOOK, chunks.slice(0, 1));
    await index.upsert(BOOK, chunks.slice(1));
    expect(operationIds(r)).toEqual(["createCollection", "importDocuments", "importDocuments", "createCollection", "importDocuments"]);
    expect(r.problems()).toEqual([]);
  });

  test("search sends the query against the text field and returns chunks best first with their text_match scores", async () => {
    const r = serve({
      searchCollection: searchResult(
        [
          { chunkIndex: 2, text: chunks[2]!.text, textMatch: 578730123365187705 },
          { chunkIndex: 0, text: chunks[0]!.text, textMatch: 578730089005449337 },
        ],
        "the queen",
      ),
    });
    const hits = await indexFor(r).search(BOOK, "the queen");
    expect(hits.map((h) => h.chunkIndex)).toEqual([2, 0]);
    expect(hits[0]).toEqual({ chunkIndex: 2, text: chunks[2]!.text, score: 578730123365187705 });
    expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
    const [search] = r.calls("searchCollection") as [Exchange];
    expect(search.request.path).toBe(`/collections/${BOOK}/documents/search`);
    expect(queryOf(search)).toEqual({ q: "the queen", query_by: "text", per_page: "10" });
    expect(r.problems()).toEqual([]);
  });

  test("search with a spoiler limit filters on chunk_index <= the limit and honours the hit count", async () => {
    const r = serve({ searchCollection: searchResult([], "queen") });
    expect(await indexFor(r).search(BOOK, "queen", { maxChunkIndex: 41, limit: 3 })).toEqual([]);
    expect(queryOf(r.calls("searchCollection")[0]!)).toEqual({ q: "queen", query_by: "text", per_page: "3", filter_by: "chunk_index:<=41" });
    expect(r.problems()).toEqual([]);
  });

  test("a hit count above Typesense's page limit is capped at 250", async () => {
    const r = serve({ searchCollection: searchResult([], "queen") });
    await indexFor(r).search(BOOK, "queen", { limit: 1000 });
    expect(queryOf(r.calls("searchCollection")[0]!).per_page).toBe("250");
  });

  test("a blank query finds nothing without asking the server", async () => {
    const r = serve({});
    expect(await indexFor(r).search(BOOK, "   ")).toEqual([]);
    expect(r.exchanges).toEqual([]);
  });

  test("search in a book that has no collection finds nothing", async () => {
    const r = serve({ searchCollection: notFound(`Could not find a collection with name \`${BOOK}\`.`) });
    expect(await indexFor(r).search(BOOK, "queen")).toEqual([]);
    expect(r.problems()).toEqual([]);
  });

  test("get looks the chunks up with one wildcard search filtered to their indexes and returns them in the order asked", async () => {
    const r = serve({
      searchCollection: searchResult(
        [
          { chunkIndex: 2, text: chunks[2]!.text, textMatch: 100 },
          { chunkIndex: 0, text: chunks[0]!.text, textMatch: 100 },
        ],
        "*",
      ),
    });
    expect(await indexFor(r).get(BOOK, [0, 7, 2, 0])).toEqual([
      { chunkIndex: 0, text: chunks[0]!.text },
      { chunkIndex: 2, text: chunks[2]!.text },
    ]);
    const [search] = r.calls("searchCollection") as [Exchange];
    expect(search.request.path).toBe(`/collections/${BOOK}/documents/search`);
    expect(queryOf(search)).toEqual({ q: "*", query_by: "text", per_page: "3", filter_by: "chunk_index:[0,7,2]" });
    expect(r.problems()).toEqual([]);
  });

  test("get in a book that has no collection finds nothing, and get of no index asks nothing", async () => {
    const r = serve({ searchCollection: notFound(`Could not find a collection with name \`${BOOK}\`.`) });
    expect(await indexFor(r).get(BOOK, [1])).toEqual([]);
    expect(await indexFor(r).get(BOOK, [])).toEqual([]);
    expect(r.calls("searchCollection")).toHaveLength(1);
    expect(r.problems()).toEqual([]);
  });

  test("get refuses more than ten indexes without asking the server", async () => {
    const r = serve({});
    await expect(indexFor(r).get(BOOK, Array.from({ length: 11 }, (_, i) => i))).rejects.toBeInstanceOf(RangeError);
    expect(r.exchanges).toEqual([]);
  });

  test("a hit without the chunk fields is reported as an invalid response", async () => {
    const broken = searchResult([{ chunkIndex: 2, text: "x", textMatch: 1 }], "x");
    const json = broken.json as { hits: { document: Record<string, Json> }[] };
    json.hits[0]!.document = { id: `${BOOK}:2`, book_id: BOOK };
    const r = serve({ searchCollection: broken });
    expect((await upstreamFailure(indexFor(r).search(BOOK, "x"))).kind).toBe("invalid_response");
    expect(r.problems()).toEqual([]);
  });

  test("count reads the collection's document count", async () => {
    const r = serve({ getCollection: collection(1234) });
    expect(await indexFor(r).count(BOOK)).toBe(1234);
    expect(r.calls("getCollection")[0]?.request.method).toBe("GET");
    expect(r.problems()).toEqual([]);
  });

  test("count is 0 for a book that has no collection", async () => {
    const r = serve({ getCollection: notFound() });
    expect(await indexFor(r).count(BOOK)).toBe(0);
    expect(r.problems()).toEqual([]);
  });

  test("deleteBook drops the collection, a missing one is fine, and the next upsert creates it again", async () => {
    let deletes = 0;
    const r = serve({
      createCollection: CREATED,
      importDocuments: importAnswer(),
      deleteCollection: () => (++deletes === 1 ? collection(3) : notFound()),
    });
    const index = indexFor(r);
    await index.upsert(BOOK, chunks);
    await index.deleteBook(BOOK);
    await index.deleteBook(BOOK);
    await index.upsert(BOOK, chunks);
    expect(operationIds(r)).toEqual(["createCollection", "importDocuments", "deleteCollection", "deleteCollection", "createCollection", "importDocuments"]);
    expect(r.problems()).toEqual([]);
  });

  const failing = [
    ["upsert", "createCollection", (i: ReturnType<typeof indexFor>) => i.upsert(BOOK, chunks)],
    ["search", "searchCollection", (i: ReturnType<typeof indexFor>) => i.search(BOOK, "queen")],
    ["count", "getCollection", (i: ReturnType<typeof indexFor>) => i.count(BOOK)],
    ["get", "searchCollection", (i: ReturnType<typeof indexFor>) => i.get(BOOK, [0])],
    ["deleteBook", "deleteCollection", (i: ReturnType<typeof indexFor>) => i.deleteBook(BOOK)],
  ] as const;
  const SERVER_ERRORS = [
    [500, "Internal Server Error"],
    [503, "Not Ready or Lagging"],
  ] as const;

  for (const [status, message] of SERVER_ERRORS) {
    test.each(failing)(`%s fails with a retryable typesense UpstreamError carrying HTTP ${status}`, async (_, operationId, run) => {
      const r = serve({ [operationId]: { status, json: { message }, offSpec: "the document lists no 5xx answers; servers send {message}" } });
      const err = await upstreamFailure(run(indexFor(r)));
      expect(err.service).toBe("typesense");
      expect(err.kind).toBe("http");
      expect(err.status).toBe(status);
      expect(err.retryable).toBe(true);
      expect(err.message).toContain(message);
      expect(r.problems()).toEqual([]);
    });
  }

  test("a 503 is retried and the retry's answer is used", async () => {
    let calls = 0;
    const r = serve({
      getCollection: () => (++calls === 1 ? { status: 503, json: { message: "Not Ready or Lagging" }, offSpec: "undocumented 5xx" } : collection(7)),
    });
    expect(await indexFor(r, { maxRetries: 2, retryIntervalMs: 1 }).count(BOOK)).toBe(7);
    expect(r.calls("getCollection")).toHaveLength(2);
    expect(r.problems()).toEqual([]);
  });

  test("a bad API key is a non-retryable 401", async () => {
    const r = serve({ searchCollection: { status: 401, json: { message: "Forbidden - a valid `x-typesense-api-key` header must be sent." }, offSpec: "the document lists no 401 answer" } });
    const err = await upstreamFailure(indexFor(r).search(BOOK, "queen"));
    expect(err.status).toBe(401);
    expect(err.retryable).toBe(false);
  });

  test("a server that does not answer in time fails with a timeout error", async () => {
    const r = serve({ searchCollection: { hang: true } });
    const err = await upstreamFailure(indexFor(r, { timeoutMs: 100 }).search(BOOK, "queen"));
    expect(err.kind).toBe("timeout");
    expect(err.retryable).toBe(true);
  });

  test("an unreachable server fails with a connection error", async () => {
    const r = serve({});
    const { url } = r;
    await r.close();
    const err = await upstreamFailure(createTypesenseTextIndex({ url, apiKey: KEY, maxRetries: 0 }).count(BOOK));
    expect(err.kind).toBe("connection");
  });

  test("a path in the URL is kept as a prefix, for Typesense behind a reverse proxy", async () => {
    const r = serve({ getCollection: collection(2) }, { basePath: "/search" });
    expect(await createTypesenseTextIndex({ url: `${r.url}/search/`, apiKey: KEY }).count(BOOK)).toBe(2);
    expect(r.exchanges[0]?.request.path).toBe(`/collections/${BOOK}`);
    expect(r.problems()).toEqual([]);
  });
});

describe("the Typesense contract check itself", () => {
  const search = (query: [string, string][], headers: Record<string, string> = { "x-typesense-api-key": KEY }): RecordedRequest => ({
    method: "GET",
    path: `/collections/${BOOK}/documents/search`,
    query,
    headers,
    bodyText: "",
  });

  test("accepts a well-formed search", () => {
    expect(contract.validateRequest(search([["q", "queen"], ["query_by", "text"], ["per_page", "10"]])).problems).toEqual([]);
  });

  test("rejects a misspelled search parameter", () => {
    const { problems } = contract.validateRequest(search([["q", "queen"], ["query_by", "text"], ["perpage", "10"]]));
    expect(problems.join("\n")).toContain("perpage");
  });

  test("rejects a page size that is not a number", () => {
    const { problems } = contract.validateRequest(search([["q", "queen"], ["per_page", "ten"]]));
    expect(problems.join("\n")).toContain("per_page");
  });

  test("rejects a request without the API key header", () => {
    const { problems } = contract.validateRequest(search([["q", "queen"]], {}));
    expect(problems.join("\n")).toContain("credentials");
  });

  test("rejects a collection schema with a misspelled field", () => {
    const { problems } = contract.validateRequest({
      method: "POST",
      path: "/collections",
      query: [],
      headers: { "x-typesense-api-key": KEY, "content-type": "application/json" },
      bodyText: JSON.stringify({ name: BOOK, fields: [{ name: "text", type: "string" }], default_sort_field: "chunk_index" }),
    });
    expect(problems.join("\n")).toContain("default_sort_field");
  });

  test("rejects an import line that is not a JSON object", () => {
    const { problems } = contract.validateRequest({
      method: "POST",
      path: `/collections/${BOOK}/documents/import`,
      query: [["action", "upsert"]],
      headers: { "x-typesense-api-key": KEY, "content-type": "text/plain" },
      bodyText: `{"id":"a","text":"x"}\n[1,2]`,
    });
    expect(problems).toEqual(["importDocuments: body line 2: not a JSON object"]);
  });

  test("rejects an import action the server does not know", () => {
    const { problems } = contract.validateRequest({
      method: "POST",
      path: `/collections/${BOOK}/documents/import`,
      query: [["action", "replace"]],
      headers: { "x-typesense-api-key": KEY, "content-type": "text/plain" },
      bodyText: `{"id":"a"}`,
    });
    expect(problems.join("\n")).toContain("action");
  });

  test("rejects a search response whose hit count is not a number", () => {
    const operation = contract.match("GET", `/collections/${BOOK}/documents/search`)!;
    expect(contract.validateResponse(operation, 200, "application/json", JSON.stringify({ found: "two", hits: [] }))).not.toEqual([]);
  });
});

subsetFreshnessTest("Typesense", TYPESENSE_SPEC_FILE, typesenseSubset, extractTypesenseSubset);

const live = liveTypesense();
if (live.skip) console.log(`skipping live Typesense suite: ${live.skip}`);
describe.skipIf(live.skip !== undefined)("Typesense text index against a live server", () => {
  const connect = () => (live.skip === undefined ? createTypesenseTextIndex({ url: live.url, apiKey: live.apiKey ?? "" }) : undefined)!;

  test("stores chunks, finds them by keyword, honours the spoiler filter, counts and deletes", async () => {
    const index = connect();
    const book = crypto.randomUUID();
    try {
      await index.upsert(book, chunks);
      expect(await index.count(book)).toBe(3);
      const [best] = await index.search(book, "Queen shouted");
      expect(best?.chunkIndex).toBe(2);
      expect(await index.search(book, "Queen shouted", { maxChunkIndex: 1 })).toEqual([]);
      await index.upsert(book, [{ chunkIndex: 2, text: "The Queen whispered instead." }]);
      expect(await index.count(book)).toBe(3);
      expect(await index.get(book, [2, 0])).toEqual([
        { chunkIndex: 2, text: "The Queen whispered instead." },
        { chunkIndex: 0, text: chunks[0]!.text },
      ]);
      await index.deleteBook(book);
      expect(await index.count(book)).toBe(0);
      expect(await index.search(book, "Queen")).toEqual([]);
    } finally {
      await index.deleteBook(book);
    }
  });

  test("finds an Urdu word that the text writes against its punctuation", async () => {
    const index = connect();
    const book = crypto.randomUUID();
    try {
      await index.upsert(book, urduChunks);
      // "کہا۔" in the text: the Urdu full stop must not be part of the indexed word.
      expect((await index.search(book, "کہا")).map((h) => h.chunkIndex)).toEqual([0]);
      expect((await index.search(book, "ایلس")).map((h) => h.chunkIndex)).toEqual([1]);
    } finally {
      await index.deleteBook(book);
    }
  });
});
