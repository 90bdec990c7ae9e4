/**
 * A loopback reranker for tests: `POST /v1/rerank` in the Cohere/Jina shape.
 *
 *   const reranker = startFakeReranker({ apiKey: "rk" });
 *   createHttpReranker({ url: reranker.url, apiKey: "rk" });
 *   reranker.onRerank((req) => ({ results: [{ index: 2, relevance_score: 0.9 }] }));
 *   reranker.onRerank(() => ({ status: 500 }));          // or { hang: true }, or { raw: ... }
 *   reranker.rerankRequests()[0]!.body                   // { model, query, documents, top_n, ... }
 *
 * The default scores each document by the share of the query's distinct words it contains
 * (ties keep document order) and returns the best `top_n`. Requests are recorded as in the fake
 * LLM gateway, which provides the shared server machinery and failure behaviours.
 */

import { z } from "zod";
import { type FailureReply, type LoopbackServer, type RecordedRequest, errorResponse, failureResponse, isFailure, startLoopbackServer, words } from "./fake-llm-gateway.ts";

export const RERANK_PATH = "/v1/rerank";

const rerankRequestSchema = z.looseObject({
  model: z.string().optional(),
  query: z.string(),
  documents: z.array(z.string()),
  top_n: z.number().int().positive().optional(),
  return_documents: z.boolean().optional(),
});
export type RerankRequest = z.infer<typeof rerankRequestSchema>;

export interface RerankScore {
  index: number;
  relevance_score: number;
}

export interface RerankReply {
  /** Sent as the `results` list, as is; defaults to word-overlap scores. */
  results?: RerankScore[];
}

export type RerankBehaviour = RerankReply | FailureReply;
/** `call` counts the requests this handler has seen, from 0. */
export type RerankHandler = (request: RerankRequest, call: number) => RerankBehaviour | Promise<RerankBehaviour>;

export interface FakeRerankerOptions {
  /** When set, requests must carry `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
}

export interface FakeReranker extends LoopbackServer {
  onRerank(handler: RerankHandler): void;
  rerankRequests(): RecordedRequest[];
  /** Back to the default handler, with no recorded requests. */
  reset(): void;
}

/** Share of the query's distinct words found in each document, best first, top_n of them. */
function overlapScores(request: RerankRequest): RerankScore[] {
  const queryWords = new Set(words(request.query));
  const scored = request.documents.map((doc, index) => {
    const docWords = new Set(words(doc));
    const hits = [...queryWords].filter((w) => docWords.has(w)).length;
    return { index, relevance_score: queryWords.size === 0 ? 0 : hits / queryWords.size };
  });
  return scored.sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index).slice(0, request.top_n ?? scored.length);
}

export function startFakeReranker(options: FakeRerankerOptions = {}): FakeReranker {
  const defaultHandler: RerankHandler = (request) => ({ results: overlapScores(request) });
  let handler = defaultHandler;
  let calls = 0;
  let ids = 0;

  const server = startLoopbackServer(
    {
      [RERANK_PATH]: async (ctx) => {
        const parsed = rerankRequestSchema.safeParse(ctx.record.body);
        if (!parsed.success) return errorResponse({ status: 400, message: `Invalid rerank request: ${parsed.error.issues[0]?.message}` });
        const reply = await handler(parsed.data, calls++);
        if (isFailure(reply)) return failureResponse(reply, ctx.signal);
        const results = reply.results ?? overlapScores(parsed.data);
        return Response.json({
          id: `rerank-fake-${++ids}`,
          results: results.map((r) => (parsed.data.return_documents ? { ...r, document: { text: parsed.data.documents[r.index] } } : r)),
          meta: { billed_units: { search_units: 1 } },
        });
      },
    },
    options,
  );

  return {
    ...server,
    onRerank(next) {
      handler = next;
      calls = 0;
    },
    rerankRequests: () => server.requestsTo(RERANK_PATH),
    reset() {
      handler = defaultHandler;
      calls = 0;
      server.clearRequests();
    },
  };
}
