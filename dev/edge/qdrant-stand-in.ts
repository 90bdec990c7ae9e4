/** Qdrant's side of the index stand-in (dev/edge/index-stand-in.ts): the collections it keeps and how it answers. */
import type { Json, Responder, ScriptedResponse } from "../../tests/support/openapi-recorder.ts";
import { asList, isObject, jsonBody, refuseKeys, Unsupported, type JsonObject } from "./stand-in-requests.ts";

export interface StoredPoint {
  id: number | string;
  vector: number[];
  payload: JsonObject;
  /** The operation that wrote it. */
  version: number;
}

type Distance = "Cosine" | "Dot";

export interface QdrantCollection {
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

export function byPointId(a: StoredPoint, b: StoredPoint): number {
  if (typeof a.id === "number" && typeof b.id === "number") return a.id - b.id;
  return typeof a.id === "number" ? -1 : typeof b.id === "number" ? 1 : a.id.localeCompare(b.id);
}

export function qdrantResponder(apiKey: string, collections: Map<string, QdrantCollection>): Responder {
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
