/**
 * Section 2. The native book-NLP engine on each book, run as a reader runs it (`bun run nlp <book>
 * <outdir>`, a fresh process each time): the engine's own time (analysis and the five BookNLP files
 * written), the process's wall and CPU time, and its peak RSS. BookNLP itself is not run here; its
 * published CPU time is scaled to each book's token count as the reference. bench/nlp.ts has the
 * engine's accuracy on annotated novels and its warm, in-process speed.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { measuredSpawn } from "./measured-spawn.ts";
import { runsInBench, booksNote, formatSummary, markdownTable, mb, reps, summarise, type BenchContext, type BenchSection } from "./support.ts";

const CLI = resolve(import.meta.dir, "..", "ingest", "nlp", "cli.ts");

/** BookNLP's README: 3.6 minutes of CPU for a 99K-token novel with its small model. */
const BOOKNLP_SMALL_CPU_SECONDS = 3.6 * 60;
const BOOKNLP_REFERENCE_TOKENS = 99_000;

interface Run {
  engineSeconds: number;
  wallSeconds: number;
  cpuSeconds: number;
  rssMb: number;
  tokens: number;
  characters: number;
}

/** One `bun run nlp` process; its report line gives the engine's time, tokens and characters. */
async function runCli(book: string, outdir: string): Promise<Run> {
  const run = await measuredSpawn([process.execPath, CLI, book, outdir]);
  const report = /([\d.]+) MB, (\d+) tokens, \d+ quotes, (\d+) characters in ([\d.]+) s/.exec(run.stdout);
  if (run.exitCode !== 0 || !report) throw new Error(`bun run nlp failed on ${book} (exit ${run.exitCode}): ${run.stderr || run.stdout}`);
  return { ...run, engineSeconds: Number(report[4]), tokens: Number(report[2]), characters: Number(report[3]) };
}

export async function bookNlpSection(ctx: BenchContext): Promise<BenchSection> {
  const runs = reps(ctx, 3, 1);
  const outdir = await mkdtemp(join(tmpdir(), "bench-nlp-"));
  const rows: string[][] = [];
  try {
    for (const book of ctx.books) {
      ctx.progress(`book NLP: ${book.title}`);
      const results: Run[] = [];
      for (let r = 0; r < runs; r++) results.push(await runCli(book.path, outdir));
      const size = mb(book.bytes);
      const engine = summarise(results.map((r) => r.engineSeconds));
      const cpu = summarise(results.map((r) => r.cpuSeconds));
      const { tokens, characters } = results[0]!;
      const booknlp = (tokens / BOOKNLP_REFERENCE_TOKENS) * BOOKNLP_SMALL_CPU_SECONDS;
      rows.push([
        `${book.title} (${size.toFixed(2)} MB)`,
        tokens.toLocaleString("en"),
        String(characters),
        formatSummary(engine, 2),
        (size / engine.median).toFixed(2),
        formatSummary(summarise(results.map((r) => r.wallSeconds)), 2),
        formatSummary(cpu, 2),
        formatSummary(summarise(results.map((r) => r.rssMb))),
        `*${booknlp.toFixed(0)}*`,
        `*${(booknlp / cpu.median).toFixed(0)}×*`,
      ]);
    }
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
  return {
    title: "Book NLP",
    body: [
      `${booksNote(ctx.books)} \`bun run nlp <book> <outdir>\` in a fresh process, median (min–max) of ${runs} runs. ` +
        "Engine s: analysis plus the five BookNLP files written, as the CLI reports it; process wall and CPU include start-up.",
      "",
      markdownTable(
        [
          "Book",
          "tokens",
          "characters",
          "engine s",
          "engine MB/s",
          "process wall s",
          "process CPU s",
          "peak RSS MB",
          "*BookNLP small, CPU s (not measured)*",
          "*BookNLP ÷ ours, CPU*",
        ],
        rows,
      ),
      "",
      `*Italic columns are not measured here*: BookNLP's published figure (README: ${BOOKNLP_SMALL_CPU_SECONDS / 60} CPU-minutes for a ` +
        `${BOOKNLP_REFERENCE_TOKENS / 1000}K-token novel, small model) scaled linearly to each book's token count as this engine counts them; ` +
        "BookNLP's own tokenisation differs slightly, and its big model (the ingest image's) is several times slower still.",
    ].join("\n"),
  };
}

if (import.meta.main) runsInBench("nlp");
