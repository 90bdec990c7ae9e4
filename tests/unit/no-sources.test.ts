import { describe, expect, test } from "bun:test";
import { noSourcesReason, type NoSourcesReason } from "../../common/retrieval/no-sources.ts";
import type { RetrievalResult } from "../../common/retrieval/retriever.ts";

const hit = { chunkIndex: 3, text: "a passage", score: 0.5, foundBy: ["text" as const] };
const result = (over: Partial<RetrievalResult>): RetrievalResult => ({ chunks: [], rankedBy: "fusion", degraded: [], loading: [], ...over });

describe("why a turn has no passages", () => {
  const cases: [string, number | undefined, RetrievalResult, NoSourcesReason | undefined][] = [
    ["passages found", 10, result({ chunks: [hit] }), undefined],
    ["passages found while the other index loads", 10, result({ chunks: [hit], loading: ["text_search"] }), undefined],
    ["the reader is before the first passage", -1, result({}), "before_first_passage"],
    ["the book's vector index is still loading", undefined, result({ loading: ["vector_search"] }), "index_loading"],
    ["both indexes are still loading, and the reranker failed", 10, result({ loading: ["vector_search", "text_search"], degraded: ["rerank"] }), "index_loading"],
    ["the embedding failed", 10, result({ degraded: ["embedding"] }), "search_failed"],
    ["only the reranker failed (nothing to rerank)", 10, result({ degraded: ["rerank"] }), "no_match"],
    ["nothing matched", undefined, result({}), "no_match"],
  ];
  test.each(cases)("%s", (_, maxChunkIndex, retrieved, expected) => {
    expect(noSourcesReason(maxChunkIndex, retrieved)).toBe(expected);
  });
});
