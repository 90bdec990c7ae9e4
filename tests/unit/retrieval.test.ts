import { describe, expect, test } from "bun:test";
import { RRF_K } from "../../common/retrieval/fusion.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import type { Reranker, RerankResult } from "../../common/rerank/index.ts";
import { createRetriever, type RetrieverOptions, type RetrievalStep } from "../../common/retrieval/retriever.ts";
import type { ChunkHit, SearchOptions } from "../../common/contract/search.ts";
import type { TextIndex } from "../../common/text-index/index.ts";
import type { VectorIndex } from "../../common/vector/index.ts";

const hit = (chunkIndex: number, score: number): ChunkHit => ({ chunkIndex, text: `passage ${chunkIndex}`, score });
const VECTOR_HITS = [hit(4, 0.92), hit(8, 0.81), hit(15, 0.7)];
const TEXT_HITS = [hit(8, 14.2), hit(23, 9.1)];
const EMBEDDING = [0.1, 0.2, 0.3];

/** Fakes of the ports that record every call in one shared log and can be told to fail. */
function harness(overrides: { embed?: LanguageModel["embed"]; vector?: VectorIndex["search"]; text?: TextIndex["search"]; rerank?: Reranker["rerank"] } = {}) {
  const log: string[] = [];
  const calls = {
    embed: [] as { texts: readonly string[]; signal?: AbortSignal }[],
    vector: [] as { bookId: string; vector: readonly number[]; options?: SearchOptions }[],
    text: [] as { bookId: string; query: string; options?: SearchOptions }[],
    rerank: [] as { query: string; documents: readonly string[]; topN: number }[],
  };
  const stepErrors: [RetrievalStep, unknown][] = [];
  const options: RetrieverOptions = {
    llm: {
      embed: (texts, opts) => {
        log.push("embed");
        calls.embed.push({ texts, signal: opts?.signal });
        return overrides.embed ? overrides.embed(texts, opts) : Promise.resolve([EMBEDDING]);
      },
    },
    vectorIndex: {
      search: (bookId, vector, opts) => {
        log.push("vector.search");
        calls.vector.push({ bookId, vector, options: opts });
        return overrides.vector ? overrides.vector(bookId, vector, opts) : Promise.resolve(VECTOR_HITS);
      },
    },
    textIndex: {
      search: (bookId, query, opts) => {
        log.push("text.search");
        calls.text.push({ bookId, query, options: opts });
        return overrides.text ? overrides.text(bookId, query, opts) : Promise.resolve(TEXT_HITS);
      },
    },
    onStepError: (step, error) => stepErrors.push([step, error]),
  };
  if (overrides.rerank) {
    const rerank = overrides.rerank;
    options.reranker = {
      rerank: (query, documents, topN, signal) => {
        log.push("rerank");
        calls.rerank.push({ query, documents, topN });
        return rerank(query, documents, topN, signal);
      },
    };
  }
  return { retriever: createRetriever(options), log, calls, stepErrors };
}

const request = {
  bookId: "book-1",
  narrativeQuery: "How did Pierre feel about the duel?",
  keywordQuery: "Pierre duel Dolokhov",
  rerankQuery: "Were you afraid when you faced Dolokhov?",
};
const fail = (message: string) => () => Promise.reject(new Error(message));
const fused = (...ranks: (number | undefined)[]) => ranks.reduce<number>((s, r) => s + (r ? 1 / (RRF_K + r) : 0), 0);
// A timer turn, as Bun.sleep(0) gives, written with web APIs so the suite also runs under Deno.
const nextTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

describe("createRetriever", () => {
  test("starts the BM25 search before the embedding and runs it while the embedding is pending", async () => {
    const embedding = Promise.withResolvers<number[][]>();
    const { retriever, log } = harness({ embed: () => embedding.promise });
    const pending = retriever.retrieve(request);
    await nextTurn();
    expect(log).toEqual(["text.search", "embed"]);
    embedding.resolve([EMBEDDING]);
    const result = await pending;
    expect(log).toEqual(["text.search", "embed", "vector.search"]);
    expect(result.chunks).toHaveLength(4);
  });

  test("embeds the narrative query and searches both indexes for ten hits within the spoiler limit", async () => {
    const { retriever, calls } = harness();
    await retriever.retrieve({ ...request, maxChunkIndex: 40 });
    expect(calls.embed.map((c) => c.texts)).toEqual([[request.narrativeQuery]]);
    expect(calls.vector).toEqual([{ bookId: "book-1", vector: EMBEDDING, options: { limit: 10, maxChunkIndex: 40, onLoading: expect.any(Function) } }]);
    expect(calls.text).toEqual([{ bookId: "book-1", query: request.keywordQuery, options: { limit: 10, maxChunkIndex: 40, onLoading: expect.any(Function) } }]);
  });

  test("without a reranker, returns the deduplicated chunks ordered by reciprocal rank fusion", async () => {
    const { retriever } = harness();
    const result = await retriever.retrieve(request);
    expect(result).toEqual({
      rankedBy: "fusion",
      degraded: [],
      loading: [],
      chunks: [
        { chunkIndex: 8, text: "passage 8", score: fused(2, 1), foundBy: ["vector", "text"] },
        { chunkIndex: 4, text: "passage 4", score: fused(1), foundBy: ["vector"] },
        { chunkIndex: 23, text: "passage 23", score: fused(2), foundBy: ["text"] },
        { chunkIndex: 15, text: "passage 15", score: fused(3), foundBy: ["vector"] },
      ],
    });
  });

  test("with a reranker, scores each distinct chunk once against the reader's message (not the rewritten queries) and keeps its order", async () => {
    const { retriever, calls } = harness({
      rerank: async (_q, documents) =>
        documents.map((d, index): RerankResult => ({ index, relevanceScore: d === "passage 23" ? 0.9 : d === "passage 15" ? 0.6 : 0.1 })),
    });
    const result = await retriever.retrieve(request);
    expect(calls.rerank).toEqual([
      { query: "Were you afraid when you faced Dolokhov?", documents: ["passage 4", "passage 8", "passage 15", "passage 23"], topN: 5 },
    ]);
    expect(result.rankedBy).toBe("rerank");
    expect(result.degraded).toEqual([]);
    expect(result.chunks.map((c) => [c.chunkIndex, c.score])).toEqual([
      [23, 0.9],
      [15, 0.6],
      [4, 0.1],
      [8, 0.1],
    ]);
    expect(result.chunks[3]?.foundBy).toEqual(["vector", "text"]);
  });

  test("returns at most five chunks", async () => {
    const many = Array.from({ length: 10 }, (_, i) => hit(i, 1 - i / 10));
    const { retriever } = harness({ vector: async () => many, rerank: async (_q, docs) => docs.map((_, index) => ({ index, relevanceScore: index })) });
    // Eleven distinct candidates (ten vector hits, one more from BM25) are scored by their position.
    expect((await retriever.retrieve(request)).chunks.map((c) => c.chunkIndex)).toEqual([23, 9, 8, 7, 6]);
  });

  test.each<{ name: string; failing: Parameters<typeof harness>[0]; degraded: RetrievalStep[]; chunks: number[] }>([
    { name: "the embedding fails", failing: { embed: fail("gateway 502") }, degraded: ["embedding"], chunks: [8, 23] },
    { name: "the embedding comes back empty", failing: { embed: async () => [] }, degraded: ["embedding"], chunks: [8, 23] },
    { name: "the vector search fails", failing: { vector: fail("qdrant down") }, degraded: ["vector_search"], chunks: [8, 23] },
    { name: "the BM25 search fails", failing: { text: fail("typesense down") }, degraded: ["text_search"], chunks: [4, 8, 15] },
    {
      name: "both searches fail",
      failing: { vector: fail("qdrant down"), text: fail("typesense down"), rerank: async () => [{ index: 0, relevanceScore: 1 }] },
      degraded: ["vector_search", "text_search"],
      chunks: [],
    },
    { name: "the reranker fails", failing: { rerank: fail("rerank 500") }, degraded: ["rerank"], chunks: [8, 4, 23, 15] },
    {
      name: "the reranker names a document that was not sent",
      failing: { rerank: async () => [{ index: 7, relevanceScore: 0.9 }] },
      degraded: ["rerank"],
      chunks: [8, 4, 23, 15],
    },
    { name: "the reranker returns nothing", failing: { rerank: async () => [] }, degraded: ["rerank"], chunks: [8, 4, 23, 15] },
    {
      name: "the embedding and the reranker fail",
      failing: { embed: fail("gateway 502"), rerank: fail("rerank 500") },
      degraded: ["embedding", "rerank"],
      chunks: [8, 23],
    },
  ])("degrades instead of failing when $name", async ({ failing, degraded, chunks }) => {
    const { retriever, stepErrors, calls } = harness(failing);
    const result = await retriever.retrieve(request);
    expect(result.degraded).toEqual(degraded);
    expect(result.rankedBy).toBe("fusion");
    expect(result.chunks.map((c) => c.chunkIndex)).toEqual(chunks);
    expect(stepErrors.map(([step]) => step).sort()).toEqual([...degraded].sort());
    if (degraded.includes("embedding")) expect(calls.vector).toHaveLength(0);
    if (chunks.length === 0) expect(calls.rerank).toHaveLength(0);
  });

  test("skips a search whose query is blank without calling it a failure", async () => {
    const { retriever, calls } = harness();
    const result = await retriever.retrieve({ ...request, keywordQuery: "   " });
    expect(calls.text).toHaveLength(0);
    expect(result.degraded).toEqual([]);
    expect(result.chunks.map((c) => c.chunkIndex)).toEqual([4, 8, 15]);
  });

  test("rejects with the abort reason, without reporting degradation, when the caller aborts", async () => {
    const controller = new AbortController();
    const { retriever, stepErrors, calls } = harness({
      embed: (_t, opts) =>
        new Promise((_, reject) => opts?.signal?.addEventListener("abort", () => reject(new Error("aborted upstream")))),
    });
    const pending = retriever.retrieve({ ...request, signal: controller.signal });
    await nextTurn();
    expect(calls.embed[0]?.signal).toBe(controller.signal);
    controller.abort(new Error("client went away"));
    await expect(pending).rejects.toThrow("client went away");
    expect(stepErrors).toEqual([]);
  });
});
