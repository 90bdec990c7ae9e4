/**
 * The spoiler guard's costs (api/chat/spoiler-filter.ts, ingest/spoiler-guard/), run
 * alone: `bun bench/spoiler-guard.ts [book.txt …]` (default: the Gutenberg books in shared/books).
 *
 * Per book: the shingle index's build time at ingestion, its stored size (base64) and its memory in
 * the API, the decode time on a cache miss, and the API's CPU per streamed token of a reply going
 * through the guard (a reply of the book's own early sentences, fed as a model streams it, a word or
 * so per token). Also the false-stop floor of the 8-word rule: how many 8-word runs of another book
 * this book holds (phrases common to English prose rather than quotations); and, with the names the
 * native NLP engine finds (the selected characters and every other person, as ingestion stores them),
 * how many of the book's own sentences from before a reader's position (30 % and 60 %) the guard stops.
 */
import { readdir } from "node:fs/promises";
import { basename, join } from "node:path";
import { decodeShingleIndex, shingleKey, SHINGLE_WORDS } from "../common/spoiler-guard/shingles.ts";
import { buildShingleIndex } from "../ingest/spoiler-guard/shingles.ts";
import { wordsOf } from "../common/text-normalise.ts";
import { guardCharacters } from "../ingest/spoiler-guard/people.ts";
import { createSpoilerGuard, lateNames } from "../api/chat/spoiler-filter.ts";
import { characterList, selectCharacters } from "../ingest/characters/character-selection.ts";
import { parseBookNlp } from "../ingest/nlp/booknlp-files.ts";
import { analyze, render } from "../ingest/nlp/engine.ts";
import { extractWork } from "../ingest/book/book-text.ts";
import { answerHelp } from "./support.ts";

answerHelp(`usage: bun bench/spoiler-guard.ts [book.txt ...]

Measures the spoiler guard per book: shingle index build, size, memory, decode, CPU per token.
Default books: every .txt in ../shared/books.`);

const args = process.argv.slice(2);
const DEFAULT_DIR = join(import.meta.dir, "../../shared/books");
const paths = args.length > 0 ? args : (await readdir(DEFAULT_DIR)).filter((f) => f.endsWith(".txt")).sort().map((f) => join(DEFAULT_DIR, f));
const REPLY_TOKENS = 300;

const ms = (start: number) => performance.now() - start;
const mb = (bytes: number) => (bytes / 1e6).toFixed(2);

function shinglesOf(text: string): [number, number][] {
  const words = wordsOf(text).map((w) => w.key);
  return Array.from({ length: Math.max(0, words.length - SHINGLE_WORDS + 1) }, (_, i) => shingleKey(words.slice(i, i + SHINGLE_WORDS)));
}

// The work alone, as ingestion indexes it: Project Gutenberg's licence would otherwise be shared by every book.
const texts = await Promise.all(paths.map(async (p) => extractWork(await Bun.file(p).text()).text));
/** The book's people as ingestion gives them to the guard (ingest/phases/book-nlp/thread.ts), and the guard's names data. */
function guardedPeople(text: string) {
  const parsed = parseBookNlp(render(analyze(text)));
  const list = characterList(parsed);
  const characters = selectCharacters(parsed, {}, { text }, list).map((c, i) => ({ id: `c${i}`, name: c.name, aliases: c.aliases }));
  const people = [...list].sort((a, b) => b.mentionCount - a.mentionCount).slice(0, 500);
  const start = performance.now();
  const guarded = guardCharacters(text, characters, people);
  return { guarded, namesMs: ms(start) };
}

/** Of every third sentence from before `position` (less a margin), how many the guard stops, speaking to the first character. */
function earlyStops(text: string, position: number, guarded: ReturnType<typeof guardCharacters>, shingles: ReturnType<typeof decodeShingleIndex>) {
  const sentences = text
    .slice(0, Math.floor(text.length * (position - 0.02)))
    .split(/(?<=[.!?])\s+/)
    .filter((s, i) => s.length > 20 && i % 3 === 0);
  const names = lateNames(guarded, position, "c0");
  const stopped = sentences.filter((sentence) => {
    const guard = createSpoilerGuard({ position, lateNames: names, shingles });
    return (sentence.match(/\S+\s*/g) ?? []).some((token) => guard.push(token).stop) || guard.end().stop;
  }).length;
  return `${stopped} of ${sentences.length}`;
}

console.log("| book | words | shingles | build ms | stored MB | memory MB | decode ms | µs per token | other book's 8-word runs found | names ms | people | early sentences stopped (30 %, 60 %) |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const [i, text] of texts.entries()) {
  const words = wordsOf(text).length;
  let start = performance.now();
  const index = buildShingleIndex(text);
  const build = ms(start);
  const encoded = index.encode();
  start = performance.now();
  const decoded = decodeShingleIndex(encoded);
  const decode = ms(start);

  // Replies of REPLY_TOKENS tokens made of the book's first tenth (never stopped for a reader at
  // half-way), streamed as a model does, a word or so per token.
  const early = text.slice(0, Math.floor(text.length / 10));
  const tokens = early.match(/\S+\s*/g) ?? [];
  const replies = Array.from({ length: Math.floor(tokens.length / REPLY_TOKENS) }, (_, r) => tokens.slice(r * REPLY_TOKENS, (r + 1) * REPLY_TOKENS));
  const names = ["Silas Crane", "Jonah Quill", "Mr. Nobody"];
  start = performance.now();
  for (const reply of replies) {
    const guard = createSpoilerGuard({ position: 0.5, lateNames: names, shingles: decoded });
    for (const token of reply) if (guard.push(token).stop) throw new Error("an early quotation was stopped");
    guard.end();
  }
  const perToken = (ms(start) * 1000) / (replies.length * REPLY_TOKENS);

  const other = texts[(i + 1) % texts.length]!;
  const foreign = shinglesOf(other);
  const found = foreign.filter((key) => decoded.firstEnd(key) !== null).length;
  const { guarded, namesMs } = guardedPeople(text);
  console.log(
    `| ${basename(paths[i]!)} | ${words} | ${index.size} | ${build.toFixed(0)} | ${mb(encoded.length)} | ${mb(index.bytes)} | ${decode.toFixed(0)} | ${perToken.toFixed(2)} | ${found} of ${foreign.length} (${basename(paths[(i + 1) % texts.length]!)}) | ${namesMs.toFixed(0)} | ${guarded.length} | ${earlyStops(text, 0.3, guarded, decoded)}, ${earlyStops(text, 0.6, guarded, decoded)} |`,
  );
}
