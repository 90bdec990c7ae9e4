/**
 * Hybrid retrieval for one chat turn: the narrative query is embedded and searched in the vector
 * index while the keyword query runs against the BM25 index, the two lists are merged by chunk, and
 * the merged candidates are reranked (cross-encoder) against the reader's message or, without a
 * reranker, fused by rank.
 *
 * Every step may fail without failing the turn: a character can still answer from the other list,
 * or from fused ranks, or from its persona alone. What was skipped is reported in `degraded`.
 */
import { dedupeHits, DEFAULT_FUSION_TOP_N, fuseCandidates, type Candidate, type HitSource } from "./fusion.ts";
import type { LanguageModel } from "../llm/index.ts";
import type { Logger } from "../log.ts";
import type { Reranker } from "../rerank/index.ts";
import { DEFAULT_SEARCH_LIMIT, type ChunkHit, type SearchOptions } from "../contract/search.ts";
import type { TextIndex } from "../text-index/index.ts";
import type { VectorIndex } from "../vector/index.ts";

export const DEFAULT_RETRIEVAL_TOP_N = DEFAULT_FUSION_TOP_N;

/** The steps that can fail, in the order they are reported. */
export const RETRIEVAL_STEPS = ["embedding", "vector_search", "text_search", "rerank"] as const;
export type RetrievalStep = (typeof RETRIEVAL_STEPS)[number];

export interface RetrieverOptions {
  llm: Pick<LanguageModel, "embed">;
  vectorIndex: Pick<VectorIndex, "search">;
  textIndex: Pick<TextIndex, "search">;
  /** Without one, candidates are ordered by reciprocal rank fusion. */
  reranker?: Reranker;
  logger?: Logger;
  /** Told about every failed step (for metrics); retrieval carries on regardless. */
  onStepError?: (step: RetrievalStep, error: unknown) => void;
  /** Hits asked of each index; DEFAULT_SEARCH_LIMIT (10). */
  searchLimit?: number;
  /** Chunks returned; DEFAULT_RETRIEVAL_TOP_N (5). */
  topN?: number;
}

export interface RetrievalRequest {
  bookId: string;
  /** Natural-language description of what to find: embedded for vector search. */
  narrativeQuery: string;
  /** Terms for BM25. */
  keywordQuery: string;
  /** What the reranker scores the passages against: the reader's own message (SPEC: POST /character/chat, step 8). */
  rerankQuery: string;
  /** Spoiler limit: only chunks up to this index. */
  maxChunkIndex?: number;
  /** Aborting (client gone) rejects with the abort reason instead of degrading. */
  signal?: AbortSignal;
}

export interface RetrievedChunk {
  chunkIndex: number;
  text: string;
  /** Reranker relevance when `rankedBy` is "rerank", else the reciprocal-rank-fusion score. */
  score: number;
  foundBy: HitSource[];
}

export interface RetrievalResult {
  /** Best first; at most topN; empty when both searches failed or found nothing. */
  chunks: RetrievedChunk[];
  rankedBy: "rerank" | "fusion";
  /** Steps that failed, in RETRIEVAL_STEPS order; empty on a fully healthy turn. */
  degraded: RetrievalStep[];
  /** Searches that went on without the book because its index is still loading. */
  loading: RetrievalStep[];
}

export interface Retriever {
  retrieve(request: RetrievalRequest): Promise<RetrievalResult>;
}

export function createRetriever(options: RetrieverOptions): Retriever {
  const { llm, vectorIndex, textIndex, reranker, logger, onStepError } = options;
  const limit = options.searchLimit ?? DEFAULT_SEARCH_LIMIT;
  const topN = options.topN ?? DEFAULT_RETRIEVAL_TOP_N;

  async function retrieve(request: RetrievalRequest): Promise<RetrievalResult> {
    const { bookId, narrativeQuery, keywordQuery, signal } = request;
    signal?.throwIfAborted();
    const failed = new Set<RetrievalStep>();
    const loading = new Set<RetrievalStep>();
    const searchOptions = (step: RetrievalStep): SearchOptions => ({ limit, maxChunkIndex: request.maxChunkIndex, onLoading: () => loading.add(step) });

    /** Runs a step; on failure records it and yields the fallback, unless the caller has gone. */
    const attempt = async <T>(step: RetrievalStep, fallback: T, run: () => Promise<T>): Promise<T> => {
      try {
        return await run();
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        failed.add(step);
        logger?.warn("retrieval step failed, degrading", { step, bookId, error });
        onStepError?.(step, error);
        return fallback;
      }
    };

    // BM25 needs no embedding: it is started first and runs while the query is embedded.
    const textSearch: Promise<ChunkHit[]> = keywordQuery.trim()
      ? attempt("text_search", [], () => textIndex.search(bookId, keywordQuery, searchOptions("text_search")))
      : Promise.resolve([]);
    const vectorSearch = (async (): Promise<ChunkHit[]> => {
      if (!narrativeQuery.trim()) return [];
      const vector = await attempt("embedding", null, async () => {
        const [embedding] = await llm.embed([narrativeQuery], { signal });
        if (!embedding || embedding.length === 0) throw new Error("the embedding came back empty");
        return embedding;
      });
      if (!vector) return [];
      return attempt("vector_search", [], () => vectorIndex.search(bookId, vector, searchOptions("vector_search")));
    })();

    const [vectorHits, textHits] = await Promise.all([vectorSearch, textSearch]);
    const candidates = dedupeHits(vectorHits, textHits);

    let chunks: RetrievedChunk[] | null = null;
    if (reranker && candidates.length > 0) {
      chunks = await attempt("rerank", null, async () =>
        rerankedChunks(candidates, await reranker.rerank(request.rerankQuery, candidates.map((c) => c.text), topN, signal), topN),
      );
    }
    signal?.throwIfAborted();
    const rankedBy = chunks ? "rerank" : "fusion";
    chunks ??= fuseCandidates(candidates, { topN }).map(({ chunkIndex, text, score, foundBy }) => ({
      chunkIndex,
      text,
      score,
      foundBy,
    }));
    return { chunks, rankedBy, degraded: RETRIEVAL_STEPS.filter((s) => failed.has(s)), loading: RETRIEVAL_STEPS.filter((s) => loading.has(s)) };
  }

  return { retrieve };
}

/** Maps the reranker's answer back onto the candidates; a malformed answer counts as a failure. */
function rerankedChunks(
  candidates: readonly Candidate[],
  results: readonly { index: number; relevanceScore: number }[],
  topN: number,
): RetrievedChunk[] {
  const seen = new Set<number>();
  const chunks: RetrievedChunk[] = [];
  for (const { index, relevanceScore } of [...results].sort((a, b) => b.relevanceScore - a.relevanceScore)) {
    const candidate = candidates[index];
    if (!candidate || !Number.isFinite(relevanceScore)) {
      throw new Error(`the reranker answered with document ${index} of ${candidates.length}`);
    }
    if (seen.has(index)) continue;
    seen.add(index);
    chunks.push({ chunkIndex: candidate.chunkIndex, text: candidate.text, score: relevanceScore, foundBy: candidate.foundBy });
  }
  if (chunks.length === 0) throw new Error("the reranker returned no results");
  return chunks.slice(0, topN);
}
