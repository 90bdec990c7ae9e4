import { describe, expect, test } from "bun:test";
import { dedupeHits, DEFAULT_FUSION_TOP_N, reciprocalRankFusion, RRF_K } from "../../common/retrieval/fusion.ts";
import type { ChunkHit } from "../../common/contract/search.ts";

const hit = (chunkIndex: number, score: number): ChunkHit => ({ chunkIndex, text: `chunk ${chunkIndex}`, score });
const hits = (...indexes: number[]) => indexes.map((i, rank) => hit(i, 1 - rank / 10));

describe("dedupeHits", () => {
  test("merges a chunk both searches found into one candidate that keeps both scores and ranks", () => {
    const candidates = dedupeHits([hit(7, 0.91), hit(3, 0.8)], [hit(3, 12.5), hit(9, 4)]);
    expect(candidates).toEqual([
      { chunkIndex: 7, text: "chunk 7", foundBy: ["vector"], vectorScore: 0.91, vectorRank: 1 },
      { chunkIndex: 3, text: "chunk 3", foundBy: ["vector", "text"], vectorScore: 0.8, vectorRank: 2, textScore: 12.5, textRank: 1 },
      { chunkIndex: 9, text: "chunk 9", foundBy: ["text"], textScore: 4, textRank: 2 },
    ]);
  });

  test("keeps the first rank of a chunk a list returns twice and does not count the repeat", () => {
    const [first, second] = dedupeHits([hit(1, 0.9), hit(1, 0.5), hit(2, 0.4)], []);
    expect(first).toMatchObject({ chunkIndex: 1, vectorScore: 0.9, vectorRank: 1, foundBy: ["vector"] });
    expect(second).toMatchObject({ chunkIndex: 2, vectorRank: 2 });
  });
});

describe("reciprocalRankFusion", () => {
  test("uses k = 60 and returns five chunks by default", () => {
    expect(RRF_K).toBe(60);
    expect(DEFAULT_FUSION_TOP_N).toBe(5);
    expect(reciprocalRankFusion(hits(1, 2, 3, 4, 5, 6, 7), hits(11, 12, 13))).toHaveLength(5);
  });

  test.each([
    {
      name: "a chunk both lists found outranks the top chunk of a single list",
      vector: hits(1, 2, 3),
      text: hits(3, 4, 5),
      expected: [
        [3, 1 / 63 + 1 / 61],
        [1, 1 / 61],
        [2, 1 / 62],
        [4, 1 / 62],
        [5, 1 / 63],
      ],
    },
    {
      name: "equal scores go to the better single rank, then to the earlier chunk",
      vector: hits(20, 10),
      text: hits(15, 5),
      expected: [
        [15, 1 / 61],
        [20, 1 / 61],
        [5, 1 / 62],
        [10, 1 / 62],
      ],
    },
    { name: "only the vector list answered", vector: hits(4, 8), text: [], expected: [[4, 1 / 61], [8, 1 / 62]] },
    { name: "only the BM25 list answered", vector: [], text: hits(6), expected: [[6, 1 / 61]] },
    { name: "neither list found anything", vector: [], text: [], expected: [] },
  ])("ranks chunks when $name", ({ vector, text, expected }) => {
    const fused = reciprocalRankFusion(vector, text);
    expect(fused.map((c) => c.chunkIndex)).toEqual(expected.map(([i]) => i as number));
    fused.forEach((c, i) => expect(c.score).toBeCloseTo(expected[i]?.[1] as number, 12));
  });

  test("ignores raw scores: a weak BM25 score at rank 1 weighs as much as a strong cosine at rank 1", () => {
    const fused = reciprocalRankFusion([hit(1, 0.99)], [hit(2, 0.01)]);
    expect(fused[0]?.score).toBe(fused[1]?.score as number);
  });

  test("honours a custom k and top N", () => {
    const fused = reciprocalRankFusion(hits(1, 2, 3), hits(3), { k: 1, topN: 2 });
    expect(fused.map((c) => [c.chunkIndex, c.score])).toEqual([
      [3, 1 / 4 + 1 / 2],
      [1, 1 / 2],
    ]);
  });
});
