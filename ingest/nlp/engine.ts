import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { mergeAddressedNames } from "./addressed-names.ts";
import type { Analysis } from "./analysis.ts";
import { attributeSpeakers, NARRATOR_ID } from "./attribution.ts";
import { capitalStats } from "./capital-stats.ts";
import { isVocative, scoreCharacters } from "./character-scores.ts";
import { emptyCharacter, type Character } from "./character.ts";
import { clusterNames } from "./name-clusters.ts";
import { resolveMentions } from "./coref.ts";
import { withoutCredited } from "./credited-names.ts";
import { linkDescriptions } from "./description-links.ts";
import { findEpithets } from "./epithets.ts";
import { FIRST_PERSON } from "./lexicon.ts";
import { findNames, splitRunTogether, type NameMention } from "./names.ts";
import { findNestedQuotes } from "./nested-quotes.ts";
import { findQuotes } from "./quotes.ts";
import { mergeStatedNames } from "./stated-names.ts";
import { tokenize, type Tokenized } from "./tokenizer.ts";
import { renderBook, renderEntities, renderQuotes, renderSupersense, renderTokenPieces, Tags, type BookNlpFiles } from "./writer.ts";

/** Share of narration words that must be I/me/my/… for the book to count as told in the first person. */
export const DEFAULT_NARRATOR_THRESHOLD = 0.012;
const NARRATOR_MIN_VOCATIVES = 2;
const NARRATOR_QUOTED_SHARE = 0.8;

export type Stage = "tokens" | "quotes" | "names" | "speakers" | "coreference" | "files";

export interface EngineOptions {
  onStage?: (stage: Stage) => void;
  narratorThreshold?: number;
}

/** First person outside quotes, relative to all narration words. */
function firstPersonShare(tok: Tokenized, inQuote: Uint8Array): number {
  // Decided per vocabulary word: 0 not a word, 1 a word, 2 a first-person word.
  const kind = new Uint8Array(tok.vocab.length);
  tok.vocab.forEach((w, id) => (kind[id] = !/\p{L}/u.test(w) ? 0 : FIRST_PERSON.has(tok.vocabLower[id]!) ? 2 : 1));
  let words = 0;
  let firsts = 0;
  for (let i = 0; i < tok.count; i++) {
    const k = kind[tok.word[i]!]!;
    if (inQuote[i] || k === 0) continue;
    words++;
    if (k === 2) firsts++;
  }
  return words === 0 ? 0 : firsts / words;
}

/**
 * A first-person narrator is never named in the narration, only by others inside quotes: the
 * person addressed most by name whose name occurs (almost) only in quotes is the narrator.
 */
function nameTheNarrator(tok: Tokenized, names: NameMention[], chars: Character[]): void {
  const total = new Map<number, number>();
  const quoted = new Map<number, number>();
  const vocatives = new Map<number, number>();
  const add = (m: Map<number, number>, k: number) => m.set(k, (m.get(k) ?? 0) + 1);
  for (const m of names) {
    if (m.char <= NARRATOR_ID || !chars[m.char]!.person) continue;
    add(total, m.char);
    if (m.inQuote) add(quoted, m.char);
    if (isVocative(tok, m)) add(vocatives, m.char);
  }
  let best = -1;
  for (const [c, v] of vocatives) {
    const n = total.get(c) ?? 0;
    if (v < NARRATOR_MIN_VOCATIVES || (quoted.get(c) ?? 0) < NARRATOR_QUOTED_SHARE * n) continue;
    if (best < 0 || v > (vocatives.get(best) ?? 0)) best = c;
  }
  if (best < 0) return;
  const named = chars[best]!;
  const narrator = chars[NARRATOR_ID]!;
  for (const m of names) if (m.char === best) m.char = NARRATOR_ID;
  narrator.forms = named.forms;
  narrator.titles = named.titles;
  narrator.gender = named.gender;
  narrator.mentionCount += named.mentionCount;
  named.person = false;
  named.mentionCount = 0;
}

export function analyze(text: string, options: EngineOptions = {}): Analysis {
  const stage = options.onStage ?? (() => {});
  stage("tokens");
  const tok = tokenize(text);
  stage("quotes");
  const scan = findQuotes(tok);
  stage("names");
  const stats = capitalStats(tok, scan.inQuote);
  const found = findNames(tok, scan.inQuote, stats);
  const places = found.places;
  const names = splitRunTogether(
    withoutCredited(tok, [...found.names, ...findEpithets(tok, scan.inQuote, found.names)].sort((a, b) => a.start - b.start), scan.inQuote),
  );
  const chars = clusterNames(tok, names, [emptyCharacter(NARRATOR_ID, undefined)]);
  mergeStatedNames(tok, names, chars);
  scoreCharacters(tok, names, chars, scan.inQuote);
  mergeAddressedNames(tok, names, chars);
  const narrator = firstPersonShare(tok, scan.inQuote) >= (options.narratorThreshold ?? DEFAULT_NARRATOR_THRESHOLD);
  chars[NARRATOR_ID]!.person = narrator;
  if (narrator) nameTheNarrator(tok, names, chars);
  stage("speakers");
  const attribution = attributeSpeakers({ tok, quotes: scan.quotes, inQuote: scan.inQuote, names, chars, narrator });
  linkDescriptions(scan.quotes, attribution, names, chars);
  const nested = scan.convention === "double" ? findNestedQuotes(tok, scan.quotes, attribution.speaker, names, chars) : [];
  stage("coreference");
  const mentions = resolveMentions({
    tok,
    names,
    places,
    chars,
    quotes: scan.quotes,
    inQuote: scan.inQuote,
    attribution,
    narrator,
  });
  return { text, tok, scan, names, places, chars, narrator, attribution, nested, mentions };
}

function once<T>(f: () => T): () => T {
  let done = false;
  let value: T;
  return () => {
    if (!done) {
      value = f();
      done = true;
    }
    return value;
  };
}

/**
 * The five files as text, each rendered when first read: a caller that wants only the characters
 * never builds the .tokens file (50 MB for War and Peace).
 */
export function render(a: Analysis): BookNlpFiles {
  const tags = new Tags(a);
  const tokens = once(() => {
    const decoder = new TextDecoder();
    const pieces: string[] = [];
    renderTokenPieces(a, tags, (piece) => pieces.push(decoder.decode(piece)));
    return pieces.join("");
  });
  const entities = once(() => renderEntities(a.mentions));
  const quotes = once(() => renderQuotes(a));
  const supersense = once(() => renderSupersense(a, a.mentions));
  const book = once(() => renderBook(a, a.mentions, tags));
  return {
    get tokens() {
      return tokens();
    },
    get entities() {
      return entities();
    },
    get quotes() {
      return quotes();
    },
    get supersense() {
      return supersense();
    },
    get book() {
      return book();
    },
  };
}

/** Writes <outdir>/<id>.tokens, .entities, .quotes, .supersense and .book; .tokens is streamed. */
export function writeBookNlp(a: Analysis, outdir: string, id: string): void {
  mkdirSync(outdir, { recursive: true });
  const path = (ext: keyof BookNlpFiles) => join(outdir, `${id}.${ext}`);
  const tags = new Tags(a);
  const fd = openSync(path("tokens"), "w");
  try {
    renderTokenPieces(a, tags, (piece) => writeAll(fd, piece));
  } finally {
    closeSync(fd);
  }
  writeFileSync(path("entities"), renderEntities(a.mentions));
  writeFileSync(path("quotes"), renderQuotes(a));
  writeFileSync(path("supersense"), renderSupersense(a, a.mentions));
  writeFileSync(path("book"), renderBook(a, a.mentions, tags));
}

function writeAll(fd: number, bytes: Uint8Array): void {
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done);
}

/** The whole job: a book's text in, BookNLP's five files out (rendered on first read). */
export function runBookNlp(text: string, options: EngineOptions = {}): { analysis: Analysis; files: BookNlpFiles } {
  const analysis = analyze(text, options);
  return { analysis, files: render(analysis) };
}
