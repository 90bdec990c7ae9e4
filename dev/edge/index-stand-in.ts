/**
 * Qdrant and Typesense as one loopback server that keeps what it is sent and answers searches over
 * it, for suites that need the production index adapters to work end to end where neither server
 * can be installed. Both speak the wire format of the published documents: every request and every
 * answer is checked against the same contracts as the wire suites (tests/support/index-contracts.ts).
 *
 *   const indexes = startIndexStandIn();
 *   // QDRANT_URL=indexes.qdrant.url, QDRANT_API_KEY=indexes.qdrant.apiKey, and the same for TYPESENSE_
 *   indexes.problems();                       // [] while every exchange kept to the contract
 *   indexes.typesense.documents(bookId);      // what the adapter stored
 *
 * Only what the adapters call is served (common/vector/qdrant.ts, common/text-index/typesense.ts):
 *
 *   Qdrant     create a collection (one unnamed vector, Cosine or Dot), create a payload index,
 *              upsert points, query by a vector (a filter of must/should/must_not over match and
 *              range conditions and has_id), count points, drop a collection.
 *   Typesense  create, describe and drop a collection, import documents (JSON lines, create or
 *              upsert), search: `q` over the `query_by` fields ranked by BM25 (tokens are runs of
 *              letters and digits, case and accents folded; no typos, prefixes or dropped tokens),
 *              or `*` for every document; `filter_by` clauses joined by `&&` (numeric comparisons
 *              and lists, `field:=value` and `field:=[a,b]` on strings).
 *
 * Anything else (another operation, parameter or filter form) is not guessed at: it is answered with
 * a 500 and listed by `problems()`, so a suite notices when an adapter starts asking for more.
 */
import { checkExchange, recordRequest, type Contract, type Exchange, type Json, type RecordedRequest, type Responder, type ScriptedResponse } from "../../tests/support/openapi-recorder.ts";
import { qdrantContract, typesenseContract } from "../../tests/support/index-contracts.ts";

export const QDRANT_PATH = "/qdrant";
export const TYPESENSE_PATH = "/typesense";

type JsonObject = { [key: string]: Json };

export interface StoredPoint {
  id: number | string;
  vector: number[];
  payload: JsonObject;
  /** The operation that wrote it. */
  version: number;
}

export interface StandInService {
  /** What the adapter is configured with: the server's address and this service's mount point. */
  readonly url: string;
  readonly apiKey: string;
  readonly exchanges: readonly Exchange[];
  /** Exchanges of one operationId, in order. */
  calls(operationId: string): Exchange[];
}

export interface IndexStandIn {
  readonly url: string;
  readonly qdrant: StandInService & {
    /** The points of a collection, by id; [] when it does not exist. */
    points(collection: string): StoredPoint[];
  };
  readonly typesense: StandInService & {
    /** The documents of a collection, in import order; [] when it does not exist. */
    documents(collection: string): JsonObject[];
  };
  /** Every request or answer that broke its contract, and every call the stand-in does not serve. */
  problems(): string[];
  close(): Promise<void>;
}

export interface IndexStandInOptions {
  qdrantApiKey?: string;
  typesenseApiKey?: string;
}

/** A call the stand-in does not serve: recorded as a problem and answered with a 500. */
class Unsupported extends Error {
  constructor(what: string) {
    super(`the index stand-in does not serve ${what}`);
  }
}

const isObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value);

function jsonBody(request: RecordedRequest): unknown {
  try {
    return JSON.parse(request.bodyText);
  } catch {
    return undefined;
  }
}

function refuseKeys(where: string, object: JsonObject, allowed: readonly string[]): void {
  const extra = Object.keys(object).filter((k) => !allowed.includes(k) && object[k] !== null);
  if (extra.length > 0) throw new Unsupported(`${where} with ${extra.join(", ")}`);
}

/** One service of the stand-in: what tests read of it, and how it answers a request. */
function createService(contract: Contract, url: string, apiKey: string, respond: Responder) {
  const exchanges: Exchange[] = [];
  const service: StandInService = {
    url,
    apiKey,
    exchanges,
    calls: (operationId) => exchanges.filter((e) => e.operation?.operationId === operationId),
  };
  const handle = (request: RecordedRequest): Response => {
    const { exchange, response } = checkExchange(contract, request, respond);
    exchanges.push(exchange);
    return response ?? new Response(null, { status: 500 });
  };
  return { service, handle };
}

// ---------------------------------------------------------------------------------------------
// Qdrant

type Distance = "Cosine" | "Dot";

interface QdrantCollection {
  size: number;
  distance: Distance;
  points: Map<string, StoredPoint>;
  operations: number;
}

const qdrantOk = (result: Json): ScriptedResponse => ({ json: { result, status: "ok", time: 0.0001 } });
const qdrantError = (status: number, error: string): ScriptedResponse => ({ status, json: { status: { error }, time: 0.0001 } });
const collectionMissing = (name: string) => qdrantError(404, `Not found: Collection \`${name}\` doesn't exist!`);

const dot = (a: readonly number[], b: readonly number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);

/** Qdrant keeps a Cosine collection's vectors normalised, so its score is a dot product. */
function normalised(vector: readonly number[]): number[] {
  const norm = Math.hypot(...vector);
  return norm === 0 ? [...vector] : vector.map((x) => x / norm);
}

function isPointId(id: unknown): id is number | string {
  return (Number.isSafeInteger(id) && (id as number) >= 0) || (typeof id === "string" && /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(id));
}

const asList = (value: Json | undefined): Json[] => (value === undefined || value === null ? [] : Array.isArray(value) ? value : [value]);

/** Whether a point passes a Qdrant filter: every `must`, no `must_not`, and one `should` when there are any. */
function passesFilter(filter: Json | undefined, point: StoredPoint): boolean {
  if (filter === undefined || filter === null) return true;
  if (!isObject(filter)) throw new Unsupported(`a filter that is not an object`);
  refuseKeys("a filter", filter, ["must", "should", "must_not"]);
  const should = asList(filter.should);
  return (
    asList(filter.must).every((c) => passesCondition(c, point)) &&
    !asList(filter.must_not).some((c) => passesCondition(c, point)) &&
    (should.length === 0 || should.some((c) => passesCondition(c, point)))
  );
}

function passesCondition(condition: Json, point: StoredPoint): boolean {
  if (!isObject(condition)) throw new Unsupported("a filter condition that is not an object");
  if ("has_id" in condition) return asList(condition.has_id).some((id) => String(id) === String(point.id));
  if ("must" in condition || "should" in condition || "must_not" in condition) return passesFilter(condition, point);
  if (typeof condition.key !== "string") throw new Unsupported(`the filter condition ${JSON.stringify(condition)}`);
  refuseKeys("a field condition", condition, ["key", "match", "range"]);
  if (/[.[\]]/.test(condition.key)) throw new Unsupported(`nested payload keys (${condition.key})`);
  const stored = point.payload[condition.key];
  const values = Array.isArray(stored) ? stored : stored === undefined ? [] : [stored];
  const { match, range } = condition;
  if (!isObject(match) && !isObject(range)) throw new Unsupported(`the field condition ${JSON.stringify(condition)}`);
  let passes = true;
  if (isObject(match)) {
    if ("value" in match) passes &&= values.some((v) => v === match.value);
    else if (Array.isArray(match.any)) passes &&= values.some((v) => (match.any as Json[]).includes(v));
    else throw new Unsupported(`the match ${JSON.stringify(match)}`);
  }
  if (isObject(range)) {
    refuseKeys("a range", range, ["lt", "lte", "gt", "gte"]);
    const bound = (key: string) => (typeof range[key] === "number" ? (range[key] as number) : undefined);
    const [lt, lte, gt, gte] = [bound("lt"), bound("lte"), bound("gt"), bound("gte")];
    passes &&= values.some(
      (v) => typeof v === "number" && (lt === undefined || v < lt) && (lte === undefined || v <= lte) && (gt === undefined || v > gt) && (gte === undefined || v >= gte),
    );
  }
  return passes;
}

function byPointId(a: StoredPoint, b: StoredPoint): number {
  if (typeof a.id === "number" && typeof b.id === "number") return a.id - b.id;
  return typeof a.id === "number" ? -1 : typeof b.id === "number" ? 1 : a.id.localeCompare(b.id);
}

function qdrantResponder(apiKey: string, collections: Map<string, QdrantCollection>): Responder {
  return (request, operation) => {
    if (!operation) return { status: 404, json: { status: { error: "Not found" } }, offSpec: "no operation of the contract matches the path" };
    if (request.headers["api-key"] !== apiKey && request.headers.authorization !== `Bearer ${apiKey}`) {
      return qdrantError(401, "Must provide an API key or an Authorization bearer token");
    }
    if (operation.operationId === "healthz") return { status: 200, text: "healthz check passed" };
    const name = operation.params.collection_name!;
    const collection = collections.get(name);
    const query = new Map(request.query);
    const body = request.bodyText === "" ? {} : jsonBody(request);
    if (!isObject(body)) return qdrantError(400, "Format error in JSON body: expected an object");

    switch (operation.operationId) {
      case "create_collection": {
        refuseKeys("a collection", body, ["vectors"]);
        const vectors = body.vectors;
        if (!isObject(vectors) || typeof vectors.size !== "number") throw new Unsupported("collections without one unnamed vector");
        refuseKeys("vector parameters", vectors, ["size", "distance"]);
        if (vectors.distance !== "Cosine" && vectors.distance !== "Dot") throw new Unsupported(`the ${String(vectors.distance)} distance`);
        if (collection) return qdrantError(409, `Wrong input: Collection \`${name}\` already exists!`);
        collections.set(name, { size: vectors.size, distance: vectors.distance, points: new Map(), operations: 0 });
        return qdrantOk(true);
      }
      case "delete_collection":
        return qdrantOk(collections.delete(name));
    }
    if (!collection) return collectionMissing(name);
    const updated = () => qdrantOk({ operation_id: collection.operations, status: query.get("wait") === "true" ? "completed" : "acknowledged" });

    switch (operation.operationId) {
      case "create_field_index": {
        // An index only speeds filters up: every filter here is a scan.
        refuseKeys("a payload index", body, ["field_name", "field_schema"]);
        collection.operations++;
        return updated();
      }
      case "upsert_points": {
        refuseKeys("an upsert", body, ["points"]);
        if (!Array.isArray(body.points)) throw new Unsupported("upserts of column batches");
        const points: StoredPoint[] = [];
        const version = collection.operations + 1;
        for (const point of body.points) {
          if (!isObject(point)) return qdrantError(400, "Format error in JSON body: a point is not an object");
          refuseKeys("a point", point, ["id", "vector", "payload"]);
          if (!isPointId(point.id)) return qdrantError(400, `Format error in JSON body: ${JSON.stringify(point.id)} is not an unsigned integer or a UUID`);
          const vector = point.vector;
          if (!Array.isArray(vector) || !vector.every((x) => typeof x === "number")) throw new Unsupported("points without one unnamed dense vector");
          if (vector.length !== collection.size) return qdrantError(400, `Wrong input: Vector dimension error: expected dim: ${collection.size}, got ${vector.length}`);
          const numbers = vector as number[];
          points.push({
            id: point.id,
            vector: collection.distance === "Cosine" ? normalised(numbers) : numbers,
            payload: isObject(point.payload) ? structuredClone(point.payload) : {},
            version,
          });
        }
        // All or nothing, as the server applies one request.
        for (const point of points) collection.points.set(String(point.id), point);
        collection.operations = version;
        return updated();
      }
      case "query_points": {
        refuseKeys("a query", body, ["query", "limit", "offset", "with_payload", "filter"]);
        const nearest = isObject(body.query) ? body.query.nearest : body.query;
        if (!Array.isArray(nearest) || !nearest.every((x) => typeof x === "number")) throw new Unsupported(`the query ${JSON.stringify(body.query ?? null)}`);
        if (nearest.length !== collection.size) return qdrantError(400, `Wrong input: Vector dimension error: expected dim: ${collection.size}, got ${nearest.length}`);
        const withPayload = body.with_payload ?? false;
        if (typeof withPayload !== "boolean") throw new Unsupported("payload selectors");
        const q = collection.distance === "Cosine" ? normalised(nearest as number[]) : (nearest as number[]);
        const limit = typeof body.limit === "number" ? body.limit : 10;
        const offset = typeof body.offset === "number" ? body.offset : 0;
        const scored = [...collection.points.values()]
          .filter((p) => passesFilter(body.filter, p))
          .map((p) => ({ point: p, score: Math.fround(dot(q, p.vector)) }))
          .sort((a, b) => b.score - a.score || byPointId(a.point, b.point))
          .slice(offset, offset + limit);
        return qdrantOk({
          points: scored.map(({ point, score }) => ({ id: point.id, version: point.version, score, ...(withPayload ? { payload: point.payload } : {}) })),
        });
      }
      case "count_points": {
        refuseKeys("a count", body, ["exact", "filter"]);
        return qdrantOk({ count: [...collection.points.values()].filter((p) => passesFilter(body.filter, p)).length });
      }
    }
    throw new Unsupported(`the Qdrant operation ${operation.operationId}`);
  };
}

// ---------------------------------------------------------------------------------------------
// Typesense

interface TypesenseField {
  name: string;
  type: string;
  optional: boolean;
  [key: string]: Json;
}

interface TypesenseCollection {
  name: string;
  fields: TypesenseField[];
  defaultSortingField: string;
  createdAt: number;
  documents: Map<string, JsonObject>;
  autoIds: number;
}

const NUMERIC_TYPES = new Set(["int32", "int64", "float"]);
const TEXT_TYPES = new Set(["string", "string[]"]);
const FIELD_TYPES = new Set([...NUMERIC_TYPES, ...TEXT_TYPES, "bool"]);
/** Typesense refuses larger pages. */
const MAX_PER_PAGE = 250;
const BM25_K1 = 1.2;
const BM25_B = 0.75;
/** text_match is an integer: BM25 scores are scaled to keep their order. */
const TEXT_MATCH_SCALE = 1_000_000;
/** The wildcard's text_match, as the server gives every document of a `*` search. */
const WILDCARD_TEXT_MATCH = 100;

const message = (status: number, text: string): ScriptedResponse => ({ status, json: { message: text } });

/** Runs of letters and digits, lower-cased with accents folded. */
function searchTokens(text: string): string[] {
  return text.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

function fieldProblem(field: TypesenseField, value: Json | undefined): string | undefined {
  if (value === undefined || value === null) return field.optional ? undefined : `Field \`${field.name}\` has been declared in the schema, but is not found in the document.`;
  const fits =
    field.type === "string"
      ? typeof value === "string"
      : field.type === "string[]"
        ? Array.isArray(value) && value.every((v) => typeof v === "string")
        : field.type === "int32"
          ? Number.isInteger(value) && (value as number) >= -(2 ** 31) && (value as number) < 2 ** 31
          : field.type === "int64"
            ? Number.isInteger(value)
            : field.type === "float"
              ? typeof value === "number"
              : typeof value === "boolean";
  return fits ? undefined : `Field \`${field.name}\` must be ${field.type === "int32" || field.type === "int64" ? "an" : "a"} ${field.type}.`;
}

function describeCollection(c: TypesenseCollection): JsonObject {
  return {
    name: c.name,
    created_at: c.createdAt,
    num_documents: c.documents.size,
    default_sorting_field: c.defaultSortingField,
    enable_nested_fields: false,
    symbols_to_index: [],
    token_separators: [],
    fields: c.fields,
  };
}

/** A `filter_by` as a predicate: clauses joined by `&&`, each a comparison, a list, or an exact string match. */
function parseFilter(expression: string, collection: TypesenseCollection): ((doc: JsonObject) => boolean) | ScriptedResponse {
  if (/\|\||[()]/.test(expression)) throw new Unsupported(`the filter ${expression} (only clauses joined by &&)`);
  const clauses: ((doc: JsonObject) => boolean)[] = [];
  for (const clause of expression.split("&&").map((c) => c.trim())) {
    const parsed = /^([A-Za-z_][\w]*)\s*:\s*(.*)$/s.exec(clause);
    if (!parsed) return message(400, `Could not parse the filter query: \`${clause}\`.`);
    const [, name, rest] = parsed as unknown as [string, string, string];
    const field = collection.fields.find((f) => f.name === name);
    if (!field) return message(404, `Could not find a filter field named \`${name}\` in the schema.`);
    const operator = /^(<=|>=|<|>|!=|=)?\s*(.*)$/s.exec(rest)!;
    const op = operator[1] ?? "";
    const operand = operator[2]!.trim();
    const list = /^\[(.*)\]$/s.exec(operand);
    const items = (list ? list[1]!.split(",") : [operand]).map((v) => v.trim().replace(/^`(.*)`$/s, "$1"));
    const valuesOf = (doc: JsonObject) => {
      const v = doc[name];
      return Array.isArray(v) ? v : v === undefined || v === null ? [] : [v];
    };
    if (NUMERIC_TYPES.has(field.type)) {
      if (items.some((v) => v.includes(".."))) throw new Unsupported(`numeric ranges in a filter (${clause})`);
      const numbers = items.map(Number);
      if (items.some((v) => v === "" || !Number.isFinite(Number(v)))) return message(400, `Error with filter field \`${name}\`: Not an ${field.type}.`);
      if (list && !["", "=", "!="].includes(op)) return message(400, `Could not parse the filter query: \`${clause}\`.`);
      const n = numbers[0]!;
      const test: (v: number) => boolean =
        list || op === "" || op === "="
          ? (v) => numbers.includes(v)
          : op === "!="
            ? (v) => !numbers.includes(v)
            : op === "<="
              ? (v) => v <= n
              : op === "<"
                ? (v) => v < n
                : op === ">="
                  ? (v) => v >= n
                  : (v) => v > n;
      const negated = op === "!=";
      clauses.push((doc) => {
        const values = valuesOf(doc).filter((v): v is number => typeof v === "number");
        return negated ? values.every(test) : values.some(test);
      });
    } else if (TEXT_TYPES.has(field.type) || field.type === "bool") {
      if (op !== "=" && op !== "!=") throw new Unsupported(`token matches in a filter (${clause}); use ${name}:=`);
      const wanted = field.type === "bool" ? items.map((v) => v === "true") : items;
      clauses.push((doc) => {
        const found = valuesOf(doc).some((v) => (wanted as Json[]).includes(v));
        return op === "=" ? found : !found;
      });
    } else throw new Unsupported(`filters on ${field.type} fields`);
  }
  return (doc) => clauses.every((c) => c(doc));
}

/** Ranks documents for a keyword query by BM25 over the `query_by` fields; those matching no token are left out. */
function rankByBm25(collection: TypesenseCollection, fields: readonly string[], q: string, candidates: readonly JsonObject[]) {
  const terms = [...new Set(searchTokens(q))];
  const tokensOf = (doc: JsonObject) => fields.flatMap((f) => asList(doc[f]).flatMap((v) => (typeof v === "string" ? searchTokens(v) : [])));
  const all = [...collection.documents.values()].map(tokensOf);
  const averageLength = all.reduce((n, tokens) => n + tokens.length, 0) / Math.max(1, all.length);
  const documentFrequency = new Map(terms.map((t) => [t, all.filter((tokens) => tokens.includes(t)).length]));
  const idf = (t: string) => Math.log(1 + (all.length - documentFrequency.get(t)! + 0.5) / (documentFrequency.get(t)! + 0.5));
  return candidates.flatMap((doc) => {
    const tokens = tokensOf(doc);
    const matched = terms.filter((t) => tokens.includes(t));
    if (matched.length === 0) return [];
    const score = matched.reduce((sum, t) => {
      const tf = tokens.filter((x) => x === t).length;
      return sum + (idf(t) * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + (BM25_B * tokens.length) / (averageLength || 1)));
    }, 0);
    return [{ doc, textMatch: Math.max(1, Math.round(score * TEXT_MATCH_SCALE)), tokensMatched: matched.length }];
  });
}

function typesenseResponder(apiKey: string, collections: Map<string, TypesenseCollection>): Responder {
  return (request, operation) => {
    if (!operation) return { ...message(404, "Not Found"), offSpec: "no operation of the contract matches the path" };
    const query = new Map(request.query);
    if (request.headers["x-typesense-api-key"] !== apiKey && query.get("x-typesense-api-key") !== apiKey) {
      return { ...message(401, "Forbidden - a valid `x-typesense-api-key` header must be sent."), offSpec: "the document lists no 401 answer" };
    }
    const refuseParameters = (allowed: readonly string[]) => {
      const extra = [...query.keys()].filter((k) => k !== "x-typesense-api-key" && !allowed.includes(k));
      if (extra.length > 0) throw new Unsupported(`${operation.operationId} with ${extra.join(", ")}`);
    };

    if (operation.operationId === "health") return { json: { ok: true } };
    if (operation.operationId === "createCollection") {
      const body = jsonBody(request);
      if (!isObject(body)) return message(400, "Bad JSON.");
      refuseKeys("a collection", body, ["name", "fields", "default_sorting_field"]);
      const { name, fields } = body;
      if (typeof name !== "string" || !Array.isArray(fields)) return message(400, "Parameter `name` and `fields` are required.");
      const declared: TypesenseField[] = [];
      for (const field of fields) {
        if (!isObject(field) || typeof field.name !== "string" || typeof field.type !== "string") return message(400, "Wrong format for `fields`.");
        if (!FIELD_TYPES.has(field.type) || /[.*]/.test(field.name)) throw new Unsupported(`the field ${JSON.stringify(field)}`);
        refuseKeys("a field", field, ["name", "type", "optional", "facet", "index", "sort", "locale", "infix", "stem", "store"]);
        declared.push({
          facet: false,
          index: true,
          infix: false,
          locale: "",
          sort: NUMERIC_TYPES.has(field.type),
          stem: false,
          stem_dictionary: "",
          store: true,
          ...field,
          name: field.name,
          type: field.type,
          optional: field.optional === true,
        });
      }
      const sorting = typeof body.default_sorting_field === "string" ? body.default_sorting_field : "";
      if (sorting && !declared.some((f) => f.name === sorting && NUMERIC_TYPES.has(f.type))) {
        return message(400, `Default sorting field is defined as \`${sorting}\` but is not found in the schema.`);
      }
      if (collections.has(name)) return message(409, `A collection with name \`${name}\` already exists.`);
      const collection: TypesenseCollection = { name, fields: declared, defaultSortingField: sorting, createdAt: Math.floor(Date.now() / 1000), documents: new Map(), autoIds: 0 };
      collections.set(name, collection);
      return { status: 201, json: describeCollection(collection) };
    }

    const name = operation.params.collectionName!;
    const collection = collections.get(name);
    if (!collection) return message(404, `Could not find a collection with name \`${name}\`.`);

    switch (operation.operationId) {
      case "getCollection":
        return { json: describeCollection(collection) };
      case "deleteCollection":
        collections.delete(name);
        return { json: describeCollection(collection) };
      case "importDocuments": {
        refuseParameters(["action", "batch_size", "throwOnFail"]);
        const action = query.get("action") ?? "create";
        if (action !== "create" && action !== "upsert") throw new Unsupported(`imports with action=${action}`);
        const results = request.bodyText
          .split("\n")
          .filter((line) => line.trim() !== "")
          .map((line) => {
            const failed = (code: number, error: string) => ({ code, document: line, error, success: false });
            let doc: unknown;
            try {
              doc = JSON.parse(line);
            } catch {
              return failed(400, "Bad JSON.");
            }
            if (!isObject(doc)) return failed(400, "Bad JSON: not a properly formed document.");
            if (doc.id !== undefined && typeof doc.id !== "string") return failed(400, "Document's `id` field should be a string.");
            const id = doc.id ?? String(collection.autoIds++);
            if (action === "create" && collection.documents.has(id)) return failed(409, `A document with id ${id} already exists.`);
            const problem = collection.fields.map((f) => fieldProblem(f, doc[f.name])).find((p) => p !== undefined);
            if (problem) return failed(400, problem);
            // An upsert replaces the document; its place in the import order is kept.
            collection.documents.set(id, { ...structuredClone(doc), id });
            return { success: true };
          });
        return { text: results.map((r) => JSON.stringify(r)).join("\n"), contentType: "text/plain; charset=utf8" };
      }
      case "searchCollection": {
        refuseParameters(["q", "query_by", "per_page", "page", "filter_by"]);
        const q = query.get("q");
        if (q === undefined) return message(400, "Parameter `q` is required.");
        const wildcard = q.trim() === "*";
        const queryBy = (query.get("query_by") ?? "").split(",").map((f) => f.trim()).filter(Boolean);
        if (!wildcard && queryBy.length === 0) return message(400, "Parameter `query_by` is required.");
        for (const f of queryBy) {
          const field = collection.fields.find((x) => x.name === f);
          if (!field || !TEXT_TYPES.has(field.type)) return message(404, `Could not find a field named \`${f}\` in the schema.`);
        }
        const perPage = Number(query.get("per_page") ?? 10);
        const page = Number(query.get("page") ?? 1);
        if (!Number.isInteger(perPage) || perPage < 0 || perPage > MAX_PER_PAGE) throw new Unsupported(`per_page=${query.get("per_page")}`);
        if (!Number.isInteger(page) || page < 1) return message(400, "Parameter `page` must be an unsigned integer.");
        let candidates = [...collection.documents.values()];
        const filterBy = query.get("filter_by");
        if (filterBy !== undefined && filterBy.trim() !== "") {
          const filter = parseFilter(filterBy, collection);
          if (typeof filter !== "function") return filter;
          candidates = candidates.filter(filter);
        }
        const sortValue = (doc: JsonObject) => (collection.defaultSortingField ? Number(doc[collection.defaultSortingField] ?? 0) : 0);
        const ranked = wildcard
          ? candidates.map((doc) => ({ doc, textMatch: WILDCARD_TEXT_MATCH, tokensMatched: 0 }))
          : rankByBm25(collection, queryBy, q, candidates);
        // The server breaks ties by the default sorting field, largest first.
        ranked.sort((a, b) => b.textMatch - a.textMatch || sortValue(b.doc) - sortValue(a.doc));
        const hits = ranked.slice((page - 1) * perPage, page * perPage).map(({ doc, textMatch, tokensMatched }) => ({
          document: doc,
          highlight: {},
          highlights: [],
          text_match: textMatch,
          text_match_info: {
            best_field_score: String(textMatch),
            best_field_weight: 15,
            fields_matched: tokensMatched > 0 ? 1 : 0,
            num_tokens_dropped: 0,
            score: String(textMatch),
            tokens_matched: tokensMatched,
            typo_prefix_score: 0,
          },
        }));
        return {
          json: {
            facet_counts: [],
            found: ranked.length,
            hits,
            out_of: collection.documents.size,
            page,
            request_params: { collection_name: name, first_q: q, per_page: perPage, q },
            search_cutoff: false,
            search_time_ms: 0,
          },
        };
      }
    }
    throw new Unsupported(`the Typesense operation ${operation.operationId}`);
  };
}

// ---------------------------------------------------------------------------------------------

export function startIndexStandIn(options: IndexStandInOptions = {}): IndexStandIn {
  const qdrantCollections = new Map<string, QdrantCollection>();
  const typesenseCollections = new Map<string, TypesenseCollection>();
  /** Mount point -> service; filled once the server's port is known. */
  const services = new Map<string, ReturnType<typeof createService>>();
  const strays: string[] = [];

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const { pathname } = new URL(req.url);
      for (const [prefix, service] of services) {
        if (pathname.startsWith(`${prefix}/`)) return service.handle(await recordRequest(req, prefix));
      }
      strays.push(`no service at ${req.method} ${pathname}`);
      return new Response("not found", { status: 404 });
    },
  });
  const url = `http://127.0.0.1:${server.port}`;
  const qdrantKey = options.qdrantApiKey ?? "stand-in-qdrant-key";
  const typesenseKey = options.typesenseApiKey ?? "stand-in-typesense-key";
  const qdrant = createService(qdrantContract(), `${url}${QDRANT_PATH}`, qdrantKey, qdrantResponder(qdrantKey, qdrantCollections));
  const typesense = createService(typesenseContract(), `${url}${TYPESENSE_PATH}`, typesenseKey, typesenseResponder(typesenseKey, typesenseCollections));
  services.set(QDRANT_PATH, qdrant).set(TYPESENSE_PATH, typesense);

  return {
    url,
    qdrant: {
      ...qdrant.service,
      points: (collection) => [...(qdrantCollections.get(collection)?.points.values() ?? [])].sort(byPointId),
    },
    typesense: {
      ...typesense.service,
      documents: (collection) => [...(typesenseCollections.get(collection)?.documents.values() ?? [])],
    },
    problems: () => [...strays, ...[qdrant, typesense].flatMap(({ service }) => service.exchanges.flatMap((e) => e.problems))],
    close: () => server.stop(true),
  };
}
