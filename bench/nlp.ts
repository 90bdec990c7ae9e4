// bun run bench/nlp.ts [outdir]
// Runs the native book-NLP engine on the PDNC dev novels in ../shared/eval, scores the output with
// the reference scorer (python3 score_pdnc.py) and prints a markdown table. Wall time and CPU time
// are both shown: on a shared machine the wall clock includes other people's work. Timings are warm
// (after one untimed pass).

import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { runBookNlp } from "../ingest/nlp/engine.ts";

const EVAL_DIR = resolve(import.meta.dir, "..", "..", "shared", "eval");
const GOLD_DIR = join(EVAL_DIR, "pdnc-dev");
const SCORER = join(EVAL_DIR, "score_pdnc.py");

interface Score {
  speaker: string;
  recall: string;
  precision: string;
}

function runScorer(outRoot: string): Map<string, Score> {
  const scores = new Map<string, Score>();
  const proc = Bun.spawnSync(["python3", SCORER, GOLD_DIR, outRoot], { stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) {
    process.stderr.write(`scorer failed: ${proc.stderr.toString()}\n`);
    return scores;
  }
  for (const line of proc.stdout.toString().split("\n")) {
    const m = /^(\S+).*speaker_acc=([\d.]+) char_recall=([\d.]+) char_precision=([\d.]+)/.exec(line);
    if (m) scores.set(m[1] === "TOTAL" ? "TOTAL" : m[1]!, { speaker: m[2]!, recall: m[3]!, precision: m[4]! });
  }
  return scores;
}

function main(): void {
  if (!existsSync(GOLD_DIR)) {
    console.log(`No evaluation data at ${GOLD_DIR} (../shared/eval is absent in this clone); nothing to measure.`);
    return;
  }
  const outRoot = process.argv[2] ?? join(tmpdir(), `nlp-bench-${process.pid}`);
  const novels = readdirSync(GOLD_DIR).filter((n) => existsSync(join(GOLD_DIR, n, "novel_text.txt"))).sort();
  // Throughput is measured warm: one untimed pass over the first novel compiles the hot code, which a
  // cold `bun run nlp` pays once per process (about half a second).
  runBookNlp(readFileSync(join(GOLD_DIR, novels[0]!, "novel_text.txt"), "utf8"));
  const rows: { novel: string; mb: number; wall: number; cpu: number }[] = [];
  for (const novel of novels) {
    const text = readFileSync(join(GOLD_DIR, novel, "novel_text.txt"), "utf8");
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const { files } = runBookNlp(text);
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const dir = join(outRoot, novel);
    mkdirSync(dir, { recursive: true });
    for (const [ext, body] of Object.entries(files)) writeFileSync(join(dir, `${novel}.${ext}`), body);
    rows.push({ novel, mb: Buffer.byteLength(text) / 1e6, wall, cpu: (cpu.user + cpu.system) / 1e6 });
  }
  const scores = runScorer(outRoot);
  const dash = { speaker: "-", recall: "-", precision: "-" };
  console.log(`Output in ${outRoot}\n`);
  console.log("| novel | size (MB) | wall s | MB/s (wall) | MB/s (CPU) | speaker acc | char recall | char precision |");
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const s = scores.get(r.novel) ?? dash;
    console.log(
      `| ${r.novel} | ${r.mb.toFixed(2)} | ${r.wall.toFixed(2)} | ${(r.mb / r.wall).toFixed(2)} | ${(r.mb / r.cpu).toFixed(2)} | ${s.speaker} | ${s.recall} | ${s.precision} |`,
    );
  }
  const mb = rows.reduce((a, r) => a + r.mb, 0);
  const wall = rows.reduce((a, r) => a + r.wall, 0);
  const cpu = rows.reduce((a, r) => a + r.cpu, 0);
  const t = scores.get("TOTAL") ?? dash;
  console.log(`| **total** | ${mb.toFixed(2)} | ${wall.toFixed(2)} | ${(mb / wall).toFixed(2)} | ${(mb / cpu).toFixed(2)} | ${t.speaker} | ${t.recall} | ${t.precision} |`);
  console.log("\nReal BookNLP 1.0.7 (big) on the same novels: speaker acc 0.577, char recall 0.946, char precision 0.821.");
}

main();
