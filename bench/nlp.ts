/**
 * The native book-NLP engine on the PDNC dev novels in ../shared/eval, scored with the reference
 * scorer (python3 score_pdnc.py), plus War and Peace from ../shared/books for speed and memory on a
 * long book. Prints markdown tables.
 *
 *   bun bench/nlp.ts [--reps 5] [--out <dir>]
 *
 * "warm" is the median of --reps in-process runs after one untimed pass over every novel (analysis
 * and all five files written to disk); "cold" is the median wall time of a fresh `bun ingest/nlp/cli.ts`
 * process, start-up, JIT warm-up and file writes included, as a reader running `bun run nlp` sees it.
 * CPU seconds are shown next to wall seconds: on a shared machine the wall clock includes other
 * people's work, CPU time much less so.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { analyze, writeBookNlp } from "../ingest/nlp/engine.ts";
import { machineHeader, markdownTable, SHARED_BOOKS_DIR, summarise } from "./support.ts";

const EVAL_DIR = resolve(import.meta.dir, "..", "..", "shared", "eval");
const GOLD_DIR = join(EVAL_DIR, "pdnc-dev");
/** Real BookNLP 1.0.7 ('big' model) output for the same novels, scored with the same scorer. */
const BOOKNLP_DIR = join(EVAL_DIR, "booknlp-pdnc-dev");
const SCORER = join(EVAL_DIR, "score_pdnc.py");
const LONG_BOOK = join(SHARED_BOOKS_DIR, "pg2600_war_and_peace.txt");
const CLI = resolve(import.meta.dir, "..", "ingest", "nlp", "cli.ts");
const DEFAULT_REPS = 5;
const COLD_REPS = 5;

function option(name: string): string | undefined {
  const k = process.argv.indexOf(name);
  return k > 0 ? process.argv[k + 1] : undefined;
}

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

function main(): void {
  if (!existsSync(GOLD_DIR)) {
    console.log(`No evaluation data at ${GOLD_DIR} (../shared/eval is absent in this clone); nothing to measure.`);
    return;
  }
  const reps = Number(option("--reps") ?? DEFAULT_REPS);
  const outRoot = option("--out") ?? join(tmpdir(), `nlp-bench-${process.pid}`);
  const novels = readdirSync(GOLD_DIR).filter((n) => existsSync(join(GOLD_DIR, n, "novel_text.txt"))).sort();
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
  const scores = runScorer(outRoot);
  const booknlp = runScorer(BOOKNLP_DIR);
  const dash = { speaker: "–", recall: "–", precision: "–" };
  const f2 = (x: number) => x.toFixed(2);
  // "0.909 (0.671)": this engine, then real BookNLP in brackets when its output is at hand.
  const versus = (s: Score, b: Score | undefined): string[] =>
    b ? [`${s.speaker} (${b.speaker})`, `${s.recall} (${b.recall})`, `${s.precision} (${b.precision})`] : [s.speaker, s.recall, s.precision];
  const table = rows.map((r) => [
    r.novel,
    f2(r.mb),
    f2(r.warm.wall),
    f2(r.warm.cpu),
    f2(r.mb / r.warm.wall),
    f2(r.cold.wall),
    f2(r.mb / r.cold.wall),
    ...versus(scores.get(r.novel) ?? dash, booknlp.get(r.novel)),
  ]);
  const sum = (f: (r: (typeof rows)[number]) => number) => rows.reduce((a, r) => a + f(r), 0);
  const mb = sum((r) => r.mb);
  const t = scores.get("TOTAL") ?? dash;
  table.push([
    "**all six**",
    f2(mb),
    f2(sum((r) => r.warm.wall)),
    f2(sum((r) => r.warm.cpu)),
    f2(mb / sum((r) => r.warm.wall)),
    f2(sum((r) => r.cold.wall)),
    f2(mb / sum((r) => r.cold.wall)),
    ...versus(t, booknlp.get("TOTAL")),
  ]);

  console.log(machineHeader());
  console.log(`\nPDNC dev novels (warm: median of ${reps} runs; cold: median of ${COLD_REPS} fresh processes). Output in ${outRoot}`);
  if (booknlp.size > 0) console.log("Scores in brackets: real BookNLP 1.0.7 (big model) output from ../shared/eval/booknlp-pdnc-dev, same scorer; BookNLP was not timed here.");
  console.log("");
  console.log(
    markdownTable(
      ["novel", "size MB", "warm s", "warm CPU s", "warm MB/s", "cold s", "cold MB/s", "speaker acc", "char recall", "char precision"],
      table,
    ),
  );

  if (existsSync(LONG_BOOK)) {
    const text = readFileSync(LONG_BOOK, "utf8");
    const size = Buffer.byteLength(text) / 1e6;
    const w = warm(text, Math.min(reps, 3), join(outRoot, "war-and-peace"), "war-and-peace");
    const c = cold(LONG_BOOK, join(outRoot, "cold", "war-and-peace"));
    console.log("\nWar and Peace (no gold annotations, so no scores)\n");
    console.log(
      markdownTable(
        ["book", "size MB", "warm s", "warm CPU s", "warm MB/s", "cold s", "cold CPU s", "cold MB/s", "cold peak RSS MB"],
        [["War and Peace", f2(size), f2(w.wall), f2(w.cpu), f2(size / w.wall), f2(c.wall), f2(c.cpu), f2(size / c.wall), c.rssMb.toFixed(0)]],
      ),
    );
  }
  console.log(
    "\nBookNLP's published reference, NOT measured here: 3.6 CPU-minutes for a 99K-token novel with its small model " +
      "(BookNLP README); for comparison, Persuasion has 98.5K tokens in this engine.",
  );
}

main();
