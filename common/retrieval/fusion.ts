/**
 * Merging the vector and BM25 result lists. Their raw scores are not comparable (cosine similarity
 * against BM25), so without a reranker the lists are combined by rank alone: reciprocal rank fusion
 * (Cormack, Clarke & Büttcher, 2009), score = Σ 1 / (k + rank) over the lists that found the chunk.
 */
import type { ChunkHit } from "../contract/search.ts";

/** The constant from the RRF paper: damps the weight of the very first ranks. */
export const RRF_K = 60;
export const DEFAULT_FUSION_TOP_N = 5;

export type HitSource = "vector" | "text";

/** One chunk found by one or both searches, with what each search said about it. */
export interface Candidate {
  chunkIndex: number;
  text: string;
  /** Which searches found it, vector first. */
  foundBy: HitSource[];
  vectorScore?: number;
  textScore?: number;
  /** 1-based rank in each list that found it. */
  vectorRank?: number;
  textRank?: number;
}

export interface FusedCandidate extends Candidate {
  /** Reciprocal-rank-fusion score. */
  score: number;
}

export interface FusionOptions {
  k?: number;
  topN?: number;
}

/**
 * One candidate per chunk index: vector hits in rank order, then chunks only BM25 found, in its
 * order. A chunk repeated within one list keeps its first (best) rank.
 */
export function dedupeHits(vectorHits: readonly ChunkHit[], textHits: readonly ChunkHit[]): Candidate[] {
  const byChunk = new Map<number, Candidate>();
  const add = (hits: readonly ChunkHit[], source: HitSource) => {
    let rank = 0;
    const seen = new Set<number>();
    for (const hit of hits) {
      if (seen.has(hit.chunkIndex)) continue;
      seen.add(hit.chunkIndex);
      rank++;
      let candidate = byChunk.get(hit.chunkIndex);
      if (!candidate) {
        candidate = { chunkIndex: hit.chunkIndex, text: hit.text, foundBy: [] };
        byChunk.set(hit.chunkIndex, candidate);
      }
      candidate.foundBy.push(source);
      if (source === "vector") {
        candidate.vectorScore = hit.score;
        candidate.vectorRank = rank;
      } else {
        candidate.textScore = hit.score;
        candidate.textRank = rank;
      }
    }
  };
  add(vectorHits, "vector");
  add(textHits, "text");
  return [...byChunk.values()];
}

/** RRF score of a candidate: each list that found it contributes 1 / (k + rank). */
function rrfScore(candidate: Candidate, k: number = RRF_K): number {
  let score = 0;
  if (candidate.vectorRank !== undefined) score += 1 / (k + candidate.vectorRank);
  if (candidate.textRank !== undefined) score += 1 / (k + candidate.textRank);
  return score;
}

/**
 * The top N candidates by RRF score. Ties (a chunk ranked r by one list against one ranked r by the
 * other) go to the better single rank, then to the earlier chunk, so the order is deterministic.
 */
export function fuseCandidates(candidates: readonly Candidate[], options: FusionOptions = {}): FusedCandidate[] {
  const k = options.k ?? RRF_K;
  const topN = options.topN ?? DEFAULT_FUSION_TOP_N;
  const bestRank = (c: Candidate) => Math.min(c.vectorRank ?? Infinity, c.textRank ?? Infinity);
  return candidates
    .map((c) => ({ ...c, score: rrfScore(c, k) }))
    .sort((a, b) => b.score - a.score || bestRank(a) - bestRank(b) || a.chunkIndex - b.chunkIndex)
    .slice(0, topN);
}

/** Dedupe then fuse: the retrieval result when no reranker is configured (or it failed). */
export function reciprocalRankFusion(
  vectorHits: readonly ChunkHit[],
  textHits: readonly ChunkHit[],
  options: FusionOptions = {},
): FusedCandidate[] {
  return fuseCandidates(dedupeHits(vectorHits, textHits), options);
}
