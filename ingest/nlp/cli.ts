// bun run nlp <file> <outdir>: BookNLP-format output for any plain-text book, read as the worker
// reads it: decoded by the evidence of the whole file (UTF-8, UTF-16 or Windows-1252) and cut to
// the work (no Project Gutenberg header, licence or contents).

import { fstatSync, readFileSync, writeSync } from "node:fs";
import { basename, extname } from "node:path";
import { analyze, writeBookNlp, type Stage } from "./engine.ts";
import { usage } from "../../common/cli-usage.ts";
import { decodeBookBytes } from "../../common/text-decoding.ts";
import { extractWork } from "../book/book-text.ts";

const STAGES: Stage[] = ["tokens", "quotes", "names", "speakers", "coreference", "files"];
const BAR_WIDTH = 24;
// Plain descriptors, not process.stdout/stderr (nor node:tty): loading the stream machinery costs a
// short book's run about 10 ms.
const STDOUT = 1;
const STDERR = 2;

function progressBar(enabled: boolean): { stage: (s: Stage) => void; done: () => void } {
  if (!enabled) return { stage: () => {}, done: () => {} };
  const draw = (k: number, label: string) => {
    const filled = Math.round((k / STAGES.length) * BAR_WIDTH);
    writeSync(STDERR, `\r[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}] ${label.padEnd(12)}`);
  };
  return {
    stage: (s) => draw(STAGES.indexOf(s), s),
    done: () => {
      draw(STAGES.length, "done");
      writeSync(STDERR, "\n");
    },
  };
}

const USAGE = usage("nlp", "<book.txt> <outdir>");

export function main(argv: string[]): number {
  if (argv.includes("--help")) {
    writeSync(STDOUT, `${USAGE}\n\nWrites the five BookNLP files (.tokens, .entities, .quotes, .supersense, .book) of a text file to <outdir>.\n`);
    return 0;
  }
  const [file, outdir] = argv;
  if (!file || !outdir) {
    writeSync(STDERR, `${USAGE}\n`);
    return 2;
  }
  const id = basename(file, extname(file));
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    writeSync(STDERR, `${code === "ENOENT" ? "no such file" : code === "EISDIR" ? "is a directory, not a book file" : `cannot read the file (${code ?? String(err)})`}: ${file}\n`);
    return 1;
  }
  const decoded = decodeBookBytes(bytes);
  if (!decoded.ok) {
    writeSync(STDERR, `${file}: ${decoded.reason}\n`);
    return 1;
  }
  if (decoded.replaced > 0) writeSync(STDERR, `warning: ${decoded.replaced} invalid byte sequences in the ${decoded.encoding.toUpperCase()} file were replaced by U+FFFD\n`);
  const work = extractWork(decoded.text);
  for (const warning of work.warnings) writeSync(STDERR, `warning: ${warning}\n`);
  const text = work.text;
  // A terminal is a character device; so is /dev/null, where drawing the bar is harmless.
  const bar = progressBar(fstatSync(STDERR).isCharacterDevice());
  const t0 = performance.now();
  const analysis = analyze(text, { onStage: bar.stage });
  bar.stage("files");
  writeBookNlp(analysis, outdir, id);
  bar.done();
  const seconds = (performance.now() - t0) / 1000;
  const characters = new Set(analysis.mentions.filter((m) => m.cat === "PER").map((m) => m.coref)).size;
  const mb = Buffer.byteLength(text) / 1e6;
  writeSync(
    STDOUT,
    `${id}: ${mb.toFixed(2)} MB, ${analysis.tok.count} tokens, ${analysis.scan.quotes.length} quotes, ` +
      `${characters} characters in ${seconds.toFixed(2)} s (${(mb / Math.max(seconds, 1e-9)).toFixed(2)} MB/s) -> ${outdir}\n`,
  );
  return 0;
}

if (import.meta.main) {
  process.exitCode = main(process.argv.slice(2));
}
