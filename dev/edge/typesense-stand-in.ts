/** Typesense's side of the index stand-in (dev/edge/index-stand-in.ts): the collections it keeps and how it answers. */
import type { Json, Responder, ScriptedResponse } from "../../tests/support/openapi-recorder.ts";
import { asList, isObject, jsonBody, refuseKeys, Unsupported, type JsonObject } from "./stand-in-requests.ts";

interface TypesenseField {
  name: string;
  type: string;
  optional: boolean;
  [key: string]: Json;
}

export interface TypesenseCollection {
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

export function typesenseResponder(apiKey: string, collections: Map<string, TypesenseCollection>): Responder {
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
