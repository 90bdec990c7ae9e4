import { QdrantClient } from "@qdrant/js-client-rest";
import { DEFAULT_SEARCH_LIMIT, type ChunkHit, type SearchOptions } from "../contract/search.ts";
import { UpstreamError, toUpstreamError } from "../upstream.ts";
import type { VectorIndex, VectorPoint } from "./index.ts";

export const DEFAULT_QDRANT_TIMEOUT_MS = 30_000;
/** Points per upsert request: large enough to amortise round trips, small enough to stay well under Qdrant's 32 MB body limit with 3072-dim vectors. */
export const DEFAULT_QDRANT_UPSERT_BATCH_SIZE = 256;
/** Qdrant's own clients read a URL without a port as this port. */
export const DEFAULT_QDRANT_PORT = 6333;

const CHUNK_INDEX_FIELD = "chunk_index";

export interface QdrantVectorIndexOptions {
  /** e.g. http://localhost:6333 or https://xyz.cloud.qdrant.io:6333; a path is kept as a prefix. */
  url: string;
  apiKey?: string;
  /** Per request; the SDK aborts the fetch when it passes. */
  timeoutMs?: number;
  batchSize?: number;
}

function statusOf(err: unknown): number | undefined {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" ? status : undefined;
}

/** The SDK throws its fetch library's ApiError (status + parsed body) for non-2xx answers. */
function toQdrantError(err: unknown): UpstreamError {
  const status = statusOf(err);
  if (status !== undefined) {
    const data = (err as { data?: { status?: { error?: unknown } } }).data;
    const reason = typeof data?.status?.error === "string" ? data.status.error : String((err as Error).message ?? "");
    return new UpstreamError("qdrant", "http", `HTTP ${status}${reason ? `: ${reason}` : ""}`, { status, cause: err });
  }
  const name = (err as Error | null)?.name;
  // Thrown for a 429 that carries Retry-After, without the status.
  if (name === "QdrantClientResourceExhaustedError") {
    return new UpstreamError("qdrant", "http", `HTTP 429: ${(err as Error).message}`, { status: 429, cause: err });
  }
  if (name === "QdrantClientUnexpectedResponseError") {
    return new UpstreamError("qdrant", "invalid_response", (err as Error).message, { cause: err });
  }
  return toUpstreamError("qdrant", err);
}

async function call<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw toQdrantError(err);
  }
}

const isNotFound = (err: unknown) => err instanceof UpstreamError && err.status === 404;

/** 409 since Qdrant 1.x; older servers said 400 "... already exists". */
const isAlreadyExists = (err: unknown) =>
  err instanceof UpstreamError && (err.status === 409 || (err.status === 400 && /already exists/i.test(err.message)));

/** URL parsing erases an explicit default port (":443"), which the SDK would then read as 6333. */
function clientAddress(url: string): { url: string; port: number; prefix?: string } {
  const parsed = new URL(url);
  const explicitPort = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?(?:\[[^\]]*\]|[^:/?#]*):(\d+)/i.exec(url)?.[1];
  const prefix = parsed.pathname.replace(/\/+$/, "");
  return {
    url: `${parsed.protocol}//${parsed.hostname}`,
    port: explicitPort ? Number(explicitPort) : DEFAULT_QDRANT_PORT,
    ...(prefix ? { prefix } : {}),
  };
}

function toHit(point: { id: unknown; score: unknown; payload?: Record<string, unknown> | null }): ChunkHit {
  const payload = point.payload ?? {};
  const chunkIndex = payload[CHUNK_INDEX_FIELD];
  const { text } = payload;
  const { score } = point;
  if (typeof chunkIndex !== "number" || typeof text !== "string" || typeof score !== "number") {
    throw new UpstreamError("qdrant", "invalid_response", `point ${String(point.id)} lacks a score or the chunk_index/text payload`);
  }
  return { chunkIndex, text, score };
}

function toPointStruct(bookId: string, point: VectorPoint) {
  if (!Number.isSafeInteger(point.chunkIndex) || point.chunkIndex < 0) {
    throw new RangeError(`chunk index must be a non-negative integer, got ${point.chunkIndex}`);
  }
  return {
    id: point.chunkIndex,
    vector: [...point.vector],
    payload: { [CHUNK_INDEX_FIELD]: point.chunkIndex, text: point.text, book_id: bookId },
  };
}

/**
 * Qdrant through its Query API: one collection per book (named by the book id), cosine distance,
 * an integer payload index on chunk_index so the spoiler filter is an index lookup, not a scan.
 */
export function createQdrantVectorIndex(options: QdrantVectorIndexOptions): VectorIndex {
  const client = new QdrantClient({
    ...clientAddress(options.url),
    ...(options.apiKey ? { apiKey: options.apiKey } : {}),
    timeout: options.timeoutMs ?? DEFAULT_QDRANT_TIMEOUT_MS,
    checkCompatibility: false,
  });
  const batchSize = options.batchSize ?? DEFAULT_QDRANT_UPSERT_BATCH_SIZE;
  /** Collections this process has created or found; shared so concurrent upserts create once. */
  const ready = new Map<string, Promise<void>>();

  async function createCollection(bookId: string, dimension: number): Promise<void> {
    try {
      await call(() => client.createCollection(bookId, { vectors: { size: dimension, distance: "Cosine" } }));
    } catch (err) {
      // Another worker created it first; its dimension is checked by the upsert that follows.
      if (!isAlreadyExists(err)) throw err;
    }
    // Idempotent, and repeated so a collection whose creator died before this step still gets it.
    await call(() => client.createPayloadIndex(bookId, { field_name: CHUNK_INDEX_FIELD, field_schema: "integer", wait: true }));
  }

  function ensureCollection(bookId: string, dimension: number): Promise<void> {
    let pending = ready.get(bookId);
    if (!pending) {
      pending = createCollection(bookId, dimension);
      ready.set(bookId, pending);
      pending.catch(() => ready.delete(bookId));
    }
    return pending;
  }

  async function upsertBatches(bookId: string, points: readonly VectorPoint[]): Promise<void> {
    for (let start = 0; start < points.length; start += batchSize) {
      const batch = points.slice(start, start + batchSize).map((p) => toPointStruct(bookId, p));
      await call(() => client.upsert(bookId, { wait: true, points: batch }));
    }
  }

  return {
    adapter: "qdrant",

    async upsert(bookId, points) {
      if (points.length === 0) return;
      const dimension = points[0]!.vector.length;
      await ensureCollection(bookId, dimension);
      try {
        await upsertBatches(bookId, points);
      } catch (err) {
        if (!isNotFound(err)) throw err;
        // Deleted behind our back (another process dropped the book): create it again, once.
        ready.delete(bookId);
        await ensureCollection(bookId, dimension);
        await upsertBatches(bookId, points);
      }
    },

    async search(bookId, vector, searchOptions: SearchOptions = {}) {
      const limit = searchOptions.limit ?? DEFAULT_SEARCH_LIMIT;
      if (limit < 1) return [];
      const { maxChunkIndex } = searchOptions;
      try {
        const result = await call(() =>
          client.query(bookId, {
            query: [...vector],
            limit,
            with_payload: true,
            ...(maxChunkIndex !== undefined ? { filter: { must: [{ key: CHUNK_INDEX_FIELD, range: { lte: maxChunkIndex } }] } } : {}),
          }),
        );
        return result.points.map(toHit);
      } catch (err) {
        if (isNotFound(err)) return [];
        throw err;
      }
    },

    async count(bookId) {
      try {
        return (await call(() => client.count(bookId, { exact: true }))).count;
      } catch (err) {
        if (isNotFound(err)) return 0;
        throw err;
      }
    },

    async deleteBook(bookId) {
      ready.delete(bookId);
      try {
        await call(() => client.deleteCollection(bookId));
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    },
  };
}
