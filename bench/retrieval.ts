/**
 * Section 4. Search latency of the embedded indexes: for each query a vector search and a BM25 search
 * run in parallel, as hybrid retrieval does. Chunks are the ~512-token chunks of the largest
 * benchmark book (repeated to reach the larger sizes); vectors are random, of text-embedding-3-small's
 * dimension; keyword queries are 2–4 words of a random chunk, as a query rewriter's are.
 */
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chunkTextToArray } from "../common/chunking.ts";
import type { IndexedChunk } from "../common/contract/search.ts";
import { createEmbeddedTextIndex } from "../common/text-index/embedded.ts";
import { createEmbeddedVectorIndex } from "../common/vector/embedded.ts";
import { seededRandom } from "../tests/support/seeded-random.ts";
import { runsInBench, markdownTable, percentile, reps, type BenchContext, type BenchSection } from "./support.ts";

const DIMENSION = 1536;
const SIZES = [100, 1_000, 10_000];
const UPSERT_BATCH = 128;
const LIMIT = 20;
const WARMUP_QUERIES = 20;
const BOOK_ID = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";

// Deterministic, so runs compare.
const rand = seededRandom(2600);
const randomVector = () => Array.from({ length: DIMENSION }, () => rand() - 0.5);
const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;

function chunksOf(bookChunks: readonly IndexedChunk[], count: number): IndexedChunk[] {
  return Array.from({ length: count }, (_, i) => ({ chunkIndex: i, text: bookChunks[i % bookChunks.length]!.text }));
}

function keywordQuery(chunks: readonly IndexedChunk[]): string {
  const words = pick(chunks).text.match(/\p{L}{4,}/gu) ?? ["war"];
  return Array.from({ length: 2 + Math.floor(rand() * 3) }, () => pick(words)).join(" ");
}

async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(dir)) total += (await stat(join(dir, name))).size;
  return total;
}

const ms = (n: number) => n.toFixed(2);
const p50p99 = (times: readonly number[]) => `${ms(percentile(times, 50))} / ${ms(percentile(times, 99))}`;

async function measure(label: string, chunks: IndexedChunk[], queryCount: number): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), "bench-retrieval-"));
  try {
    const vectorDir = join(dir, "vectors");
    const textDir = join(dir, "text");
    let vectors = createEmbeddedVectorIndex({ dir: vectorDir });
    let text = createEmbeddedTextIndex({ dir: textDir });

    const points = chunks.map((chunk) => ({ ...chunk, vector: randomVector() }));
    const upsertStart = performance.now();
    for (let i = 0; i < chunks.length; i += UPSERT_BATCH) {
      await Promise.all([vectors.upsert(BOOK_ID, points.slice(i, i + UPSERT_BATCH)), text.upsert(BOOK_ID, chunks.slice(i, i + UPSERT_BATCH))]);
    }
    const upsertSeconds = (performance.now() - upsertStart) / 1000;

    await Promise.all([vectors.close?.(), text.close?.()]);
    // A restart: the first search of each index loads the book's files.
    vectors = createEmbeddedVectorIndex({ dir: vectorDir });
    text = createEmbeddedTextIndex({ dir: textDir });
    let reloadStart = performance.now();
    await vectors.count(BOOK_ID);
    const vectorReloadMs = performance.now() - reloadStart;
    reloadStart = performance.now();
    await text.count(BOOK_ID);
    const textReloadMs = performance.now() - reloadStart;

    const queries = Array.from({ length: WARMUP_QUERIES + queryCount }, () => ({ vector: randomVector(), keywords: keywordQuery(chunks) }));
    const vectorTimes: number[] = [];
    const textTimes: number[] = [];
    const hybridTimes: number[] = [];
    const timed = async (run: () => Promise<unknown>, into: number[], record: boolean) => {
      const start = performance.now();
      await run();
      if (record) into.push(performance.now() - start);
    };
    for (const [i, { vector, keywords }] of queries.entries()) {
      const record = i >= WARMUP_QUERIES;
      const searchVectors = () => vectors.search(BOOK_ID, vector, { limit: LIMIT });
      const searchText = () => text.search(BOOK_ID, keywords, { limit: LIMIT });
      await timed(searchVectors, vectorTimes, record);
      await timed(searchText, textTimes, record);
      await timed(() => Promise.all([searchVectors(), searchText()]), hybridTimes, record);
    }
    await Promise.all([vectors.close?.(), text.close?.()]);
    return [
      label,
      String(chunks.length),
      p50p99(hybridTimes),
      p50p99(vectorTimes),
      p50p99(textTimes),
      upsertSeconds.toFixed(2),
      `${vectorReloadMs.toFixed(0)} / ${textReloadMs.toFixed(0)}`,
      (((await folderBytes(vectorDir)) + (await folderBytes(textDir))) / 1e6).toFixed(1),
    ];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function retrievalSection(ctx: BenchContext): Promise<BenchSection> {
  const queryCount = reps(ctx, 300, 50);
  const book = ctx.books.at(-1)!;
  const bookChunks: IndexedChunk[] = chunkTextToArray(await Bun.file(book.path).text()).map(({ chunkIndex, text }) => ({ chunkIndex, text }));
  const rows: string[][] = [];
  for (const size of SIZES) {
    ctx.progress(`retrieval: ${size} chunks`);
    rows.push(await measure(`${size.toLocaleString("en")} chunks`, chunksOf(bookChunks, size), queryCount));
  }
  ctx.progress(`retrieval: ${book.title}`);
  rows.push(await measure(`${book.title}, whole book`, bookChunks, queryCount));
  return {
    title: "Retrieval",
    body: [
      `Chunks: ${book.title}${book.generated ? " (generated text)" : ""} cut by common/chunking.ts into ${bookChunks.length} chunks of ≤ 512 tokens, repeated past that count. ` +
        `Vectors: random, dimension ${DIMENSION}. p50 / p99 over ${queryCount} queries after ${WARMUP_QUERIES} warm-up, limit ${LIMIT}, in one process; ` +
        "hybrid = the vector and BM25 searches of one query in parallel, as the chat runs them. " +
        `Upsert in batches of ${UPSERT_BATCH}; reload = the first search after a restart.`,
      "",
      markdownTable(
        ["Collection", "chunks", "hybrid p50 / p99 ms", "vector p50 / p99 ms", "BM25 p50 / p99 ms", "upsert all s", "reload vector / BM25 ms", "on disk MB"],
        rows,
      ),
    ].join("\n"),
  };
}

if (import.meta.main) runsInBench("retrieval");
