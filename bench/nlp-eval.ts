/**
 * Error classes of BookNLP-format output against the PDNC gold annotations, tied to characters by
 * the same rule as ../shared/eval/score_pdnc.py (whose figures stay the reference): a predicted
 * cluster maps to the PDNC character whose aliases match most of its proper-name mentions.
 *
 * Every gold quote falls in one class: right, or wrong because the quote was not found, it has no
 * speaker, its speaker is a cluster no PDNC character maps to, or it went to another character (the
 * last two split by whether the quote carries its own dialogue tag or its speaker was inferred).
 * Characters: the major and intermediate PDNC characters no cluster maps to (missed), and the
 * clusters among the K most mentioned that map to nobody (spurious).
 *
 *   bun bench/nlp-eval.ts <pred dir> [novel …]     per-novel classes and the names behind them
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { answerHelp } from "./support.ts";

export const EVAL_DIR = resolve(import.meta.dir, "..", "..", "shared", "eval");
export const GOLD_DIR = join(EVAL_DIR, "pdnc-dev");

export const ERROR_CLASSES = ["unfound", "no speaker", "unmapped", "wrong (tagged)", "wrong (inferred)"] as const;
export type ErrorClass = (typeof ERROR_CLASSES)[number];

export interface NovelEval {
  novel: string;
  quotes: number;
  correct: number;
  errors: Record<ErrorClass, number>;
  important: number;
  importantFound: number;
  top: number;
  topMapped: number;
  /** Main names of the major and intermediate characters no cluster maps to. */
  missed: string[];
  /** Most frequent proper mention of each unmapped top-K cluster. */
  spurious: string[];
  /** "gold → predicted" main names, most frequent confusions first. */
  confusions: [string, number][];
}

/** The scorer's name folding: lower case, punctuation to spaces, whitespace collapsed. */
export function fold(s: string): string {
  return s
    .toLowerCase()
    .replaceAll("\u2019", "'")
    .replace(/[^\p{L}\p{N}_' ]+/gu, " ")
    .replace(/\s+/g, " ")
    .trim();
}

/** Minimal RFC 4180 reader: quoted fields may hold commas, quotes and newlines. */
function parseCsv(text: string): Record<string, string>[] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") {
      row.push(field);
      field = "";
    } else if (ch === "\n" || ch === "\r") {
      if (ch === "\r" && text[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
    } else field += ch;
  }
  if (field !== "" || row.length > 0) rows.push([...row, field]);
  const [header, ...body] = rows;
  return body.filter((r) => r.length === header!.length).map((r) => Object.fromEntries(header!.map((h, k) => [h, r[k]!])));
}

/** Python set or list literal of strings, as PDNC writes aliases: {'Roo', 'Baby Roo'}. */
function pyStrings(raw: string): string[] {
  return [...raw.matchAll(/'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"/g)].map((m) => (m[1] ?? m[2]!).replace(/\\(.)/g, "$1"));
}

interface Gold {
  names: Map<number, { main: string; category: string }>;
  alias: Map<string, number>;
  quotes: { start: number; end: number; speaker: number | undefined }[];
}

function loadGold(dir: string): Gold {
  const names = new Map<number, { main: string; category: string }>();
  const alias = new Map<string, number>();
  for (const r of parseCsv(readFileSync(join(dir, "character_info.csv"), "utf8"))) {
    const id = Number(r["Character ID"]);
    names.set(id, { main: r["Main Name"]!, category: r["Category"]!.trim() });
    for (const a of [...pyStrings(r["Aliases"]!), r["Main Name"]!]) if (!alias.has(fold(a))) alias.set(fold(a), id);
  }
  const quotes: Gold["quotes"] = [];
  for (const r of parseCsv(readFileSync(join(dir, "quotation_info.csv"), "utf8"))) {
    const speaker = alias.get(fold(r["speaker"]!));
    for (const [, s, e] of r["quoteByteSpans"]!.matchAll(/\[(\d+),\s*(\d+)\]/g)) quotes.push({ start: Number(s), end: Number(e), speaker });
  }
  return { names, alias, quotes };
}

function fileWith(dir: string, ext: string): string | undefined {
  const f = readdirSync(dir)
    .filter((n) => n.endsWith(ext))
    .sort()[0];
  return f === undefined ? undefined : join(dir, f);
}

interface PredQuote {
  start: number;
  end: number;
  char: string | undefined;
  tagged: boolean;
}

/** Offsets are found like the scorer finds them: the quote's text with whitespace removed, searched in order. */
function loadPred(dir: string, text: string): { prop: Map<string, Map<string, number>>; size: Map<string, number>; quotes: PredQuote[] } {
  const prop = new Map<string, Map<string, number>>();
  const size = new Map<string, number>();
  const entities = readFileSync(fileWith(dir, ".entities")!, "utf8").split("\n").slice(1);
  for (const line of entities) {
    const c = line.split("\t");
    if (c.length < 6 || c[4] !== "PER") continue;
    size.set(c[0]!, (size.get(c[0]!) ?? 0) + 1);
    if (c[3] !== "PROP") continue;
    const m = prop.get(c[0]!) ?? new Map<string, number>();
    const n = fold(c[5]!);
    m.set(n, (m.get(n) ?? 0) + 1);
    prop.set(c[0]!, m);
  }
  const idx: number[] = [];
  let stripped = "";
  // The scorer counts Python code points; Array.from walks code points too.
  Array.from(text).forEach((ch, k) => {
    if (!/\s/u.test(ch)) {
      idx.push(k);
      stripped += ch;
    }
  });
  // stripped is a JS string (UTF-16); map its code units back to code point positions.
  const unitToPoint: number[] = [];
  for (let p = 0, u = 0; p < idx.length; p++) {
    const cp = stripped.codePointAt(u)!;
    unitToPoint[u] = p;
    u += cp > 0xffff ? 2 : 1;
  }
  const quotes: PredQuote[] = [];
  let pos = 0;
  for (const line of readFileSync(fileWith(dir, ".quotes")!, "utf8").split("\n").slice(1)) {
    const c = line.split("\t");
    if (c.length < 7) continue;
    const q = c[6]!.replace(/\s+/g, "");
    if (!q) continue;
    let j = stripped.indexOf(q, pos);
    if (j < 0) {
      j = stripped.indexOf(q);
      if (j < 0) continue;
    } else pos = j + q.length;
    const first = unitToPoint[j]!;
    const last = unitToPoint[j + q.length - 1] ?? unitToPoint[j + q.length - 2]!;
    const char = c[5] === "None" || c[5] === "" || c[5] === "-1" ? undefined : c[5];
    quotes.push({ start: idx[first]!, end: idx[last]! + 1, char, tagged: c[2] !== "-1" });
  }
  return { prop, size, quotes };
}

export function evaluateNovel(novel: string, predDir: string, goldRoot = GOLD_DIR): NovelEval {
  const goldDir = join(goldRoot, novel);
  const text = readFileSync(join(goldDir, "novel_text.txt"), "utf8");
  const gold = loadGold(goldDir);
  const pred = loadPred(predDir, text);
  const mapping = new Map<string, number>();
  const topName = new Map<string, string>();
  for (const [coref, names] of pred.prop) {
    const votes = new Map<number, number>();
    let best = -1;
    for (const [n, k] of names) {
      const id = gold.alias.get(n);
      if (id === undefined) continue;
      votes.set(id, (votes.get(id) ?? 0) + k);
      if (best < 0 || votes.get(id)! > votes.get(best)!) best = id;
    }
    if (best >= 0) mapping.set(coref, best);
    topName.set(coref, [...names].sort((a, b) => b[1] - a[1])[0]![0]);
  }
  const cover = new Map<number, number>();
  pred.quotes.forEach((q, k) => {
    for (let b = q.start; b < q.end; b++) cover.set(b, k);
  });
  const errors = Object.fromEntries(ERROR_CLASSES.map((c) => [c, 0])) as Record<ErrorClass, number>;
  const confusions = new Map<string, number>();
  const main = (id: number | undefined) => (id === undefined ? "?" : gold.names.get(id)!.main);
  let correct = 0;
  for (const g of gold.quotes) {
    const hits = new Map<number, number>();
    for (let b = g.start; b < g.end; b++) {
      const k = cover.get(b);
      if (k !== undefined) hits.set(k, (hits.get(k) ?? 0) + 1);
    }
    if (hits.size === 0) {
      errors.unfound++;
      continue;
    }
    const q = pred.quotes[[...hits].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]![0]]!;
    const mapped = q.char === undefined ? undefined : mapping.get(q.char);
    if (g.speaker !== undefined && mapped === g.speaker) {
      correct++;
      continue;
    }
    if (q.char === undefined) errors["no speaker"]++;
    else if (mapped === undefined) errors.unmapped++;
    else errors[q.tagged ? "wrong (tagged)" : "wrong (inferred)"]++;
    const key = `${main(g.speaker)} → ${q.char === undefined ? "none" : mapped === undefined ? `[${topName.get(q.char) ?? q.char}]` : main(mapped)}`;
    confusions.set(key, (confusions.get(key) ?? 0) + 1);
  }
  const important = [...gold.names].filter(([, c]) => c.category === "major" || c.category === "intermediate").map(([id]) => id);
  const mappedIds = new Set(mapping.values());
  const top = [...pred.size].sort((a, b) => b[1] - a[1]).slice(0, important.length).map(([c]) => c);
  return {
    novel,
    quotes: gold.quotes.length,
    correct,
    errors,
    important: important.length,
    importantFound: important.filter((id) => mappedIds.has(id)).length,
    top: top.length,
    topMapped: top.filter((c) => mapping.has(c)).length,
    missed: important.filter((id) => !mappedIds.has(id)).map(main),
    spurious: top.filter((c) => !mapping.has(c)).map((c) => topName.get(c) ?? `#${c}`),
    confusions: [...confusions].sort((a, b) => b[1] - a[1]),
  };
}

/** Every novel of the gold set that has a prediction folder under predRoot, plus their total. */
export function evaluateAll(predRoot: string, novels?: string[], goldRoot = GOLD_DIR): { novels: NovelEval[]; total: NovelEval } {
  const names = novels ?? readdirSync(goldRoot).filter((n) => existsSync(join(goldRoot, n, "novel_text.txt"))).sort();
  const evals = names.filter((n) => existsSync(join(predRoot, n))).map((n) => evaluateNovel(n, join(predRoot, n), goldRoot));
  const total: NovelEval = {
    novel: "TOTAL",
    quotes: 0,
    correct: 0,
    errors: Object.fromEntries(ERROR_CLASSES.map((c) => [c, 0])) as Record<ErrorClass, number>,
    important: 0,
    importantFound: 0,
    top: 0,
    topMapped: 0,
    missed: [],
    spurious: [],
    confusions: [],
  };
  for (const e of evals) {
    total.quotes += e.quotes;
    total.correct += e.correct;
    for (const c of ERROR_CLASSES) total.errors[c] += e.errors[c];
    total.important += e.important;
    total.importantFound += e.importantFound;
    total.top += e.top;
    total.topMapped += e.topMapped;
  }
  return { novels: evals, total };
}

export const ratio = (a: number, b: number) => (a / Math.max(1, b)).toFixed(3);

if (import.meta.main) {
  answerHelp("usage: bun bench/nlp-eval.ts <pred dir> [novel …]\n\nClasses the quote errors of BookNLP-format output in <pred dir> against the PDNC gold annotations.");
  const [predRoot, ...novels] = process.argv.slice(2);
  if (!predRoot) {
    console.log("usage: bun bench/nlp-eval.ts <pred dir> [novel …]");
    process.exit(2);
  }
  const { novels: evals, total } = evaluateAll(predRoot, novels.length > 0 ? novels : undefined);
  for (const e of [...evals, total]) {
    const classes = ERROR_CLASSES.map((c) => `${c}=${e.errors[c]}`).join(" ");
    console.log(`${e.novel.padEnd(24)} speaker=${ratio(e.correct, e.quotes)} recall=${ratio(e.importantFound, e.important)} precision=${ratio(e.topMapped, e.top)}  ${classes}`);
    if (e.missed.length > 0) console.log(`  missed: ${e.missed.join(", ")}`);
    if (e.spurious.length > 0) console.log(`  spurious: ${e.spurious.join(", ")}`);
    if (e.confusions.length > 0) console.log(`  confusions: ${e.confusions.slice(0, 12).map(([k, n]) => `${k} ${n}`).join("; ")}`);
  }
}
