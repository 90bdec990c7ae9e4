/**
 * The native book-NLP engine on the twelve PDNC dev novels in ../shared/eval, scored with the
 * reference scorer (python3 score_pdnc.py) next to real BookNLP where its output is at hand, with
 * the error classes of bench/nlp-eval.ts; then its speed on the dev novels and on every book of
 * ../shared/books. Prints markdown tables.
 *
 *   bun bench/nlp.ts [--reps 5] [--out <dir>] [--accuracy-only]
 *
 * "warm" is the median of --reps in-process runs after one untimed pass over every novel (analysis
 * and all five files written to disk); "cold" is the median wall time of a fresh `bun ingest/nlp/cli.ts`
 * process, start-up, JIT warm-up and file writes included, as a reader running `bun run nlp` sees it.
 * For the books, "engine" is the time the CLI reports for analysis and files (start-up left out) and
 * "process" the whole run. CPU seconds are shown next to wall seconds: on a shared machine the wall
 * clock includes other people's work, CPU time much less so.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { analyze, writeBookNlp } from "../ingest/nlp/engine.ts";
import { measuredSpawn } from "./measured-spawn.ts";
import { ERROR_CLASSES, EVAL_DIR, evaluateAll, GOLD_DIR, ratio, type NovelEval } from "./nlp-eval.ts";
import { answerHelp, machineHeader, markdownTable, option, SHARED_BOOKS_DIR, summarise } from "./support.ts";

/** Real BookNLP 1.0.7 ('big' model) output for the same novels, scored with the same scorer. */
const BOOKNLP_DIR = join(EVAL_DIR, "booknlp-pdnc-dev");
const SCORER = join(EVAL_DIR, "score_pdnc.py");
const CLI = resolve(import.meta.dir, "..", "ingest", "nlp", "cli.ts");
const DEFAULT_REPS = 5;
const COLD_REPS = 5;

interface Score {
  speaker: string;
  recall: string;
  precision: string;
}

function runScorer(outRoot: string): Map<string, Score> {
  const scores = new Map<string, Score>();
  if (!existsSync(outRoot)) return scores;
  const proc = Bun.spawnSync(["python3", SCORER, GOLD_DIR, outRoot], { stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) {
    process.stderr.write(`scorer failed: ${proc.stderr.toString()}\n`);
    return scores;
  }
  for (const line of proc.stdout.toString().split("\n")) {
    const m = /^(\S+).*speaker_acc=([\d.]+) char_recall=([\d.]+) char_precision=([\d.]+)/.exec(line);
    if (m) scores.set(m[1]!, { speaker: m[2]!, recall: m[3]!, precision: m[4]! });
  }
  return scores;
}

interface Timing {
  wall: number;
  cpu: number;
}

/** Median wall and CPU seconds of in-process runs, each analysing the text and writing the files to dir. */
function warm(text: string, reps: number, dir: string, id: string): Timing {
  const walls: number[] = [];
  const cpus: number[] = [];
  for (let r = 0; r < reps; r++) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    writeBookNlp(analyze(text), dir, id);
    walls.push((performance.now() - t0) / 1000);
    const cpu = process.cpuUsage(cpu0);
    cpus.push((cpu.user + cpu.system) / 1e6);
  }
  return { wall: summarise(walls).median, cpu: summarise(cpus).median };
}

/** Median wall and CPU seconds, and the largest peak RSS, of fresh CLI processes. */
function cold(file: string, dir: string): Timing & { rssMb: number } {
  const walls: number[] = [];
  const cpus: number[] = [];
  let rss = 0;
  for (let r = 0; r < COLD_REPS; r++) {
    const t0 = performance.now();
    const proc = Bun.spawnSync([process.execPath, CLI, file, dir], { stdout: "pipe", stderr: "pipe" });
    walls.push((performance.now() - t0) / 1000);
    if (proc.exitCode !== 0) throw new Error(`cli failed on ${file}: ${proc.stderr.toString()}`);
    const usage = proc.resourceUsage;
    cpus.push(Number(usage.cpuTime.user + usage.cpuTime.system) / 1e6);
    rss = Math.max(rss, usage.maxRSS / 2 ** 20);
  }
  return { wall: summarise(walls).median, cpu: summarise(cpus).median, rssMb: rss };
}

/** "0.909 (0.671)": this engine, then real BookNLP in brackets when its output is at hand. */
function versus(s: Score, b: Score | undefined): string[] {
  return b ? [`${s.speaker} (${b.speaker})`, `${s.recall} (${b.recall})`, `${s.precision} (${b.precision})`] : [s.speaker, s.recall, s.precision];
}

function accuracy(outRoot: string, novels: string[]): void {
  for (const novel of novels) writeBookNlp(analyze(readFileSync(join(GOLD_DIR, novel, "novel_text.txt"), "utf8")), join(outRoot, novel), novel);
  const scores = runScorer(outRoot);
  const booknlp = runScorer(BOOKNLP_DIR);
  const dash = { speaker: "–", recall: "–", precision: "–" };
  const rows = [...novels, "TOTAL"].map((n) => [
    n === "TOTAL" ? `**all ${novels.length}**` : n,
    ...versus(scores.get(n) ?? dash, n === "TOTAL" ? undefined : booknlp.get(n)),
  ]);
  console.log(`\nScores on the PDNC dev novels (${SCORER}); in brackets real BookNLP 1.0.7 (big model) from ${BOOKNLP_DIR}, same scorer.\n`);
  console.log(markdownTable(["novel", "speaker acc", "char recall", "char precision"], rows));
  const b = booknlp.get("TOTAL");
  if (b) console.log(`\nBookNLP over the ${[...booknlp.keys()].length - 1} novels it has output for: speaker ${b.speaker}, recall ${b.recall}, precision ${b.precision}.`);

  const classes = (e: NovelEval) => ERROR_CLASSES.map((c) => String(e.errors[c]));
  const mine = evaluateAll(outRoot, novels);
  const theirs = evaluateAll(BOOKNLP_DIR, novels);
  console.log("\nError classes (bench/nlp-eval.ts): every gold quote that is not right is one of these.\n");
  console.log(
    markdownTable(
      ["novel", "quotes", "right", ...ERROR_CLASSES, "characters missed", "top clusters that are nobody"],
      [...mine.novels, mine.total].map((e) => [
        e.novel,
        String(e.quotes),
        ratio(e.correct, e.quotes),
        ...classes(e),
        e.missed.join(", ") || "–",
        e.spurious.join(", ") || "–",
      ]),
    ),
  );
  if (theirs.novels.length > 0) {
    console.log(`\nThe same for BookNLP (${theirs.novels.length} novels):\n`);
    console.log(markdownTable(["novel", "quotes", "right", ...ERROR_CLASSES], [...theirs.novels, theirs.total].map((e) => [e.novel, String(e.quotes), ratio(e.correct, e.quotes), ...classes(e)])));
  }
}

/** Every book of ../shared/books through fresh CLI processes: the engine's own time and the whole process's. */
async function books(outRoot: string, reps: number): Promise<void> {
  if (!existsSync(SHARED_BOOKS_DIR)) return;
  const rows: string[][] = [];
  for (const file of readdirSync(SHARED_BOOKS_DIR).filter((f) => f.endsWith(".txt")).sort()) {
    const path = join(SHARED_BOOKS_DIR, file);
    const mb = statSync(path).size / 1e6;
    const engine: number[] = [];
    const wall: number[] = [];
    const cpu: number[] = [];
    let rss = 0;
    for (let r = 0; r < reps; r++) {
      const run = await measuredSpawn([process.execPath, CLI, path, join(outRoot, "books")]);
      const seconds = / in ([\d.]+) s /.exec(run.stdout);
      if (run.exitCode !== 0 || !seconds) throw new Error(`cli failed on ${file}: ${run.stderr || run.stdout}`);
      engine.push(Number(seconds[1]));
      wall.push(run.wallSeconds);
      cpu.push(run.cpuSeconds);
      rss = Math.max(rss, run.rssMb);
    }
    const e = summarise(engine).median;
    const w = summarise(wall).median;
    rows.push([file, mb.toFixed(2), e.toFixed(2), (mb / e).toFixed(2), w.toFixed(2), summarise(cpu).median.toFixed(2), rss.toFixed(0)]);
  }
  console.log(`\nEvery book of ${SHARED_BOOKS_DIR} (median of ${reps} fresh \`bun run nlp\` processes)\n`);
  console.log(markdownTable(["book", "size MB", "engine s", "engine MB/s", "process wall s", "process CPU s", "peak RSS MB"], rows));
}

async function main(): Promise<void> {
  answerHelp("usage: bun bench/nlp.ts [--reps 5] [--out <dir>] [--accuracy-only]\n\nThe native book-NLP engine on the PDNC dev novels of ../shared/eval (accuracy with the reference scorer), then its speed; prints markdown tables.");
  if (!existsSync(GOLD_DIR)) {
    console.log(`No evaluation data at ${GOLD_DIR} (../shared/eval is absent in this clone); nothing to measure.`);
    return;
  }
  const reps = Number(option("--reps") ?? DEFAULT_REPS);
  const outRoot = option("--out") ?? join(tmpdir(), `nlp-bench-${process.pid}`);
  const novels = readdirSync(GOLD_DIR).filter((n) => existsSync(join(GOLD_DIR, n, "novel_text.txt"))).sort();
  console.log(machineHeader());
  accuracy(join(outRoot, "scored"), novels);
  if (process.argv.includes("--accuracy-only")) return;

  // One untimed pass over every novel compiles the hot code, which each fresh process pays for again
  // (the cold column).
  for (const novel of novels) writeBookNlp(analyze(readFileSync(join(GOLD_DIR, novel, "novel_text.txt"), "utf8")), join(outRoot, "warm-up"), novel);
  const rows: { novel: string; mb: number; warm: Timing; cold: Timing }[] = [];
  for (const novel of novels) {
    const file = join(GOLD_DIR, novel, "novel_text.txt");
    const text = readFileSync(file, "utf8");
    rows.push({
      novel,
      mb: Buffer.byteLength(text) / 1e6,
      warm: warm(text, reps, join(outRoot, novel), novel),
      cold: cold(file, join(outRoot, "cold", novel)),
    });
  }
  const f2 = (x: number) => x.toFixed(2);
  const table = rows.map((r) => [r.novel, f2(r.mb), f2(r.warm.wall), f2(r.warm.cpu), f2(r.mb / r.warm.wall), f2(r.cold.wall), f2(r.mb / r.cold.wall)]);
  const sum = (f: (r: (typeof rows)[number]) => number) => rows.reduce((a, r) => a + f(r), 0);
  const mb = sum((r) => r.mb);
  table.push([`**all ${rows.length}**`, f2(mb), f2(sum((r) => r.warm.wall)), f2(sum((r) => r.warm.cpu)), f2(mb / sum((r) => r.warm.wall)), f2(sum((r) => r.cold.wall)), f2(mb / sum((r) => r.cold.wall))]);
  console.log(`\nSpeed on the PDNC dev novels (warm: median of ${reps} runs; cold: median of ${COLD_REPS} fresh processes). Output in ${outRoot}\n`);
  console.log(markdownTable(["novel", "size MB", "warm s", "warm CPU s", "warm MB/s", "cold s", "cold MB/s"], table));
  await books(outRoot, COLD_REPS);
  console.log(
    "\nBookNLP's published reference, NOT measured here: 3.6 CPU-minutes for a 99K-token novel with its small model " +
      "(BookNLP README); for comparison, Persuasion has 98.5K tokens in this engine.",
  );
}

await main();
