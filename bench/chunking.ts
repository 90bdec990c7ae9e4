/**
 * Chunking speed on a whole novel, next to LangChain's TokenTextSplitter on the same text and the bare
 * cost of tokenising it once (the floor for any exact token-based splitter). common/chunking.ts counts
 * the text about twice (per sentence, then per chunk), so about twice the countTokens row is expected.
 *
 *   bun bench/chunking.ts [book.txt]
 *
 * Without an argument it reads War and Peace from ../shared/books next to the repository, and says so
 * and exits when that is absent (a plain clone has no ../shared).
 */
import { TokenTextSplitter } from "@langchain/textsplitters";
import { encode } from "gpt-tokenizer/encoding/o200k_base";
import { Tiktoken } from "js-tiktoken/lite";
import o200kBase from "js-tiktoken/ranks/o200k_base";
import { chunkTextToArray, countO200kTokens, DEFAULT_CHUNK_TOKENS } from "../common/chunking.ts";

const RUNS = 3;
const DEFAULT_BOOK = new URL("../../shared/books/pg2600_war_and_peace.txt", import.meta.url).pathname;

const path = process.argv[2] ?? DEFAULT_BOOK;
const file = Bun.file(path);
if (!(await file.exists())) {
  console.log(`bench/chunking: no book at ${path}; pass a text file as the first argument.`);
  process.exit(0);
}
const text = await file.text();

interface Row {
  name: string;
  ms: number;
  chunks: number | string;
  meanTokens: number | string;
  maxTokens: number | string;
  withReplacementChar: number | string;
}

/** Median of RUNS timed calls; the first call also warms caches the others then share. */
async function time<T>(fn: () => T | Promise<T>): Promise<{ ms: number; result: T }> {
  const samples: number[] = [];
  let result: T | undefined;
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    result = await fn();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  return { ms: samples[Math.floor(RUNS / 2)] as number, result: result as T };
}

function describe(name: string, ms: number, chunks: readonly string[]): Row {
  const counts = chunks.map(countO200kTokens);
  return {
    name,
    ms: Math.round(ms),
    chunks: chunks.length,
    meanTokens: Math.round(counts.reduce((a, b) => a + b, 0) / Math.max(1, counts.length)),
    maxTokens: Math.max(0, ...counts),
    withReplacementChar: chunks.filter((c) => c.includes("\uFFFD")).length,
  };
}

const rows: Row[] = [];

const floor = await time(() => encode(text, { disallowedSpecial: new Set() }).length);
rows.push({ name: "gpt-tokenizer encode, whole text", ms: Math.round(floor.ms), chunks: "-", meanTokens: `${floor.result} total`, maxTokens: "-", withReplacementChar: "-" });

const counted = await time(() => countO200kTokens(text));
rows.push({ name: "gpt-tokenizer countTokens, whole text", ms: Math.round(counted.ms), chunks: "-", meanTokens: "-", maxTokens: "-", withReplacementChar: "-" });

const ours = await time(() => chunkTextToArray(text, { chunkTokens: DEFAULT_CHUNK_TOKENS }));
rows.push(describe("common/chunking.ts (sentence-aligned)", ours.ms, ours.result.map((c) => c.text)));

// LangChain fetches tiktoken ranks from tiktoken.pages.dev the first time it splits, and keeps the
// encoder in a TypeScript-private `tokenizer` field that it only fills when empty. Setting that field
// to an encoder built from js-tiktoken's bundled o200k_base ranks keeps the run offline; the splitting
// itself is LangChain's own code. Building the encoder is timed separately.
const built = await time(() => new Tiktoken(o200kBase));
const splitter = new TokenTextSplitter({ chunkSize: DEFAULT_CHUNK_TOKENS, chunkOverlap: 0, encodingName: "o200k_base" });
Reflect.set(splitter, "tokenizer", built.result);
const langchain = await time(() => splitter.splitText(text));
rows.push(describe("LangChain TokenTextSplitter (js-tiktoken)", langchain.ms, langchain.result));
rows.push({ name: "  js-tiktoken o200k_base encoder build", ms: Math.round(built.ms), chunks: "-", meanTokens: "-", maxTokens: "-", withReplacementChar: "-" });

const megabytes = (new TextEncoder().encode(text).length / 1e6).toFixed(1);
console.log(`${path}: ${megabytes} MB, ${DEFAULT_CHUNK_TOKENS}-token chunks, median of ${RUNS} runs\n`);
console.table(rows);
