import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { tokenize } from "../../ingest/nlp/tokenizer.ts";

// Bun's transpiler once rewrote regex literals that escape a non-ASCII character inside a class
// (/[\-\–\—]/ matched "u", "2", "0"…), so the same code tokenized differently under Bun and Node.
// This suite compiles the tokenizer with tsc (not Bun), runs it under Node and compares.

const ROOT = resolve(import.meta.dir, "..", "..");
const SAMPLE = [
  "\u201cWell\u2014I don\u2019t know,\u201d said Mr. Darcy\u2019s cousin\u2013in\u2013law. \u2018Tis the boys\u2019 turn.",
  "",
  "Annie P. Miller went to the U.S. on Monday... She said, \"Yes--no!\" \u2015 and left; caf\u00e9 na\u00efve \ud83d\ude00 12,000 u-turn.",
  "\u2014Are you there? \u2014 he asked.\r\n\r\nThe end\u2026",
].join("\n");

const nodeVersion = Bun.spawnSync(["node", "--version"], { stdout: "pipe", stderr: "pipe" });
const hasNode = nodeVersion.exitCode === 0;
if (!hasNode) console.log("skipped: node is not installed, so Bun/Node tokenizer parity cannot be checked");

const summary = (t: ReturnType<typeof tokenize>) =>
  Array.from({ length: t.count }, (_, i) => [t.text[i], t.start[i], t.end[i], t.paragraph[i], t.sentence[i], t.inSentence[i]]);

describe.skipIf(!hasNode)("tokenizer parity", () => {
  test("Bun and Node split the same text into the same tokens, sentences and paragraphs", () => {
    const dir = mkdtempSync(join(tmpdir(), "nlp-parity-"));
    try {
      const tsc = Bun.spawnSync(
        [join(ROOT, "node_modules", ".bin", "tsc"), "--ignoreConfig", join(ROOT, "ingest", "nlp", "tokenizer.ts"), "--outDir", dir, "--target", "es2022", "--module", "esnext", "--types", ""],
        { stdout: "pipe", stderr: "pipe" },
      );
      expect(tsc.stdout.toString() + tsc.stderr.toString()).toBe("");
      writeFileSync(join(dir, "package.json"), '{"type":"module"}');
      writeFileSync(
        join(dir, "run.js"),
        `import { tokenize } from "./tokenizer.js";
         import { readFileSync } from "node:fs";
         const t = tokenize(readFileSync(0, "utf8"));
         const rows = Array.from({ length: t.count }, (_, i) => [t.text[i], t.start[i], t.end[i], t.paragraph[i], t.sentence[i], t.inSentence[i]]);
         process.stdout.write(JSON.stringify({ tokens: rows, sentenceStarts: [...t.sentenceStarts], paragraphStarts: [...t.paragraphStarts] }));`,
      );
      const node = Bun.spawnSync(["node", join(dir, "run.js")], { stdin: Buffer.from(SAMPLE), stdout: "pipe", stderr: "pipe" });
      expect(node.stderr.toString()).toBe("");
      const fromNode = JSON.parse(node.stdout.toString()) as { tokens: unknown[]; sentenceStarts: number[]; paragraphStarts: number[] };
      const inBun = tokenize(SAMPLE);
      expect(fromNode.tokens).toEqual(summary(inBun));
      expect(fromNode.sentenceStarts).toEqual([...inBun.sentenceStarts]);
      expect(fromNode.paragraphStarts).toEqual([...inBun.paragraphStarts]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test("dashes between words are split off the way spaCy splits them", () => {
  const words = tokenize("cousin\u2013in\u2013law and well-bred and a\u2014b").text;
  expect(words).toEqual(["cousin", "\u2013", "in", "\u2013", "law", "and", "well", "-", "bred", "and", "a", "\u2014", "b"]);
});
