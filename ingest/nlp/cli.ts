// bun run nlp <file> <outdir>: BookNLP-format output for any plain-text book.

import { readFile } from "node:fs/promises";
import { basename, extname } from "node:path";
import { analyze, writeBookNlp, type Stage } from "./engine.ts";

const STAGES: Stage[] = ["tokens", "quotes", "names", "speakers", "coreference", "files"];
const BAR_WIDTH = 24;

function progressBar(enabled: boolean): { stage: (s: Stage) => void; done: () => void } {
  if (!enabled) return { stage: () => {}, done: () => {} };
  const draw = (k: number, label: string) => {
    const filled = Math.round((k / STAGES.length) * BAR_WIDTH);
    process.stderr.write(`\r[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}] ${label.padEnd(12)}`);
  };
  return {
    stage: (s) => draw(STAGES.indexOf(s), s),
    done: () => {
      draw(STAGES.length, "done");
      process.stderr.write("\n");
    },
  };
}

export async function main(argv: string[]): Promise<number> {
  const [file, outdir] = argv;
  if (!file || !outdir) {
    process.stderr.write("usage: bun run nlp <book.txt> <outdir>\n");
    return 2;
  }
  const id = basename(file, extname(file));
  const text = await readFile(file, "utf8");
  const bar = progressBar(process.stderr.isTTY === true);
  const t0 = performance.now();
  const analysis = analyze(text, { onStage: bar.stage });
  bar.stage("files");
  writeBookNlp(analysis, outdir, id);
  bar.done();
  const seconds = (performance.now() - t0) / 1000;
  const characters = new Set(analysis.mentions.filter((m) => m.cat === "PER").map((m) => m.coref)).size;
  const mb = Buffer.byteLength(text) / 1e6;
  process.stdout.write(
    `${id}: ${mb.toFixed(2)} MB, ${analysis.tok.count} tokens, ${analysis.scan.quotes.length} quotes, ` +
      `${characters} characters in ${seconds.toFixed(2)} s (${(mb / Math.max(seconds, 1e-9)).toFixed(2)} MB/s) -> ${outdir}\n`,
  );
  return 0;
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
