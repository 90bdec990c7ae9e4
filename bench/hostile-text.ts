/**
 * Section: hostile text. A file of 10 MB of whitespace, or a single 10 MB "word", through every text
 * step a book goes through: decoding, Project Gutenberg stripping, the prose, script and language checks, the
 * native NLP engine in its thread (tokens, quotes, names, story boundaries, the characters), chunking,
 * the BM25 terms of the embedded text index, the spoiler guard's data and the discovery samples of a
 * book in another language. Each step's CPU time at 1 MB and at 10 MB: linear work gives a ratio of
 * about 10. Before this section existed, 40,000 spaces took 9.5 s in the chunker and 100,000 took
 * 22.5 s in the stripping: a 1 MB run about 1.5 h.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chunkText } from "../common/chunking.ts";
import { chunkEndLocator } from "../common/chunk-ends.ts";
import { buildShingleIndex } from "../ingest/spoiler-guard/shingles.ts";
import { guardCharacters } from "../ingest/spoiler-guard/people.ts";
import { tokenize } from "../common/text-index/tokenize.ts";
import { decodeBookBytes } from "../common/text-decoding.ts";
import { extractWork, hasProse } from "../ingest/book/book-text.ts";
import { sampleText } from "../ingest/characters/discovery.ts";
import { runInThread } from "../ingest/phases/book-nlp/step.ts";
import { languageEvidence, notLanguage } from "../ingest/book/text-language.ts";
import { detectScript } from "../ingest/book/text-script.ts";
import { hostileBook, hostileGutenbergFile, type HostileKind } from "../tests/support/hostile-text.ts";
import { markdownTable, runsInBench, type BenchContext, type BenchSection } from "./support.ts";

const KINDS: readonly { kind: HostileKind; label: string }[] = [
  { kind: "spaces", label: "spaces" },
  { kind: "whitespace mix", label: "spaces, tabs and no-break spaces" },
  { kind: "letters", label: "one word of random letters" },
  { kind: "one letter", label: "one word of one letter" },
];

const STEPS = ["decoding", "Gutenberg stripping", "prose, script and language checks", "NLP engine (its thread)", "chunking", "BM25 terms", "spoiler-guard data", "discovery samples"] as const;
type Step = (typeof STEPS)[number];

/** CPU seconds of the whole process (every thread) while `fn` runs. */
async function cpuSeconds<T>(fn: () => Promise<T> | T): Promise<{ seconds: number; result: T }> {
  const before = process.cpuUsage();
  const result = await fn();
  const used = process.cpuUsage(before);
  return { seconds: (used.user + used.system) / 1e6, result };
}

/** Every step on one hostile file of `n` characters of the run; CPU seconds per step. */
async function runSteps(kind: HostileKind, n: number, dir: string): Promise<Record<Step, number>> {
  const seconds = {} as Record<Step, number>;
  const file = hostileGutenbergFile(kind, n);
  const bytes = new TextEncoder().encode(file);
  const decoded = await cpuSeconds(() => decodeBookBytes(bytes));
  seconds.decoding = decoded.seconds;
  if (!decoded.result.ok) throw new Error(decoded.result.reason);
  const work = await cpuSeconds(() => extractWork(decoded.result.ok ? decoded.result.text : ""));
  seconds["Gutenberg stripping"] = work.seconds;
  const text = work.result.text;
  if (text !== hostileBook(kind, n).trim()) throw new Error(`stripping changed the ${kind} book`);
  seconds["prose, script and language checks"] = (await cpuSeconds(() => [hasProse(text), detectScript(text), notLanguage(languageEvidence(text))])).seconds;
  const textPath = join(dir, `${kind}-${n}.txt`);
  await writeFile(textPath, text);
  const nlp = await cpuSeconds(() => runInThread({ kind: "native", textPath, selection: {} }));
  seconds["NLP engine (its thread)"] = nlp.seconds;
  const chunks = await cpuSeconds(() => {
    const locate = chunkEndLocator(text);
    const texts: string[] = [];
    for (const chunk of chunkText(text)) {
      locate(chunk.text);
      texts.push(chunk.text);
    }
    return texts;
  });
  seconds.chunking = chunks.seconds;
  seconds["BM25 terms"] = (await cpuSeconds(() => chunks.result.reduce((n, chunk) => n + tokenize(chunk).length, 0))).seconds;
  const found = nlp.result.characters;
  const cast = found.length > 0 ? found : [{ name: "Margaret Hale", aliases: ["Margaret"] }];
  seconds["spoiler-guard data"] = (
    await cpuSeconds(() => {
      buildShingleIndex(text).encode();
      return guardCharacters(text, cast.map((c, i) => ({ id: String(i), name: c.name, aliases: c.aliases })), nlp.result.people);
    })
  ).seconds;
  seconds["discovery samples"] = (await cpuSeconds(() => sampleText(text, 12))).seconds;
  return seconds;
}

export async function hostileTextSection(ctx: BenchContext): Promise<BenchSection> {
  const [small, large] = ctx.quick ? [100_000, 1_000_000] : [1_000_000, 10_000_000];
  const dir = await mkdtemp(join(tmpdir(), "bench-hostile-"));
  const rows: string[][] = [];
  try {
    // Warms the JIT and the tokeniser, so the first measured run is not charged for them.
    for (const { kind } of KINDS) await runSteps(kind, 10_000, dir);
    for (const { kind, label } of KINDS) {
      ctx.progress(`hostile text: ${label}`);
      const a = await runSteps(kind, small, dir);
      const b = await runSteps(kind, large, dir);
      for (const step of STEPS) {
        rows.push([label, step, a[step].toFixed(3), b[step].toFixed(3), a[step] >= 0.005 ? (b[step] / a[step]).toFixed(1) : "–"]);
      }
      const total = (s: Record<Step, number>) => STEPS.reduce((sum, step) => sum + s[step], 0);
      rows.push([label, "**all steps**", total(a).toFixed(2), total(b).toFixed(2), (total(b) / total(a)).toFixed(1)]);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const mb = (n: number) => `${n / 1e6} MB`;
  return {
    title: "Hostile text: long runs of whitespace and one huge word",
    body: [
      `A short story with a run of ${mb(small)} and of ${mb(large)} in the middle of one sentence, wrapped as a Project Gutenberg file, through every text step in order. ` +
        "CPU seconds of the whole process (the NLP engine's thread included), one run each after a warm-up on 10,000 characters. " +
        `Linear work gives a ratio of about ${large / small}; a ratio under it is the steps' fixed costs. The NLP engine reads at most NLP_MAX_BYTES (4 MB) of a book, in windows.`,
      "",
      markdownTable(["Run", "Step", `${mb(small)} (CPU s)`, `${mb(large)} (CPU s)`, "ratio"], rows),
    ].join("\n"),
  };
}

if (import.meta.main) runsInBench("hostile-text");
