/**
 * Search latency of the embedded indexes: for each query a vector search and a BM25 search run in
 * parallel, as hybrid retrieval does. Chunks are ~512-token chunks of War and Peace when
 * ../shared/books holds it (repeated to reach the larger sizes), generated text otherwise; vectors
 * are random, of text-embedding-3-small's dimension. Prints a markdown table.
 *
 *   bun bench/retrieval.ts [--queries 200]
 */
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chunkTextToArray } from "../common/chunking.ts";
import type { IndexedChunk } from "../common/search.ts";
import { createEmbeddedTextIndex } from "../common/text/embedded.ts";
import { createEmbeddedVectorIndex } from "../common/vector/embedded.ts";

const DIMENSION = 1536;
const SIZES = [100, 1_000, 10_000];
const UPSERT_BATCH = 128;
const LIMIT = 20;
const WARMUP_QUERIES = 20;
const BOOK_PATH = join(import.meta.dir, "../../shared/books/pg2600_war_and_peace.txt");
const BOOK_ID = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";

const queriesArg = process.argv.indexOf("--queries");
const QUERIES = queriesArg > 0 ? Number(process.argv[queriesArg + 1]) : 200;

/** Deterministic, so runs compare. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = random(2600);
const randomVector = () => Array.from({ length: DIMENSION }, () => rand() - 0.5);
const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;

function generatedBook(): string {
  const words = "prince army letter ball winter moscow battle count daughter estate officer horse snow peace war fire night";
  const vocabulary = words.split(" ");
  return Array.from({ length: 6000 }, () => Array.from({ length: 60 }, () => pick(vocabulary)).join(" ") + ".").join("\n\n");
}

const haveBook = existsSync(BOOK_PATH);
const bookChunks: IndexedChunk[] = chunkTextToArray(haveBook ? await Bun.file(BOOK_PATH).text() : generatedBook()).map(
  ({ chunkIndex, text }) => ({ chunkIndex, text }),
);

function chunksOf(count: number): IndexedChunk[] {
  return Array.from({ length: count }, (_, i) => ({ chunkIndex: i, text: bookChunks[i % bookChunks.length]!.text }));
}

/** 2-4 words of a random chunk: what a query rewriter's keyword query looks like. */
function keywordQuery(chunks: readonly IndexedChunk[]): string {
  const words = pick(chunks).text.match(/\p{L}{4,}/gu) ?? ["war"];
  return Array.from({ length: 2 + Math.floor(rand() * 3) }, () => pick(words)).join(" ");
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const ms = (n: number) => n.toFixed(2);

async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(dir)) total += (await stat(join(dir, name))).size;
  return total;
}

interface Row {
  label: string;
  chunks: number;
  vectorP50: number;
  vectorP99: number;
  textP50: number;
  textP99: number;
  hybridP50: number;
  hybridP99: number;
  upsertSeconds: number;
  snapshotSeconds: number;
  vectorReloadMs: number;
  textReloadMs: number;
  diskMb: number;
}

async function measure(label: string, chunks: IndexedChunk[]): Promise<Row> {
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

    // close() writes the BM25 snapshot, as the idle timer would after a real ingest.
    const closeStart = performance.now();
    await Promise.all([vectors.close?.(), text.close?.()]);
    const snapshotSeconds = (performance.now() - closeStart) / 1000;
    // A restart: the first search of each index loads the book's files.
    vectors = createEmbeddedVectorIndex({ dir: vectorDir });
    text = createEmbeddedTextIndex({ dir: textDir });
    let reloadStart = performance.now();
    await vectors.count(BOOK_ID);
    const vectorReloadMs = performance.now() - reloadStart;
    reloadStart = performance.now();
    await text.count(BOOK_ID);
    const textReloadMs = performance.now() - reloadStart;

    const queries = Array.from({ length: WARMUP_QUERIES + QUERIES }, () => ({ vector: randomVector(), keywords: keywordQuery(chunks) }));
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
    for (const times of [vectorTimes, textTimes, hybridTimes]) times.sort((a, b) => a - b);
    return {
      label,
      chunks: chunks.length,
      vectorP50: percentile(vectorTimes, 50),
      vectorP99: percentile(vectorTimes, 99),
      textP50: percentile(textTimes, 50),
      textP99: percentile(textTimes, 99),
      hybridP50: percentile(hybridTimes, 50),
      hybridP99: percentile(hybridTimes, 99),
      upsertSeconds,
      snapshotSeconds,
      vectorReloadMs,
      textReloadMs,
      diskMb: ((await folderBytes(vectorDir)) + (await folderBytes(textDir))) / 1e6,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

console.log(
  haveBook
    ? `Chunks: War and Peace (${BOOK_PATH}) cut by common/chunking.ts into ${bookChunks.length} chunks of <= 512 tokens, repeated past that count.`
    : `Chunks: ${BOOK_PATH} is absent, so generated text (${bookChunks.length} chunks of <= 512 tokens), repeated past that count.`,
);
console.log(`Vectors: random, dimension ${DIMENSION}. ${QUERIES} queries after ${WARMUP_QUERIES} warm-up; limit ${LIMIT}; upsert batches of ${UPSERT_BATCH}.\n`);

const rows: Row[] = [];
for (const size of SIZES) rows.push(await measure(`${size.toLocaleString("en")} chunks`, chunksOf(size)));
rows.push(await measure(haveBook ? "War and Peace, whole book" : "generated book, whole", bookChunks));

console.log("| Collection | Chunks | Vector p50 / p99 (ms) | BM25 p50 / p99 (ms) | Hybrid p50 / p99 (ms) | Upsert all (s) | BM25 snapshot (s) | Reload vector / BM25 (ms) | On disk (MB) |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.label} | ${r.chunks} | ${ms(r.vectorP50)} / ${ms(r.vectorP99)} | ${ms(r.textP50)} / ${ms(r.textP99)} | ${ms(r.hybridP50)} / ${ms(r.hybridP99)} | ${r.upsertSeconds.toFixed(2)} | ${r.snapshotSeconds.toFixed(2)} | ${r.vectorReloadMs.toFixed(0)} / ${r.textReloadMs.toFixed(0)} | ${r.diskMb.toFixed(1)} |`,
  );
}
