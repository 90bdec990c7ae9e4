import { describe, expect, test } from "bun:test";
import { readdir, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { InvalidBookIdError } from "../../common/embedded-store.ts";
import { createLogger } from "../../common/log.ts";
import { createEmbeddedVectorIndex, VectorDimensionError } from "../../common/vector/embedded.ts";
import type { VectorPoint } from "../../common/vector/index.ts";
import { tempDirs } from "../support/temp-dirs.ts";
import { seededRandom } from "../support/seeded-random.ts";

const freshDir = tempDirs("embedded-vector-");

const BOOK = "0f8fad5b-d9cb-469f-a165-70867728950e";
const OTHER_BOOK = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  a.forEach((x, i) => {
    dot += x * b[i]!;
    na += x * x;
    nb += b[i]! * b[i]!;
  });
  return dot / Math.sqrt(na * nb);
}

const handMade: VectorPoint[] = [
  { chunkIndex: 0, text: "opposite", vector: [-2, 0, 0] },
  { chunkIndex: 1, text: "orthogonal", vector: [0, 5, 0] },
  { chunkIndex: 2, text: "diagonal", vector: [1, 1, 0] },
  { chunkIndex: 3, text: "same direction, long", vector: [10, 0, 0] },
  { chunkIndex: 4, text: "close", vector: [3, 1, 0] },
];

describe("embedded vector index", () => {
  test("returns chunks by cosine similarity, best first, whatever the length of the stored and query vectors", async () => {
    const index = createEmbeddedVectorIndex({ dir: await freshDir() });
    await index.upsert(BOOK, handMade);
    const hits = await index.search(BOOK, [0.5, 0, 0]);
    expect(hits.map((h) => h.text)).toEqual(["same direction, long", "close", "diagonal", "orthogonal", "opposite"]);
    expect(hits[0]!.score).toBeCloseTo(1, 5);
    expect(hits[1]!.score).toBeCloseTo(3 / Math.sqrt(10), 5);
    expect(hits[2]!.score).toBeCloseTo(Math.SQRT1_2, 5);
    expect(hits[3]!.score).toBeCloseTo(0, 5);
    expect(hits[4]!.score).toBeCloseTo(-1, 5);
    expect(hits[0]!.chunkIndex).toBe(3);
  });

  test("returns the same top hits as sorting every cosine score", async () => {
    const index = createEmbeddedVectorIndex({ dir: await freshDir() });
    const random = seededRandom(42);
    const next = () => random() - 0.5;
    const points = Array.from({ length: 700 }, (_, i) => ({
      chunkIndex: i,
      text: `chunk ${i}`,
      vector: Array.from({ length: 37 }, next),
    }));
    await index.upsert(BOOK, points.slice(0, 300));
    await index.upsert(BOOK, points.slice(300));
    for (let q = 0; q < 5; q++) {
      const query = Array.from({ length: 37 }, next);
      const expected = points
        .map((p) => ({ chunkIndex: p.chunkIndex, score: cosine(p.vector, query) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, 25);
      const hits = await index.search(BOOK, query, { limit: 25 });
      expect(hits.map((h) => h.chunkIndex)).toEqual(expected.map((e) => e.chunkIndex));
      hits.forEach((h, i) => expect(h.score).toBeCloseTo(expected[i]!.score, 5));
    }
  });

  test("returns at most `limit` hits, ten by default", async () => {
    const index = createEmbeddedVectorIndex({ dir: await freshDir() });
    await index.upsert(
      BOOK,
      Array.from({ length: 15 }, (_, i) => ({ chunkIndex: i, text: `t${i}`, vector: [1, i] })),
    );
    expect(await index.search(BOOK, [1, 0])).toHaveLength(10);
    expect((await index.search(BOOK, [1, 0], { limit: 2 })).map((h) => h.chunkIndex)).toEqual([0, 1]);
    expect(await index.search(BOOK, [1, 0], { limit: 0 })).toEqual([]);
  });

  test("never returns chunks past maxChunkIndex, even when they match best", async () => {
    const index = createEmbeddedVectorIndex({ dir: await freshDir() });
    await index.upsert(BOOK, handMade);
    const hits = await index.search(BOOK, [1, 0, 0], { maxChunkIndex: 2 });
    expect(hits.map((h) => h.chunkIndex)).toEqual([2, 1, 0]);
  });

  test("upserting a chunk again replaces it instead of adding a copy", async () => {
    const index = createEmbeddedVectorIndex({ dir: await freshDir() });
    await index.upsert(BOOK, handMade);
    await index.upsert(BOOK, [{ chunkIndex: 0, text: "now aligned", vector: [7, 0, 0] }]);
    expect(await index.count(BOOK)).toBe(5);
    const hits = await index.search(BOOK, [1, 0, 0], { limit: 2 });
    expect(hits.map((h) => h.text)).toEqual(["now aligned", "same direction, long"]);
    expect(hits.map((h) => h.chunkIndex)).toEqual([0, 3]);
  });

  test("keeps the last version when one batch names a chunk twice", async () => {
    const index = createEmbeddedVectorIndex({ dir: await freshDir() });
    await index.upsert(BOOK, [
      { chunkIndex: 9, text: "first", vector: [1, 0] },
      { chunkIndex: 9, text: "second", vector: [0, 1] },
    ]);
    expect(await index.count(BOOK)).toBe(1);
    expect(await index.search(BOOK, [0, 1])).toEqual([{ chunkIndex: 9, text: "second", score: expect.closeTo(1, 5) }]);
  });

  test("a new index on the same folder finds what an earlier one stored", async () => {
    const dir = await freshDir();
    const first = createEmbeddedVectorIndex({ dir });
    await first.upsert(BOOK, handMade);
    await first.upsert(OTHER_BOOK, [{ chunkIndex: 0, text: "other book, ünïcode ✓", vector: [0, 0, 1] }]);
    const before = await first.search(BOOK, [1, 0.2, 0]);
    await first.close?.();

    const second = createEmbeddedVectorIndex({ dir });
    expect(await second.count(BOOK)).toBe(5);
    expect(await second.search(BOOK, [1, 0.2, 0])).toEqual(before);
    expect(await second.search(OTHER_BOOK, [0, 0, 1])).toEqual([
      { chunkIndex: 0, text: "other book, ünïcode ✓", score: expect.closeTo(1, 5) },
    ]);
    await second.upsert(BOOK, [{ chunkIndex: 5, text: "added after restart", vector: [0, -1, 0] }]);
    const third = createEmbeddedVectorIndex({ dir });
    expect(await third.count(BOOK)).toBe(6);
    expect((await third.search(BOOK, [0, -1, 0], { limit: 1 }))[0]!.text).toBe("added after restart");
  });

  test("another process's re-ingestion of a book is served at once, not the passages it loaded before", async () => {
    const dir = await freshDir();
    const api = createEmbeddedVectorIndex({ dir });
    const worker = createEmbeddedVectorIndex({ dir });
    await worker.upsert(BOOK, handMade);
    expect((await api.search(BOOK, [1, 0, 0], { limit: 1 }))[0]?.text).toBe("same direction, long");

    await worker.deleteBook(BOOK);
    await worker.upsert(BOOK, [{ chunkIndex: 0, text: "re-ingested", vector: [1, 0, 0] }]);
    expect(await api.search(BOOK, [1, 0, 0])).toEqual([{ chunkIndex: 0, text: "re-ingested", score: expect.closeTo(1, 5) }]);
    expect(await api.count(BOOK)).toBe(1);

    await worker.deleteBook(BOOK);
    expect(await api.search(BOOK, [1, 0, 0])).toEqual([]);
  });

  test("serves books it had to drop from memory by reloading them from disk", async () => {
    const index = createEmbeddedVectorIndex({ dir: await freshDir(), maxCachedBytes: 1 });
    await index.upsert(BOOK, handMade);
    await index.upsert(OTHER_BOOK, [{ chunkIndex: 0, text: "other", vector: [0, 0, 1] }]);
    await index.upsert(BOOK, [{ chunkIndex: 5, text: "late", vector: [0, 0, 1] }]);
    expect(await index.count(OTHER_BOOK)).toBe(1);
    expect(await index.count(BOOK)).toBe(6);
    expect((await index.search(BOOK, [0, 0, 1], { limit: 1 }))[0]?.text).toBe("late");
    expect((await index.search(OTHER_BOOK, [0, 0, 1]))[0]?.text).toBe("other");
  });

  test("a book that was never indexed has no hits and a count of zero", async () => {
    const index = createEmbeddedVectorIndex({ dir: await freshDir() });
    expect(await index.search(BOOK, [1, 2, 3])).toEqual([]);
    expect(await index.count(BOOK)).toBe(0);
  });

  test("refuses vectors whose dimension differs from the book's first vectors and keeps what it had", async () => {
    const dir = await freshDir();
    const index = createEmbeddedVectorIndex({ dir });
    await index.upsert(BOOK, handMade);
    await expect(index.upsert(BOOK, [{ chunkIndex: 9, text: "too long", vector: [1, 2, 3, 4] }])).rejects.toBeInstanceOf(VectorDimensionError);
    await expect(index.search(BOOK, [1, 0])).rejects.toThrow("dimension 3, got 2");
    expect(index.upsert(OTHER_BOOK, [
      { chunkIndex: 0, text: "a", vector: [1, 2] },
      { chunkIndex: 1, text: "b", vector: [1, 2, 3] },
    ])).rejects.toBeInstanceOf(VectorDimensionError);
    expect(await index.count(BOOK)).toBe(5);
    expect(await index.count(OTHER_BOOK)).toBe(0);
    expect(await createEmbeddedVectorIndex({ dir }).count(BOOK)).toBe(5);
  });

  test("parallel upserts to one book lose no points", async () => {
    const dir = await freshDir();
    const index = createEmbeddedVectorIndex({ dir });
    const batches = Array.from({ length: 20 }, (_, b) =>
      Array.from({ length: 10 }, (_, i) => ({ chunkIndex: b * 10 + i, text: `chunk ${b * 10 + i}`, vector: [1, b, i] })),
    );
    await Promise.all(batches.map((batch) => index.upsert(BOOK, batch)));
    expect(await index.count(BOOK)).toBe(200);
    const reopened = createEmbeddedVectorIndex({ dir });
    expect(await reopened.count(BOOK)).toBe(200);
    expect(await reopened.search(BOOK, [1, 19, 9], { limit: 1 })).toEqual([
      { chunkIndex: 199, text: "chunk 199", score: expect.closeTo(1, 5) },
    ]);
  });

  test("deleting a book removes its points from memory and disk", async () => {
    const dir = await freshDir();
    const index = createEmbeddedVectorIndex({ dir });
    await index.upsert(BOOK, handMade);
    await index.upsert(OTHER_BOOK, handMade);
    await index.deleteBook(BOOK);
    await index.deleteBook(BOOK);
    expect(await index.count(BOOK)).toBe(0);
    expect(await index.search(BOOK, [1, 0, 0])).toEqual([]);
    expect(await createEmbeddedVectorIndex({ dir }).count(BOOK)).toBe(0);
    expect(await createEmbeddedVectorIndex({ dir }).count(OTHER_BOOK)).toBe(5);
    expect((await readdir(dir)).sort()).toEqual([`${OTHER_BOOK}.stamp`, `${OTHER_BOOK}.vec`]);
  });

  test("refuses book ids that could reach outside its folder", async () => {
    const dir = await freshDir();
    const index = createEmbeddedVectorIndex({ dir: join(dir, "vectors") });
    for (const bad of ["../escape", "a/b", "..", "", "x\0y", "/etc/passwd", "a.b"]) {
      await expect(index.upsert(bad, handMade)).rejects.toBeInstanceOf(InvalidBookIdError);
      await expect(index.search(bad, [1, 0, 0])).rejects.toBeInstanceOf(InvalidBookIdError);
      await expect(index.count(bad)).rejects.toBeInstanceOf(InvalidBookIdError);
      await expect(index.deleteBook(bad)).rejects.toBeInstanceOf(InvalidBookIdError);
    }
    expect(await readdir(dir)).toEqual([]);
  });

  test("after a crash mid-write keeps every batch written before it and appends the next one after them", async () => {
    const dir = await freshDir();
    const index = createEmbeddedVectorIndex({ dir });
    await index.upsert(BOOK, handMade);
    await index.upsert(BOOK, [{ chunkIndex: 7, text: "torn", vector: [0, 0, 1] }]);
    const path = join(dir, `${BOOK}.vec`);
    const bytes = await Bun.file(path).bytes();
    await writeFile(path, bytes.subarray(0, bytes.length - 7));

    const warnings: string[] = [];
    const reopened = createEmbeddedVectorIndex({ dir, logger: createLogger({ write: (line) => warnings.push(line) }) });
    expect(await reopened.count(BOOK)).toBe(5);
    expect(warnings.join()).toContain("torn or corrupt tail");
    await reopened.upsert(BOOK, [{ chunkIndex: 8, text: "after the crash", vector: [0, 0, 1] }]);

    const third = createEmbeddedVectorIndex({ dir });
    expect(await third.count(BOOK)).toBe(6);
    expect((await third.search(BOOK, [0, 0, 1], { limit: 1 }))[0]?.text).toBe("after the crash");
  });

  test("ignores a batch whose bytes were damaged on disk instead of serving wrong vectors", async () => {
    const dir = await freshDir();
    await createEmbeddedVectorIndex({ dir }).upsert(BOOK, handMade);
    const path = join(dir, `${BOOK}.vec`);
    const bytes = await Bun.file(path).bytes();
    bytes[40] = bytes[40]! ^ 0xff;
    await writeFile(path, bytes);
    const reopened = createEmbeddedVectorIndex({ dir });
    expect(await reopened.search(BOOK, [1, 0, 0])).toEqual([]);
    await reopened.deleteBook(BOOK);
    expect(await readdir(dir)).toEqual([]);
  });

  test("rewrites its file compactly once replaced points outnumber live ones, losing nothing", async () => {
    const dir = await freshDir();
    const index = createEmbeddedVectorIndex({ dir });
    const path = join(dir, `${BOOK}.vec`);
    await index.upsert(BOOK, handMade);
    const onePass = (await stat(path)).size;
    for (let round = 1; round <= 6; round++) {
      await index.upsert(BOOK, handMade.map((p) => ({ ...p, text: `${p.text} #${round}` })));
    }
    expect((await stat(path)).size).toBeLessThanOrEqual(2 * onePass + 64);
    const reopened = createEmbeddedVectorIndex({ dir });
    expect(await reopened.count(BOOK)).toBe(5);
    expect((await reopened.search(BOOK, [1, 0, 0], { limit: 1 }))[0]?.text).toBe("same direction, long #6");
  });
});
