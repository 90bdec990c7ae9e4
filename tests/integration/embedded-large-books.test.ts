import { afterAll, describe, expect, test } from "bun:test";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { frame, writeFileAtomic } from "../../common/embedded-store.ts";
import type { SearchOptions } from "../../common/contract/search.ts";
import { createEmbeddedTextIndex } from "../../common/text-index/embedded.ts";
import { createEmbeddedVectorIndex } from "../../common/vector/embedded.ts";
import { tempDirs } from "../support/temp-dirs.ts";

/**
 * Large books on the embedded indexes: loading one must not hold up other requests, and the books
 * kept in memory are bounded by their size. A book written in many batches stands in for a large
 * one: loading it takes one step per batch, so the assertions count event-loop turns, never time.
 */

const freshDir = tempDirs("embedded-large-");
const BOOK = "0f8fad5b-d9cb-469f-a165-70867728950e";
const OTHER_BOOK = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
const BATCHES = 6_000;

const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") });
afterAll(() => server.stop(true));

/** A vector book as an ingestion writes it: one log frame per batch of `perBatch` points. */
async function writeVectorBook(dir: string, bookId: string, batches: number, perBatch = 4): Promise<void> {
  const parts = Array.from({ length: batches }, (_, b) => {
    const header = new DataView(new ArrayBuffer(8));
    header.setUint32(0, 2, true);
    header.setUint32(4, perBatch, true);
    const chunkIndexes = Int32Array.from({ length: perBatch }, (_, i) => b * perBatch + i);
    const vectors = Float32Array.from({ length: 2 * perBatch }, (_, i) => (i % 2 === 0 ? 1 : 0));
    const texts = new TextEncoder().encode(JSON.stringify(Array.from(chunkIndexes, (c) => `chunk ${c}`)));
    return frame([header, chunkIndexes, vectors, texts]);
  });
  await writeFileAtomic(join(dir, `${bookId}.vec`), parts.flat());
}

/** A BM25 book as an ingestion writes it: one log frame per batch. */
async function writeTextBook(dir: string, bookId: string, batches: number): Promise<void> {
  const parts = Array.from({ length: batches }, (_, b) => frame([new TextEncoder().encode(JSON.stringify([[b, `lighthouse passage number ${b}`]]))]));
  await writeFileAtomic(join(dir, `${bookId}.bm25.log`), parts.flat());
}

/**
 * Runs the event loop beside `work` until it settles: how many turns the loop made meanwhile, and
 * whether a request to the server, sent at the start, was answered before the work ended.
 */
async function beside<T>(work: Promise<T>): Promise<{ result: T; turns: number; answeredFirst: boolean }> {
  let done = false;
  let answeredFirst = false;
  const settled = work.finally(() => {
    done = true;
  });
  const request = fetch(server.url).then(async (response) => {
    await response.text();
    answeredFirst = !done;
  });
  let turns = 0;
  while (!done) {
    await new Promise((resolve) => setImmediate(resolve));
    turns++;
  }
  await request;
  return { result: await settled, turns, answeredFirst };
}

interface Limits {
  maxCachedBytes?: number;
  maxLoadWaitMs?: number;
}
/** Loads in these tests are waited for, however busy the machine, unless a test says otherwise. */
const PATIENT = 600_000;

const searches = {
  vector: {
    create: (dir: string, options: Limits = {}) => createEmbeddedVectorIndex({ dir, maxLoadWaitMs: PATIENT, ...options }),
    write: writeVectorBook,
    search: (index: ReturnType<typeof createEmbeddedVectorIndex>, bookId: string, options?: SearchOptions) => index.search(bookId, [1, 0], options),
    file: (bookId: string) => `${bookId}.vec`,
    upsert: (index: ReturnType<typeof createEmbeddedVectorIndex>, bookId: string, chunkIndexes: number[]) =>
      index.upsert(bookId, chunkIndexes.map((chunkIndex) => ({ chunkIndex, text: `chunk ${chunkIndex}`, vector: [1, 0] }))),
  },
  text: {
    create: (dir: string, options: Limits = {}) => createEmbeddedTextIndex({ dir, maxLoadWaitMs: PATIENT, ...options }),
    write: writeTextBook,
    search: (index: ReturnType<typeof createEmbeddedTextIndex>, bookId: string, options?: SearchOptions) => index.search(bookId, "lighthouse", options),
    file: (bookId: string) => `${bookId}.bm25.log`,
    upsert: (index: ReturnType<typeof createEmbeddedTextIndex>, bookId: string, chunkIndexes: number[]) =>
      index.upsert(bookId, chunkIndexes.map((chunkIndex) => ({ chunkIndex, text: `lighthouse passage number ${chunkIndex}` }))),
  },
} as const;

describe.each(["vector", "text"] as const)("embedded %s index with a large book", (kind) => {
  const { create, write, file } = searches[kind];
  const search = searches[kind].search as (index: ReturnType<typeof create>, bookId: string, options?: SearchOptions) => Promise<unknown[]>;
  const upsert = searches[kind].upsert as (index: ReturnType<typeof create>, bookId: string, chunkIndexes: number[]) => Promise<void>;

  test(`loading a book written in ${BATCHES} batches lets the event loop run between them: a request sent meanwhile is answered first`, async () => {
    const dir = await freshDir();
    await write(dir, BOOK, BATCHES);
    const index = create(dir);
    const { result, turns, answeredFirst } = await beside(search(index, BOOK, { limit: 3 }));
    expect(result).toHaveLength(3);
    // A turn per batch at least; a load in one go gives the loop only the turns of its file reads.
    expect(turns).toBeGreaterThanOrEqual(BATCHES);
    expect(answeredFirst).toBe(true);
    await index.close?.();
  });

  test("the books kept in memory are bounded by their size: past the budget the least recently used is dropped and read again from disk", async () => {
    const dir = await freshDir();
    await write(dir, BOOK, 50);
    await write(dir, OTHER_BOOK, 50);
    // A budget of one byte: only the book in use stays.
    const index = create(dir, { maxCachedBytes: 1 });
    expect(await search(index, BOOK)).not.toEqual([]);
    expect(await search(index, OTHER_BOOK)).not.toEqual([]);
    // Taken away behind the index's back: only a book no longer in memory notices.
    await Promise.all([rm(join(dir, file(BOOK))), rm(join(dir, file(OTHER_BOOK)))]);
    expect(await search(index, OTHER_BOOK)).not.toEqual([]);
    expect(await search(index, BOOK)).toEqual([]);
    await index.close?.();
  });

  test("writing a book keeps none of it in memory: a search afterwards reads it from disk", async () => {
    const dir = await freshDir();
    const index = create(dir);
    for (let b = 0; b < 10; b++) await upsert(index, BOOK, Array.from({ length: 20 }, (_, i) => b * 20 + i));
    // Taken away behind the index's back: a copy kept by the writes would still answer.
    await rm(join(dir, file(BOOK)));
    expect(await search(index, BOOK)).toEqual([]);
    await index.close?.();
  });

  test("a search does not wait past maxLoadWaitMs for its book: it answers without it, and the book serves the searches after its load", async () => {
    const dir = await freshDir();
    await write(dir, BOOK, BATCHES);
    const index = create(dir, { maxLoadWaitMs: 0 });
    expect(await search(index, BOOK)).toEqual([]);
    let searches = 1;
    while ((await search(index, BOOK)).length === 0) {
      searches++;
      await Bun.sleep(5);
    }
    expect(searches).toBeGreaterThan(1);
    // A count is not a chat's search: it waits for the whole book.
    const slow = create(dir, { maxLoadWaitMs: 0 });
    expect(await slow.count(BOOK)).toBe(kind === "vector" ? 4 * BATCHES : BATCHES);
    await Promise.all([index.close?.(), slow.close?.()]);
  });
});
