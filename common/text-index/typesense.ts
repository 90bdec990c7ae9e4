import Typesense, { Errors } from "typesense";
import type { CollectionCreateSchema } from "typesense";
import { DEFAULT_SEARCH_LIMIT, type ChunkHit, type IndexedChunk, type SearchOptions } from "../contract/search.ts";
import { UpstreamError, requestJson, toUpstreamError, withRetries } from "../upstream.ts";
import { chunkIndexesToGet, type TextIndex } from "./index.ts";

export const DEFAULT_TYPESENSE_TIMEOUT_MS = 10_000;
export const DEFAULT_TYPESENSE_MAX_RETRIES = 2;
export const DEFAULT_TYPESENSE_RETRY_INTERVAL_MS = 100;
/** Documents per import request; a chunk is ~2 KB of text, so ~1 MB bodies. */
export const DEFAULT_TYPESENSE_IMPORT_BATCH_SIZE = 500;
/** Typesense rejects larger pages. */
export const TYPESENSE_MAX_PER_PAGE = 250;

/**
 * Locale for books written mostly in Arabic script (Urdu, and Arabic and Persian alike).
 *
 * Typesense's default ("en") tokenizer splits only on ASCII spaces and punctuation, so Urdu's own
 * punctuation (۔ ، ؟ ؛) stays glued to words and "کہا۔" never matches "کہا"; `token_separators`
 * cannot help because it takes single-byte characters only. Any other locale switches the field
 * to ICU word segmentation (UAX #29), which splits off that punctuation and keeps the zero-width
 * non-joiner inside words. Typesense special-cases only zh, ja, ko, th and Cyrillic/Greek locales,
 * and ICU has no Urdu-specific word rules, so "ur" is plain ICU segmentation, named for the text.
 */
export const ARABIC_SCRIPT_LOCALE = "ur";
/** Characters of the first upsert examined to pick the locale. */
const LOCALE_SAMPLE_CHARS = 20_000;

const CHUNK_INDEX_FIELD = "chunk_index";

export interface TypesenseTextIndexOptions {
  /** e.g. http://localhost:8108 or https://xyz.a1.typesense.net; a path is kept as a prefix. */
  url: string;
  apiKey: string;
  /** Per request, searches and collection calls; imports are never cut short (the server applies them synchronously). */
  timeoutMs?: number;
  /** Further tries after a timeout, a dropped connection or a 5xx. */
  maxRetries?: number;
  retryIntervalMs?: number;
  batchSize?: number;
}

interface ChunkDocument {
  id: string;
  chunk_index: number;
  text: string;
  book_id: string;
  [key: string]: unknown;
}

/**
 * Field locale for a book, from a sample of its text: ICU segmentation for Arabic-script books,
 * Typesense's default (which also folds Latin diacritics) for everything else.
 */
export function textLocaleFor(sample: string): string | undefined {
  const letters = sample.match(/\p{L}/gu)?.length ?? 0;
  const arabic = sample.match(/\p{Script=Arabic}/gu)?.length ?? 0;
  return letters > 0 && arabic * 2 > letters ? ARABIC_SCRIPT_LOCALE : undefined;
}

export function documentId(bookId: string, chunkIndex: number): string {
  return `${bookId}:${chunkIndex}`;
}

function toTypesenseError(err: unknown): UpstreamError {
  if (err instanceof Errors.ImportError) {
    const failed = err.importResults.filter((r) => !r.success);
    const first = failed[0];
    const status = first && !first.success ? first.code : undefined;
    const reason = first && !first.success ? first.error : "unknown";
    return new UpstreamError("typesense", "http", `import rejected ${failed.length} of ${err.importResults.length} documents; first: ${reason}`, {
      ...(status !== undefined ? { status } : {}),
      cause: err,
    });
  }
  if (err instanceof Errors.TypesenseError && typeof err.httpStatus === "number") {
    return new UpstreamError("typesense", "http", err.message, { status: err.httpStatus, cause: err });
  }
  return toUpstreamError("typesense", err);
}

async function call<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw toTypesenseError(err);
  }
}

const isStatus = (err: unknown, status: number) => err instanceof UpstreamError && err.status === status;

function toHit(hit: { document: Partial<ChunkDocument>; text_match?: unknown; text_match_info?: { score?: unknown } }): ChunkHit {
  const { chunk_index: chunkIndex, text } = hit.document;
  // text_match is a 64-bit integer that JSON numbers round; the ranking it encodes survives.
  const score = typeof hit.text_match === "number" ? hit.text_match : Number(hit.text_match_info?.score);
  if (typeof chunkIndex !== "number" || typeof text !== "string" || !Number.isFinite(score)) {
    throw new UpstreamError("typesense", "invalid_response", `hit ${String(hit.document.id)} lacks a text_match score or chunk_index/text`);
  }
  return { chunkIndex, text, score };
}

type SearchHit = Parameters<typeof toHit>[0];

function toChunk(hit: SearchHit): IndexedChunk {
  const { chunk_index: chunkIndex, text } = hit.document;
  if (typeof chunkIndex !== "number" || typeof text !== "string") {
    throw new UpstreamError("typesense", "invalid_response", `document ${String(hit.document.id)} lacks chunk_index/text`);
  }
  return { chunkIndex, text };
}

/**
 * Typesense with one collection per book (named by the book id), documents imported as JSONL
 * upserts, chunk_index sortable so the spoiler filter is a numeric range.
 */
export function createTypesenseTextIndex(options: TypesenseTextIndexOptions): TextIndex {
  const base = new URL(options.url);
  const root = `${base.origin}${base.pathname.replace(/\/+$/, "")}`;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TYPESENSE_TIMEOUT_MS;
  const maxRetries = options.maxRetries ?? DEFAULT_TYPESENSE_MAX_RETRIES;
  const retryIntervalMs = options.retryIntervalMs ?? DEFAULT_TYPESENSE_RETRY_INTERVAL_MS;
  const client = new Typesense.Client({
    nodes: [{ url: root }],
    apiKey: options.apiKey,
    connectionTimeoutSeconds: timeoutMs / 1000,
    numRetries: maxRetries,
    retryIntervalSeconds: retryIntervalMs / 1000,
    // Failures reach callers as UpstreamError and are logged there; the SDK's own lines would repeat them.
    logLevel: "silent",
  });
  const searchHeaders = { accept: "application/json", "x-typesense-api-key": options.apiKey };
  const batchSize = options.batchSize ?? DEFAULT_TYPESENSE_IMPORT_BATCH_SIZE;
  /** The hits of a search in the book's collection; none when it has no collection. */
  async function searchHits(bookId: string, params: URLSearchParams): Promise<SearchHit[]> {
    // The chat's one call: plain fetch, since the SDK's axios layers cost more CPU than the rest of
    // the chat's work on the search (the SDK keeps the ingestion calls, off the hot path).
    const url = `${root}/collections/${encodeURIComponent(bookId)}/documents/search?${params}`;
    try {
      const result = (await withRetries(() => requestJson("typesense", url, { method: "GET", headers: searchHeaders, timeoutMs }), {
        maxRetries,
        baseDelayMs: retryIntervalMs,
      })) as { hits?: SearchHit[] };
      if (result.hits !== undefined && !Array.isArray(result.hits)) throw new UpstreamError("typesense", "invalid_response", "search answer's hits is not a list");
      return result.hits ?? [];
    } catch (err) {
      if (isStatus(err, 404)) return [];
      throw err;
    }
  }
  /** Collections this process has created or found; shared so concurrent upserts create once. */
  const ready = new Map<string, Promise<void>>();

  async function createCollection(bookId: string, sample: string): Promise<void> {
    const locale = textLocaleFor(sample);
    const schema: CollectionCreateSchema = {
      name: bookId,
      fields: [
        { name: "text", type: "string", ...(locale ? { locale } : {}) },
        { name: CHUNK_INDEX_FIELD, type: "int32", sort: true },
        { name: "book_id", type: "string", facet: false },
      ],
      default_sorting_field: CHUNK_INDEX_FIELD,
    };
    try {
      await call(() => client.collections().create(schema));
    } catch (err) {
      // Another worker created it first.
      if (!isStatus(err, 409)) throw err;
    }
  }

  function ensureCollection(bookId: string, chunks: readonly IndexedChunk[]): Promise<void> {
    let pending = ready.get(bookId);
    if (!pending) {
      let sample = "";
      for (const chunk of chunks) {
        if (sample.length >= LOCALE_SAMPLE_CHARS) break;
        sample += chunk.text.slice(0, LOCALE_SAMPLE_CHARS - sample.length);
      }
      pending = createCollection(bookId, sample);
      ready.set(bookId, pending);
      pending.catch(() => ready.delete(bookId));
    }
    return pending;
  }

  async function importBatches(bookId: string, chunks: readonly IndexedChunk[]): Promise<void> {
    const documents = client.collections<ChunkDocument>(bookId).documents();
    for (let start = 0; start < chunks.length; start += batchSize) {
      const batch = chunks.slice(start, start + batchSize).map((chunk): ChunkDocument => {
        if (!Number.isSafeInteger(chunk.chunkIndex) || chunk.chunkIndex < 0) {
          throw new RangeError(`chunk index must be a non-negative integer, got ${chunk.chunkIndex}`);
        }
        return { id: documentId(bookId, chunk.chunkIndex), [CHUNK_INDEX_FIELD]: chunk.chunkIndex, text: chunk.text, book_id: bookId };
      });
      await call(() => documents.import(batch, { action: "upsert" }));
    }
  }

  return {
    adapter: "typesense",

    async upsert(bookId, chunks) {
      if (chunks.length === 0) return;
      await ensureCollection(bookId, chunks);
      try {
        await importBatches(bookId, chunks);
      } catch (err) {
        if (!isStatus(err, 404)) throw err;
        // Deleted behind our back (another process dropped the book): create it again, once.
        ready.delete(bookId);
        await ensureCollection(bookId, chunks);
        await importBatches(bookId, chunks);
      }
    },

    async search(bookId, query, searchOptions: SearchOptions = {}) {
      const limit = Math.min(searchOptions.limit ?? DEFAULT_SEARCH_LIMIT, TYPESENSE_MAX_PER_PAGE);
      if (limit < 1 || query.trim() === "") return [];
      const { maxChunkIndex } = searchOptions;
      const params = new URLSearchParams({ q: query, query_by: "text", per_page: String(limit) });
      if (maxChunkIndex !== undefined) params.set("filter_by", `${CHUNK_INDEX_FIELD}:<=${Math.floor(maxChunkIndex)}`);
      return (await searchHits(bookId, params)).map(toHit);
    },

    async get(bookId, chunkIndexes) {
      const wanted = chunkIndexesToGet(chunkIndexes);
      if (wanted.length === 0) return [];
      // One wildcard search filtered to the indexes (a numeric field matches any value of a list): one
      // request for the whole reply instead of one document GET per passage.
      const params = new URLSearchParams({ q: "*", query_by: "text", per_page: String(wanted.length), filter_by: `${CHUNK_INDEX_FIELD}:[${wanted.join(",")}]` });
      const found = new Map((await searchHits(bookId, params)).map(toChunk).map((chunk) => [chunk.chunkIndex, chunk]));
      return wanted.flatMap((i) => found.get(i) ?? []);
    },

    async count(bookId) {
      try {
        return (await call(() => client.collections(bookId).retrieve())).num_documents;
      } catch (err) {
        if (isStatus(err, 404)) return 0;
        throw err;
      }
    },

    async deleteBook(bookId) {
      ready.delete(bookId);
      try {
        await call(() => client.collections(bookId).delete());
      } catch (err) {
        if (!isStatus(err, 404)) throw err;
      }
    },
  };
}
