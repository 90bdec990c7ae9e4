/**
 * Wire-contract testing for HTTP adapters whose servers cannot run here (Qdrant, Typesense).
 *
 * `loadContract` turns an OpenAPI 3.0 document into request and response validators;
 * `startRecorder` is a loopback server that records every request the adapter's SDK sends,
 * checks it against the contract, answers with a scripted response and checks that response
 * against the contract too, so the scripted answers are provably shaped like the real server's.
 */
import Ajv, { type ErrorObject, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export interface RecordedRequest {
  method: string;
  /** Raw (still percent-encoded) path. */
  path: string;
  query: [string, string][];
  /** Lower-cased header names. */
  headers: Record<string, string>;
  bodyText: string;
}

export interface MatchedOperation {
  method: string;
  template: string;
  operationId: string;
  /** Decoded path parameters. */
  params: Record<string, string>;
}

export interface ScriptedResponse {
  status?: number;
  json?: unknown;
  text?: string;
  contentType?: string;
  headers?: Record<string, string>;
  /** Never answer (until the recorder closes): lets tests drive client-side timeouts. */
  hang?: boolean;
  /** Why this response may fall outside the spec, e.g. a 5xx the spec does not document. */
  offSpec?: string;
}

export interface Erratum {
  /** JSON pointer into the document. */
  pointer: string;
  value: Json;
  reason: string;
}

export interface ContractOptions {
  /** Demand one of the spec's credentialed security alternatives (an anonymous `{}` one does not count). */
  requireCredentials?: boolean;
  /** Content types an SDK or server sends in place of the documented one (sent -> documented), both directions. */
  contentTypeAliases?: Record<string, string>;
  /** Query keys an SDK adds that the spec does not declare and servers ignore. */
  ignoredQueryParameters?: readonly string[];
  /** operationIds whose body is JSON lines: every line must be a JSON object. */
  jsonLinesOperations?: readonly string[];
  /** Known defects of the published document, patched before use. */
  errata?: readonly Erratum[];
}

export interface Contract {
  match(method: string, path: string): MatchedOperation | undefined;
  /** Problems with a request, each prefixed by its operationId; a request no operation matches gets `operation: undefined` and one problem. */
  validateRequest(request: RecordedRequest): { operation: MatchedOperation | undefined; problems: string[] };
  validateResponse(operation: MatchedOperation, status: number, contentType: string, bodyText: string): string[];
}

const SCHEMA_REF_PREFIX = "#/components/schemas/";
const HTTP_METHODS = ["get", "put", "post", "delete", "patch", "head", "options"] as const;
/** OpenAPI-only keywords that are not JSON Schema; Ajv's strict mode would reject them. */
const OPENAPI_ONLY_KEYWORDS = new Set(["example", "discriminator", "xml", "externalDocs", "nullable"]);
/** Keywords that carry no constraint, for telling whether a schema says anything but "nullable". */
const ANNOTATION_KEYWORDS = new Set(["description", "title", "default", "example", "readOnly", "writeOnly", "deprecated"]);

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function mediaType(contentType: string): string {
  return contentType.split(";")[0]!.trim().toLowerCase();
}

function isJsonMedia(type: string): boolean {
  return type === "application/json" || type.endsWith("+json");
}

function applyErrata(doc: JsonObject, errata: readonly Erratum[]): JsonObject {
  const copy = structuredClone(doc);
  for (const { pointer, value } of errata) {
    const keys = pointer.split("/").slice(1).map((k) => k.replaceAll("~1", "/").replaceAll("~0", "~"));
    const last = keys.pop();
    let node: Json = copy;
    for (const key of keys) node = isObject(node) ? (node[key] ?? null) : null;
    if (!isObject(node) || last === undefined || !(last in node)) throw new Error(`erratum names nothing: ${pointer}`);
    node[last] = value;
  }
  return copy;
}

interface Conversion {
  /** $id prefix that "#/components/schemas/X" refs are rewritten to. */
  base: string;
  /** Where refs from allOf members go: those schemas must stay open to combine. */
  openBase: string;
  /** Close object schemas: a property the spec does not name is a problem. */
  closed: boolean;
}

/**
 * OpenAPI 3.0 schema -> JSON Schema (draft-07, as Ajv reads it). `nullable` becomes a null type;
 * a bare `{nullable: true}` — how Qdrant's generator writes the None side of an Option — means
 * "null", where a literal reading ("no constraint") would let any value through.
 */
function toJsonSchema(node: Json, conv: Conversion, inAllOf = false): Json {
  if (Array.isArray(node)) return node.map((item) => toJsonSchema(item, conv, inAllOf));
  if (!isObject(node)) return node;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (OPENAPI_ONLY_KEYWORDS.has(key) || key.startsWith("x-")) continue;
    if (key === "$ref" && typeof value === "string" && value.startsWith(SCHEMA_REF_PREFIX)) {
      out.$ref = `${inAllOf ? conv.openBase : conv.base}#/definitions/${value.slice(SCHEMA_REF_PREFIX.length)}`;
    } else if (key === "properties" && isObject(value)) {
      out.properties = Object.fromEntries(Object.entries(value).map(([name, s]) => [name, toJsonSchema(s, conv)]));
    } else if (key === "allOf" && Array.isArray(value)) {
      out.allOf = value.map((s) => toJsonSchema(s, conv, true));
    } else if (["items", "additionalProperties", "not", "anyOf", "oneOf"].includes(key)) {
      out[key] = isObject(value) || Array.isArray(value) ? toJsonSchema(value, conv) : value;
    } else out[key] = value;
  }
  if (conv.closed && !inAllOf && isObject(out.properties) && out.additionalProperties === undefined) {
    out.additionalProperties = false;
  }
  if (node.nullable !== true) return out;
  const constraining = Object.keys(out).filter((k) => !ANNOTATION_KEYWORDS.has(k));
  if (constraining.length === 0) return { type: "null" };
  if (typeof out.type === "string" && out.$ref === undefined) {
    out.type = [out.type, "null"];
    if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
    return out;
  }
  return { anyOf: [out, { type: "null" }] };
}

function addOpenApiFormats(ajv: Ajv): void {
  addFormats(ajv);
  const integerIn = (min: number, max: number) => (n: number) => Number.isInteger(n) && n >= min && n <= max;
  const numeric: Record<string, (n: number) => boolean> = {
    int32: integerIn(-(2 ** 31), 2 ** 31 - 1),
    int64: Number.isInteger,
    uint8: integerIn(0, 255),
    uint32: integerIn(0, 2 ** 32 - 1),
    uint: (n) => Number.isInteger(n) && n >= 0,
    uint64: (n) => Number.isInteger(n) && n >= 0,
    float: Number.isFinite,
    double: Number.isFinite,
  };
  for (const [name, validate] of Object.entries(numeric)) ajv.addFormat(name, { type: "number", validate });
  // Formats the specs use for payloads we never send or receive: known, deliberately unchecked.
  for (const name of ["binary", "partial-date-time"]) ajv.addFormat(name, true);
}

function formatErrors(where: string, errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => {
    const detail = e.keyword === "additionalProperties" ? ` (${String(e.params.additionalProperty)})` : "";
    return `${where}${e.instancePath ? ` ${e.instancePath}` : ""}: ${e.message ?? e.keyword}${detail}`;
  });
}

interface Operation {
  method: string;
  template: string;
  pattern: RegExp;
  paramNames: string[];
  literalLength: number;
  spec: JsonObject;
  parameters: JsonObject[];
}

function compileTemplate(template: string): { pattern: RegExp; paramNames: string[]; literalLength: number } {
  const paramNames: string[] = [];
  const source = template.replace(/[.*+?^${}()|[\]\\]/g, (c) => (c === "{" || c === "}" ? c : `\\${c}`)).replace(/\{([^}]+)\}/g, (_, name: string) => {
    paramNames.push(name);
    return "([^/]+)";
  });
  return { pattern: new RegExp(`^${source}$`), paramNames, literalLength: template.replace(/\{[^}]+\}/g, "").length };
}

function coerceScalar(value: string, schema: Json | undefined, resolve: (s: Json | undefined) => Json | undefined): unknown {
  const s = resolve(schema);
  const type = isObject(s) ? s.type : undefined;
  if (type === "integer" && /^-?\d+$/.test(value)) return Number(value);
  if (type === "number" && value.trim() !== "" && Number.isFinite(Number(value))) return Number(value);
  if (type === "boolean" && (value === "true" || value === "false")) return value === "true";
  return value;
}

export function loadContract(document: JsonObject, options: ContractOptions = {}): Contract {
  const doc = applyErrata(document, options.errata ?? []);
  const components = isObject(doc.components) ? doc.components : {};
  const schemas = isObject(components.schemas) ? components.schemas : {};
  const securitySchemes = isObject(components.securitySchemes) ? components.securitySchemes : {};
  const title = isObject(doc.info) && typeof doc.info.title === "string" ? doc.info.title : "api";
  const openBase = `urn:openapi:${encodeURIComponent(title)}:open`;
  const closedBase = `urn:openapi:${encodeURIComponent(title)}:closed`;
  const open: Conversion = { base: openBase, openBase, closed: false };
  const closed: Conversion = { base: closedBase, openBase, closed: true };

  const ajv = new Ajv({ allErrors: true, strictTypes: false, strictTuples: false, allowUnionTypes: true });
  addOpenApiFormats(ajv);
  for (const [base, conv] of [
    [openBase, open],
    [closedBase, closed],
  ] as const) {
    const definitions = Object.fromEntries(Object.entries(schemas).map(([name, s]) => [name, toJsonSchema(s, conv)]));
    ajv.addSchema({ $id: base, definitions });
  }
  const compiled = new Map<string, ValidateFunction>();
  const compile = (schema: Json, conv: Conversion): ValidateFunction => {
    const converted = toJsonSchema(schema, conv);
    const key = JSON.stringify(converted);
    let validate = compiled.get(key);
    if (!validate) {
      validate = ajv.compile(isObject(converted) ? converted : {});
      compiled.set(key, validate);
    }
    return validate;
  };
  const resolve = (schema: Json | undefined): Json | undefined => {
    if (isObject(schema) && typeof schema.$ref === "string" && schema.$ref.startsWith(SCHEMA_REF_PREFIX)) {
      return resolve(schemas[schema.$ref.slice(SCHEMA_REF_PREFIX.length)]);
    }
    return schema;
  };

  const operations: Operation[] = [];
  for (const [template, item] of Object.entries(isObject(doc.paths) ? doc.paths : {})) {
    if (!isObject(item)) continue;
    const shared = Array.isArray(item.parameters) ? item.parameters.filter(isObject) : [];
    for (const method of HTTP_METHODS) {
      const spec = item[method];
      if (!isObject(spec)) continue;
      const own = Array.isArray(spec.parameters) ? spec.parameters.filter(isObject) : [];
      const ownKeys = new Set(own.map((p) => `${String(p.in)}:${String(p.name)}`));
      const parameters = [...shared.filter((p) => !ownKeys.has(`${String(p.in)}:${String(p.name)}`)), ...own];
      operations.push({ method: method.toUpperCase(), template, spec, parameters, ...compileTemplate(template) });
    }
  }
  // The most literal template wins: /documents/search before /documents/{documentId}.
  operations.sort((a, b) => b.literalLength - a.literalLength);

  const findOperation = (method: string, path: string) => {
    for (const op of operations) {
      if (op.method !== method.toUpperCase()) continue;
      const m = op.pattern.exec(path);
      if (!m) continue;
      const params: Record<string, string> = {};
      op.paramNames.forEach((name, i) => (params[name] = decodeURIComponent(m[i + 1]!)));
      const operationId = typeof op.spec.operationId === "string" ? op.spec.operationId : `${op.method} ${op.template}`;
      return { op, matched: { method: op.method, template: op.template, operationId, params } };
    }
    return undefined;
  };

  const credentialProblems = (op: Operation, request: RecordedRequest): string[] => {
    if (!options.requireCredentials) return [];
    const requirements = (Array.isArray(op.spec.security) ? op.spec.security : Array.isArray(doc.security) ? doc.security : []).filter(isObject);
    const credentialed = requirements.filter((r) => Object.keys(r).length > 0);
    const query = new Map(request.query);
    const satisfied = credentialed.some((requirement) =>
      Object.keys(requirement).every((name) => {
        const scheme = securitySchemes[name];
        if (!isObject(scheme)) return false;
        if (scheme.type === "apiKey" && typeof scheme.name === "string") {
          const value = scheme.in === "query" ? query.get(scheme.name) : request.headers[scheme.name.toLowerCase()];
          return typeof value === "string" && value !== "";
        }
        if (scheme.type === "http" && scheme.scheme === "bearer") return /^Bearer \S/.test(request.headers.authorization ?? "");
        return false;
      }),
    );
    const names = credentialed.map((r) => Object.keys(r).join("+")).join(" or ");
    return satisfied ? [] : [`credentials: none of ${names || "(no credentialed scheme)"} present`];
  };

  const parameterProblems = (op: Operation, request: RecordedRequest, matched: MatchedOperation): string[] => {
    const problems: string[] = [];
    const declared = new Set<string>(options.ignoredQueryParameters ?? []);
    for (const scheme of Object.values(securitySchemes)) {
      if (isObject(scheme) && scheme.in === "query" && typeof scheme.name === "string") declared.add(scheme.name);
    }
    const values = new Map<string, string[]>();
    for (const [k, v] of request.query) values.set(k, [...(values.get(k) ?? []), v]);

    for (const param of op.parameters) {
      const name = String(param.name);
      const schema = resolve(param.schema);
      if (param.in === "path") {
        const validate = compile(param.schema ?? {}, open);
        if (!validate(coerceScalar(matched.params[name] ?? "", param.schema, resolve))) {
          problems.push(...formatErrors(`path parameter ${name}`, validate.errors));
        }
      } else if (param.in === "header") {
        if (param.required === true && request.headers[name.toLowerCase()] === undefined) problems.push(`header ${name} is required`);
      } else if (param.in === "query") {
        // style=form, explode=true (the OpenAPI default): an object's properties are separate keys.
        if (isObject(schema) && schema.type === "object" && isObject(schema.properties)) {
          const object: Record<string, unknown> = {};
          for (const [prop, propSchema] of Object.entries(schema.properties)) {
            declared.add(prop);
            const given = values.get(prop);
            if (given === undefined) continue;
            if (given.length > 1) problems.push(`query parameter ${prop} is repeated`);
            object[prop] = coerceScalar(given[0]!, propSchema, resolve);
          }
          if (Object.keys(object).length === 0) {
            if (param.required === true) problems.push(`query parameters of ${name} are required`);
            continue;
          }
          const validate = compile(param.schema ?? {}, open);
          if (!validate(object)) problems.push(...formatErrors(`query ${name}`, validate.errors));
        } else {
          declared.add(name);
          const given = values.get(name);
          if (given === undefined) {
            if (param.required === true) problems.push(`query parameter ${name} is required`);
            continue;
          }
          if (given.length > 1) problems.push(`query parameter ${name} is repeated`);
          const validate = compile(param.schema ?? {}, open);
          if (!validate(coerceScalar(given[0]!, param.schema, resolve))) problems.push(...formatErrors(`query parameter ${name}`, validate.errors));
        }
      }
    }
    for (const key of values.keys()) if (!declared.has(key)) problems.push(`query parameter ${key} is not in the spec`);
    return problems;
  };

  const bodyProblems = (op: Operation, matched: MatchedOperation, request: RecordedRequest): string[] => {
    const requestBody = op.spec.requestBody;
    if (!isObject(requestBody)) return request.bodyText === "" ? [] : ["body: the operation takes no body"];
    if (request.bodyText === "") return requestBody.required === true ? ["body: required"] : [];
    const content = isObject(requestBody.content) ? requestBody.content : {};
    const sent = mediaType(request.headers["content-type"] ?? "");
    const type = options.contentTypeAliases?.[sent] ?? sent;
    const media = content[type];
    if (!isObject(media)) return [`body: content type ${sent || "(none)"} is not one of ${Object.keys(content).join(", ")}`];
    const problems: string[] = [];
    if (options.jsonLinesOperations?.includes(matched.operationId)) {
      request.bodyText.split("\n").forEach((line, i) => {
        try {
          if (!isObject(JSON.parse(line))) problems.push(`body line ${i + 1}: not a JSON object`);
        } catch {
          problems.push(`body line ${i + 1}: not JSON`);
        }
      });
    }
    const value = parseBody(type, request.bodyText);
    if (value instanceof Error) return [...problems, `body: ${value.message}`];
    if (media.schema !== undefined) {
      const validate = compile(media.schema, closed);
      if (!validate(value)) problems.push(...formatErrors("body", validate.errors));
    }
    return problems;
  };

  return {
    match: (method, path) => findOperation(method, path)?.matched,
    validateRequest(request) {
      const found = findOperation(request.method, request.path);
      if (!found) return { operation: undefined, problems: [`no operation in the contract for ${request.method} ${request.path}`] };
      const { op, matched } = found;
      return {
        operation: matched,
        problems: [...credentialProblems(op, request), ...parameterProblems(op, request, matched), ...bodyProblems(op, matched, request)].map(
          (p) => `${matched.operationId}: ${p}`,
        ),
      };
    },
    validateResponse(operation, status, contentType, bodyText) {
      const found = operations.find((op) => op.method === operation.method && op.template === operation.template);
      const responses = found && isObject(found.spec.responses) ? found.spec.responses : {};
      const spec = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
      const where = `${operation.operationId} response ${status}`;
      if (!isObject(spec)) return [`${where}: status not documented`];
      if (!isObject(spec.content)) return bodyText === "" ? [] : [`${where}: documented without a body`];
      const type = options.contentTypeAliases?.[mediaType(contentType)] ?? mediaType(contentType);
      const media = spec.content[type];
      if (!isObject(media)) return [`${where}: content type ${type} is not one of ${Object.keys(spec.content).join(", ")}`];
      const value = parseBody(type, bodyText);
      if (value instanceof Error) return [`${where}: ${value.message}`];
      if (media.schema === undefined) return [];
      const validate = compile(media.schema, open);
      return validate(value) ? [] : formatErrors(where, validate.errors);
    },
  };
}

function parseBody(type: string, text: string): unknown {
  if (!isJsonMedia(type)) return text;
  try {
    return JSON.parse(text);
  } catch {
    return new Error("not valid JSON");
  }
}

export interface Exchange {
  request: RecordedRequest;
  operation: MatchedOperation | undefined;
  status: number;
  problems: string[];
}

export type Responder = (request: RecordedRequest, operation: MatchedOperation | undefined) => ScriptedResponse;

export interface Recorder {
  readonly url: string;
  readonly exchanges: Exchange[];
  /** Every request and response problem so far. */
  problems(): string[];
  /** Exchanges for one operationId, in order. */
  calls(operationId: string): Exchange[];
  close(): Promise<void>;
}

export interface RecorderOptions {
  /** A path prefix the client is configured with (a proxy mount point), removed before matching. */
  basePath?: string;
}

/** A request as the contract checks it; `basePath` (a proxy mount point) is removed from its path. */
export async function recordRequest(req: Request, basePath = ""): Promise<RecordedRequest> {
  const url = new URL(req.url);
  const headers: Record<string, string> = {};
  req.headers.forEach((value, name) => (headers[name.toLowerCase()] = value));
  return {
    method: req.method,
    path: url.pathname.startsWith(basePath) ? url.pathname.slice(basePath.length) : url.pathname,
    query: [...url.searchParams.entries()],
    headers,
    bodyText: await req.text(),
  };
}

export interface CheckedExchange {
  exchange: Exchange;
  scripted: ScriptedResponse;
  /** The answer to send (absent for a hang). */
  response?: Response;
}

/**
 * One exchange checked both ways: the request against `contract`, then the answer `respond` gives
 * (unless it says why it is off-spec). A responder that throws (a call it cannot answer) is recorded
 * as a problem and answered with a 500.
 */
export function checkExchange(contract: Contract, request: RecordedRequest, respond: Responder): CheckedExchange {
  const { operation, problems } = contract.validateRequest(request);
  let scripted: ScriptedResponse;
  try {
    scripted = respond(request, operation);
  } catch (err) {
    problems.push(`responder: ${err instanceof Error ? err.message : String(err)}`);
    scripted = { status: 500, text: "unscripted", offSpec: "the responder could not answer this call" };
  }
  const status = scripted.status ?? 200;
  const bodyText = scripted.json !== undefined ? JSON.stringify(scripted.json) : (scripted.text ?? "");
  const contentType = scripted.contentType ?? (scripted.json !== undefined ? "application/json" : "text/plain");
  if (operation && !scripted.offSpec && !scripted.hang) {
    problems.push(...contract.validateResponse(operation, status, contentType, bodyText));
  }
  const exchange: Exchange = { request, operation, status, problems };
  if (scripted.hang) return { exchange, scripted };
  return { exchange, scripted, response: new Response(bodyText === "" ? null : bodyText, { status, headers: { ...scripted.headers, "content-type": contentType } }) };
}

/** A loopback server that checks each exchange against `contract` and answers via `respond` (see checkExchange). */
export function startRecorder(contract: Contract, respond: Responder, options: RecorderOptions = {}): Recorder {
  const exchanges: Exchange[] = [];
  let release: () => void = () => {};
  const closed = new Promise<void>((r) => (release = r));

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const { exchange, response } = checkExchange(contract, await recordRequest(req, options.basePath), respond);
      exchanges.push(exchange);
      if (response) return response;
      await closed;
      return new Response(null, { status: 499 });
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    exchanges,
    problems: () => exchanges.flatMap((e) => e.problems),
    calls: (operationId) => exchanges.filter((e) => e.operation?.operationId === operationId),
    async close() {
      release();
      await server.stop(true);
    },
  };
}

/** Parses a recorded JSON body; tests use it to read what the adapter sent. */
export function jsonBody(exchange: Exchange): unknown {
  return JSON.parse(exchange.request.bodyText);
}
