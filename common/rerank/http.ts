import { z } from "zod";
import { UpstreamError, requestJson, withRetries } from "../upstream.ts";
import { type Reranker, type RerankResult } from "./index.ts";
import { DEFAULT_RERANK_MODEL } from "../config-defaults.ts";

/**
 * Reranker over the `POST /v1/rerank` shape shared by Cohere, Jina, Voyage and the self-hosted
 * servers that copy them (TEI behind LiteLLM, Infinity).
 *
 * `url` may be the service root (https://api.jina.ai), the versioned base (https://api.jina.ai/v1)
 * or the full endpoint (https://api.jina.ai/v1/rerank); all three reach the same endpoint.
 */

export const DEFAULT_RERANK_TIMEOUT_MS = 10_000;
export const DEFAULT_RERANK_MAX_RETRIES = 2;

export interface HttpRerankerOptions {
  url: string;
  apiKey?: string;
  /** Always sent; DEFAULT_RERANK_MODEL when not given (Cohere refuses a request without one). */
  model?: string;
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  timeoutMs?: number;
  maxRetries?: number;
}

const resultSchema = z.object({ index: z.number().int(), relevance_score: z.number() });
// Voyage names the list `data`; everyone else calls it `results`.
const responseSchema = z.union([z.object({ results: z.array(resultSchema) }), z.object({ data: z.array(resultSchema) })]);

export function rerankEndpoint(url: string): string {
  const base = url.replace(/\/+$/, "");
  if (base.endsWith("/v1/rerank")) return base;
  if (base.endsWith("/v1")) return `${base}/rerank`;
  return `${base}/v1/rerank`;
}

function invalid(message: string, cause?: unknown): UpstreamError {
  return new UpstreamError("rerank", "invalid_response", message, { cause });
}

function parseResults(body: unknown, documentCount: number, topN: number): RerankResult[] {
  const parsed = responseSchema.safeParse(body);
  if (!parsed.success) throw invalid("response has no results list", parsed.error);
  const raw = "results" in parsed.data ? parsed.data.results : parsed.data.data;
  const seen = new Set<number>();
  for (const r of raw) {
    if (r.index < 0 || r.index >= documentCount || seen.has(r.index)) {
      throw invalid(`result index ${r.index} is out of range or repeated for ${documentCount} documents`);
    }
    seen.add(r.index);
  }
  return raw.map((r) => ({ index: r.index, relevanceScore: r.relevance_score })).sort((a, b) => b.relevanceScore - a.relevanceScore)
    .slice(0, topN); // some servers ignore top_n and score every document
}

export function createHttpReranker(options: HttpRerankerOptions): Reranker {
  const endpoint = rerankEndpoint(options.url);
  const timeoutMs = options.timeoutMs ?? DEFAULT_RERANK_TIMEOUT_MS;
  const maxRetries = options.maxRetries ?? DEFAULT_RERANK_MAX_RETRIES;
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json",
    ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
  };

  async function attempt(body: string, documentCount: number, topN: number, signal?: AbortSignal): Promise<RerankResult[]> {
    const payload = await requestJson("rerank", endpoint, { headers, body, timeoutMs, ...(signal ? { signal } : {}), ...(options.fetch ? { fetch: options.fetch } : {}) });
    return parseResults(payload, documentCount, topN);
  }

  return {
    async rerank(query, documents, topN, signal) {
      if (documents.length === 0 || topN <= 0) return [];
      const n = Math.min(topN, documents.length);
      const body = JSON.stringify({
        model: options.model ?? DEFAULT_RERANK_MODEL,
        query,
        documents,
        top_n: n,
        return_documents: false,
      });
      return withRetries(() => attempt(body, documents.length, n, signal), { maxRetries, ...(signal ? { signal } : {}) });
    },
  };
}
