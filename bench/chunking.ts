/**
 * Section 1. Chunking a whole novel: common/chunking.ts beside LangChain's TokenTextSplitter on the
 * same text and the bare cost of tokenising it once with gpt-tokenizer (the floor for any exact
 * token-based splitter). Ours counts the text about twice (per sentence, then per chunk), so about
 * twice the floor is expected.
 */
import { TokenTextSplitter } from "@langchain/textsplitters";
import { encode } from "gpt-tokenizer/encoding/o200k_base";
import { Tiktoken } from "js-tiktoken/lite";
import o200kBase from "js-tiktoken/ranks/o200k_base";
import { chunkTextToArray, DEFAULT_CHUNK_TOKENS } from "../common/chunking.ts";
import { countO200kTokens } from "../common/token-count.ts";
import { runsInBench, booksNote, formatSummary, markdownTable, mb, reps, summarise, timeRuns, type BenchContext, type BenchSection } from "./support.ts";

/**
 * LangChain fetches tiktoken ranks from tiktoken.pages.dev the first time it splits, and keeps the
 * encoder in a TypeScript-private `tokenizer` field that it only fills when empty. Setting that field
 * to an encoder built from js-tiktoken's bundled o200k_base ranks keeps the run offline; the
 * splitting itself is LangChain's own code.
 */
function offlineTokenTextSplitter(): TokenTextSplitter {
  const splitter = new TokenTextSplitter({ chunkSize: DEFAULT_CHUNK_TOKENS, chunkOverlap: 0, encodingName: "o200k_base" });
  Reflect.set(splitter, "tokenizer", new Tiktoken(o200kBase));
  return splitter;
}

export async function chunkingSection(ctx: BenchContext): Promise<BenchSection> {
  const runs = reps(ctx, 5, 1);
  const splitter = offlineTokenTextSplitter();
  const rows: string[][] = [];
  const quality: string[][] = [];
  for (const book of ctx.books) {
    ctx.progress(`chunking: ${book.title}`);
    const text = await Bun.file(book.path).text();
    const size = mb(book.bytes);
    // One untimed call of each warms the tokenisers' caches and the JIT; the timed calls then share them.
    const floor = await timeRuns(runs, () => encode(text, { disallowedSpecial: new Set() }).length, 1);
    const ours = await timeRuns(runs, () => chunkTextToArray(text, { chunkTokens: DEFAULT_CHUNK_TOKENS }), 1);
    const langchain = await timeRuns(runs, () => splitter.splitText(text), 1);
    const [f, o, l] = [summarise(floor.ms), summarise(ours.ms), summarise(langchain.ms)];
    rows.push([
      `${book.title} (${size.toFixed(2)} MB)`,
      formatSummary(f),
      formatSummary(o),
      (size / (o.median / 1000)).toFixed(2),
      (o.median / f.median).toFixed(2),
      formatSummary(l),
      (size / (l.median / 1000)).toFixed(2),
      (l.median / o.median).toFixed(2),
    ]);
    const counts = (chunks: readonly string[]) => chunks.map(countO200kTokens);
    const describe = (name: string, chunks: readonly string[]) => {
      const c = counts(chunks);
      return [
        `${book.title}: ${name}`,
        String(chunks.length),
        String(Math.round(c.reduce((a, b) => a + b, 0) / Math.max(1, c.length))),
        String(Math.max(0, ...c)),
        String(chunks.filter((chunk) => chunk.includes("\uFFFD")).length),
      ];
    };
    quality.push(describe("ours", ours.result.map((c) => c.text)), describe("LangChain", langchain.result));
    ctx.progress(`chunking: ${book.title}: ours ${o.median.toFixed(0)} ms, LangChain ${l.median.toFixed(0)} ms, floor ${f.median.toFixed(0)} ms`);
  }
  return {
    title: "Chunking",
    body: [
      `${booksNote(ctx.books)} ${DEFAULT_CHUNK_TOKENS}-token chunks, o200k_base, no overlap. Median (min–max) of ${runs} runs after one warm-up, in one process. ` +
        "The floor is one gpt-tokenizer `encode` of the whole text: no exact token-based splitter can do less. " +
        "LangChain's `TokenTextSplitter` runs offline on js-tiktoken's bundled o200k_base ranks.",
      "",
      markdownTable(["Book", "floor: encode (ms)", "ours (ms)", "ours MB/s", "ours ÷ floor", "LangChain (ms)", "LangChain MB/s", "LangChain ÷ ours"], rows),
      "",
      "What each splitter produced (tokens counted with o200k_base; U+FFFD marks a character cut in half):",
      "",
      markdownTable(["Book: splitter", "chunks", "mean tokens", "max tokens", "chunks with U+FFFD"], quality),
    ].join("\n"),
  };
}

if (import.meta.main) runsInBench("chunking");
