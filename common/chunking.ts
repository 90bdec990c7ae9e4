/**
 * Splits a book into chunks of about DEFAULT_CHUNK_TOKENS o200k_base tokens for embedding and BM25.
 *
 * Chunks end on sentence (or paragraph) boundaries: the text is cut into units — sentences, or for a
 * sentence longer than the budget its lines, then its words, then runs of whole characters — and the
 * units are packed greedily. Each unit carries the whitespace that precedes it, so a cut always falls
 * just before whitespace and the pre-tokeniser's pieces never straddle two units: the sum of unit counts
 * equals the count of their concatenation, or overestimates it by a token where a sentence-ending mark
 * and the newline after it merge (".\n"). Packing uses those sums; every chunk is then counted once
 * more as a whole, and a unit is handed on to the next chunk in the rare case the exact count exceeds
 * the budget. So `tokenCount` is exact and never above the budget, at the price of tokenising the text
 * about twice (once per unit, once per chunk) — still linear, far cheaper than re-encoding growing text.
 *
 * Memory stays bounded for a 100 MB book: the text is scanned paragraph by paragraph and no call to the
 * tokeniser sees more than a sentence or a chunk (or a window of a few thousand characters of a
 * pathological run with no whitespace).
 *
 * Pure: web-standard APIs and gpt-tokenizer only.
 */
import { endsInAbbreviation } from "./abbreviations.ts";
import { countO200kTokens } from "./token-count.ts";
import { isWhitespace } from "./whitespace.ts";

export const DEFAULT_CHUNK_TOKENS = 512;
/** Below this a single character (up to 4 UTF-8 bytes) might not fit in a chunk. */
export const MIN_CHUNK_TOKENS = 8;

export interface Chunk {
  /** 0, 1, 2… in reading order. */
  chunkIndex: number;
  text: string;
  /** Exact o200k_base token count of `text`; never above the budget. */
  tokenCount: number;
}

export interface ChunkOptions {
  /** Token budget per chunk; DEFAULT_CHUNK_TOKENS when unset. */
  chunkTokens?: number;
}

/**
 * Past this many characters per budget token a piece is not worth counting whole (English runs at
 * ~4.5 characters a token): it goes straight to the next finer split, which keeps every tokeniser
 * call small however large the book's paragraphs are.
 */
const MAX_CHARS_PER_TOKEN = 12;
/**
 * The tokeniser's byte-pair merge is quadratic in the length of a piece it cannot split (a run of
 * letters, of punctuation, of whitespace: 16,000 spaces cost 170 ms, 65,000 nearly 3 s), and it
 * cannot split runs without whitespace. So no text it counts holds a run longer than this: a longer
 * run of non-whitespace is cut into pieces of at most this many characters, each one a chunk of its own
 * (two would make one long run again), and a longer run of whitespace is collapsed (see paragraphs()).
 * Ordinary words and CJK sentences are far shorter; a chunk of such a run carries fewer tokens than the budget.
 */
export const MAX_RUN_CHARS = 1024;
/** A run of whitespace longer than this in a paragraph says nothing its first character does not. */
const MAX_WHITESPACE_RUN = 64;
/** A piece of a run is taken once it is this close to the budget (a share of it). */
const FITTING_SLACK = 1 / 32;
const LONG_WHITESPACE = new RegExp(`(?<!\\s)\\s{${MAX_WHITESPACE_RUN + 1},}`, "g");

/** Two or more line ends (CRLF, LF or a lone CR), with only spaces between them. */
const PARAGRAPH_BREAK = /(?:\r\n|\r(?!\n)|\n)(?:[^\S\r\n]*(?:\r\n|\r(?!\n)|\n))+/g;
const PARAGRAPH_SEPARATOR = "\n\n";

/**
 * Latin, Urdu (۔ ؟) and ellipsis enders need whitespace after them; CJK enders do not. Closing quotes
 * and brackets stay with their sentence. A match starts only where a run of enders starts: tried
 * inside a long run ("!!!…!x"), each start would read the rest of the run again.
 */
const SENTENCE_END = /(?<![.!?…۔؟])[.!?…۔؟]+["'”’»)\]]*(?=\s)|[。！？]+["'”’」』)\]]*/gu;
const SENTENCE_FINAL = /[.!?…۔؟。！？:;,]["'”’»)\]」』]*$/u;
const MAX_HEADING_CHARS = 80;
/** Headings carried to the next chunk may take at most this fraction of the budget. */
const HEADING_CARRY_FRACTION = 8;
const WHITESPACE = /\s+/g;

/** Ever finer ways to cut a unit that does not fit (plain constants: enums are not erasable syntax). */
const Level = { Sentence: 0, Line: 1, Word: 2, Character: 3 } as const;
type Level = (typeof Level)[keyof typeof Level];

interface Unit {
  /** Text including the whitespace that precedes it in the book. */
  text: string;
  /** o200k_base count of `text`. */
  tokens: number;
  level: Level;
  /** First piece of an oversized sentence: starts a fresh chunk so the sentence is not scattered. */
  breakBefore: boolean;
  /** A short paragraph without a sentence ending ("CHAPTER XII"): opens the next chunk rather than closing one. */
  heading?: boolean;
}

/**
 * Chunks in order, computed lazily: a consumer can embed and index them in batches. A bad budget
 * throws here, not at the first chunk.
 */
export function chunkText(text: string, options: ChunkOptions = {}): Generator<Chunk> {
  const budget = options.chunkTokens ?? DEFAULT_CHUNK_TOKENS;
  if (!Number.isInteger(budget) || budget < MIN_CHUNK_TOKENS) {
    throw new RangeError(`chunkTokens must be an integer >= ${MIN_CHUNK_TOKENS}, got ${budget}`);
  }
  return pack(units(text, budget), budget);
}

export function chunkTextToArray(text: string, options: ChunkOptions = {}): Chunk[] {
  return Array.from(chunkText(text, options));
}

function* paragraphs(text: string): Generator<string> {
  const breaks = new RegExp(PARAGRAPH_BREAK.source, "g");
  let start = 0;
  for (;;) {
    const match = breaks.exec(text);
    const end = match ? match.index : text.length;
    const paragraph = text
      .slice(start, end)
      .replace(/\r\n?/g, "\n")
      .trim()
      .replace(LONG_WHITESPACE, (run) => (run.includes("\n") ? "\n" : run[0]!));
    if (paragraph) yield paragraph;
    if (!match) return;
    start = match.index + match[0].length;
  }
}

function* units(text: string, budget: number): Generator<Unit> {
  let first = true;
  for (const paragraph of paragraphs(text)) {
    let leading = first ? "" : PARAGRAPH_SEPARATOR;
    first = false;
    const heading = paragraph.length <= MAX_HEADING_CHARS && !paragraph.includes("\n") && !SENTENCE_FINAL.test(paragraph);
    for (const sentence of pieces(paragraph, Level.Sentence)) {
      for (const unit of fit(leading + sentence, Level.Sentence, budget, true)) yield heading ? { ...unit, heading } : unit;
      leading = "";
    }
  }
}

/** The unit itself when it fits the budget, else its pieces at the next finer level. */
function* fit(text: string, level: Level, budget: number, breakIfSplit: boolean): Generator<Unit> {
  if (text.length <= budget * MAX_CHARS_PER_TOKEN && longestRun(text) <= MAX_RUN_CHARS) {
    const tokens = countO200kTokens(text);
    if (tokens <= budget) {
      yield { text, tokens, level, breakBefore: false };
      return;
    }
  }
  let breakBefore = breakIfSplit;
  for (const unit of split(text, level, budget)) {
    yield breakBefore ? { ...unit, breakBefore } : unit;
    breakBefore = false;
  }
}

function* split(text: string, level: Level, budget: number): Generator<Unit> {
  if (level >= Level.Word) {
    yield* characterRuns(text, budget);
    return;
  }
  const finer = (level + 1) as Level;
  for (const piece of pieces(text, finer)) yield* fit(piece, finer, budget, false);
}

/**
 * Cuts text at the boundaries of a level, each piece keeping the whitespace before it. Lazy, so a
 * paragraph of many megabytes (a book with no blank lines) is never copied into an array of pieces.
 */
function* pieces(text: string, level: Level): Generator<string> {
  let start = 0;
  for (const cut of cuts(text, level)) {
    if (cut <= start || cut >= text.length) continue;
    yield text.slice(start, cut);
    start = cut;
  }
  yield text.slice(start);
}

function* cuts(text: string, level: Level): Generator<number> {
  // Leading whitespace belongs to the first piece, so cuts are only searched after it.
  const contentStart = Math.max(0, text.search(/\S/));
  if (level === Level.Sentence) {
    const enders = new RegExp(SENTENCE_END.source, "gu");
    enders.lastIndex = contentStart;
    for (let m = enders.exec(text); m; m = enders.exec(text)) {
      const end = m.index + m[0].length;
      if (m[0].startsWith(".") && m[0].length === 1 && endsInAbbreviation(text.slice(Math.max(0, end - 12), end))) {
        continue;
      }
      yield end;
    }
    return;
  }
  // Lines are cut at the runs of whitespace that hold a line break: one pass over the runs, where a
  // pattern such as /\s*\n\s*/ would read a long run of spaces again from each of its characters.
  const separators = new RegExp(WHITESPACE.source, "g");
  separators.lastIndex = contentStart;
  for (let m = separators.exec(text); m; m = separators.exec(text)) if (level === Level.Word || m[0].includes("\n")) yield m.index;
}

/** The length of the longest run of characters that are not whitespace. */
function longestRun(text: string): number {
  let longest = 0;
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    run = isWhitespace(text.charCodeAt(i)) ? 0 : run + 1;
    if (run > longest) longest = run;
  }
  return longest;
}

/**
 * Splits a run without usable whitespace by characters: a prefix within the budget (see fittingEnd),
 * backed off so that no code point, combining mark or joined emoji is cut in two. Counting whole
 * strings (never decoding token slices) is what rules out U+FFFD.
 */
function* characterRuns(text: string, budget: number): Generator<Unit> {
  let start = 0;
  while (start < text.length) {
    // One code point is at most 4 bytes, so it always fits a budget >= MIN_CHUNK_TOKENS.
    const minEnd = isCodePointBoundary(text, start + 1) ? start + 1 : start + 2;
    const low = fittingEnd(text, start, minEnd, budget);
    let end = low;
    while (end > minEnd && !isClusterBoundary(text, end)) end--;
    if (!isClusterBoundary(text, end)) {
      // A single cluster longer than the budget: cut it, but never inside a code point.
      end = low;
      while (end > minEnd && !isCodePointBoundary(text, end)) end--;
    }
    let piece = text.slice(start, end);
    let tokens = countO200kTokens(piece);
    // BPE counts are not strictly monotone in the prefix length: shrink until the piece truly fits.
    while (tokens > budget && end > minEnd) {
      end--;
      while (end > minEnd && !isCodePointBoundary(text, end)) end--;
      piece = text.slice(start, end);
      tokens = countO200kTokens(piece);
    }
    // Every piece after the first opens a chunk: two pieces of one run in a chunk would be a run longer than MAX_RUN_CHARS.
    yield { text: piece, tokens, level: Level.Character, breakBefore: start > 0 };
    start = end;
  }
}

/**
 * The end of a prefix of text from `start`, at most MAX_RUN_CHARS long, within the budget: the whole
 * window when it fits, else a prefix within FITTING_SLACK of the budget, found by interpolating the
 * token counts (a run's count grows about evenly with its length), every other step halving instead
 * so that an uneven run still ends in as many steps as a binary search. `minEnd` always fits.
 */
function fittingEnd(text: string, start: number, minEnd: number, budget: number): number {
  const limit = Math.min(text.length, start + MAX_RUN_CHARS);
  let low = minEnd;
  let lowTokens = 0;
  // A window of `budget` characters, doubled while it fits: dense text (a token or more a character)
  // never pays for counting a whole MAX_RUN_CHARS window.
  let high = Math.max(minEnd, Math.min(limit, start + budget));
  let highTokens = countO200kTokens(text.slice(start, high));
  while (highTokens <= budget) {
    if (high === limit) return high;
    [low, lowTokens] = [high, highTokens];
    high = Math.min(limit, start + 2 * (high - start));
    highTokens = countO200kTokens(text.slice(start, high));
  }
  const slack = Math.max(1, Math.floor(budget * FITTING_SLACK));
  for (let step = 0; high - low > 1; step++) {
    const guess = step % 2 === 0 ? low + Math.floor(((high - low) * (budget - lowTokens)) / (highTokens - lowTokens)) : (low + high) >>> 1;
    const mid = Math.min(high - 1, Math.max(low + 1, guess));
    const tokens = countO200kTokens(text.slice(start, mid));
    if (tokens > budget) {
      high = mid;
      highTokens = tokens;
      continue;
    }
    low = mid;
    lowTokens = tokens;
    if (budget - tokens <= slack) break;
  }
  return low;
}

const CLUSTER_CONTINUATION = /[\p{M}\u200C\u200D\uFE00-\uFE0F]/u;

function isCodePointBoundary(text: string, i: number): boolean {
  if (i <= 0 || i >= text.length) return true;
  const code = text.charCodeAt(i);
  const before = text.charCodeAt(i - 1);
  return !(code >= 0xdc00 && code <= 0xdfff && before >= 0xd800 && before <= 0xdbff);
}

/** Cutting before index i keeps code points, combining marks and joined emoji whole. */
function isClusterBoundary(text: string, i: number): boolean {
  if (i <= 0 || i >= text.length) return true;
  if (!isCodePointBoundary(text, i) || text.charCodeAt(i - 1) === 0x200d) return false;
  return !CLUSTER_CONTINUATION.test(String.fromCodePoint(text.codePointAt(i) ?? 0));
}

function* pack(source: Iterable<Unit>, budget: number): Generator<Chunk> {
  const iterator = source[Symbol.iterator]();
  /** Units handed back by the exact check, to be read before the source. */
  const pending: Unit[] = [];
  let parts: Unit[] = [];
  let estimate = 0;
  let chunkIndex = 0;

  const next = (): Unit | undefined => {
    const held = pending.pop();
    if (held) return held;
    const result = iterator.next();
    return result.done ? undefined : result.value;
  };

  /** A chapter title at the end of a chunk belongs with the chapter: move a short run of them on. */
  const handBackTrailingHeadings = () => {
    let start = parts.length;
    let tokens = 0;
    while (start > 0 && parts[start - 1]?.heading) tokens += (parts[--start] as Unit).tokens;
    if (start === 0 || start === parts.length || tokens > budget / HEADING_CARRY_FRACTION) return;
    while (parts.length > start) pending.push(parts.pop() as Unit);
  };

  /** Emits the parts as one chunk, handing units back until its exact count fits. */
  function* flush(): Generator<Chunk> {
    handBackTrailingHeadings();
    while (parts.length > 0) {
      const text = parts.map((p) => p.text).join("").trim();
      const tokenCount = countO200kTokens(text);
      if (tokenCount <= budget) {
        if (text) yield { chunkIndex: chunkIndex++, text, tokenCount };
        break;
      }
      if (parts.length > 1) {
        pending.push(parts.pop() as Unit);
        continue;
      }
      // A lone unit whose leading whitespace kept it within budget: split it once more, without it.
      const lone = parts[0] as Unit;
      const finer = Array.from(split(lone.text.trimStart(), lone.level, budget));
      for (let i = finer.length - 1; i >= 0; i--) pending.push(finer[i] as Unit);
      break;
    }
    parts = [];
    estimate = 0;
  }

  for (;;) {
    const unit = next();
    if (!unit) {
      if (parts.length === 0) return;
      // Flushing may hand units back (a trailing heading, a split lone unit): keep reading.
      yield* flush();
      continue;
    }
    if (parts.length > 0 && (unit.breakBefore || estimate + unit.tokens > budget)) {
      // Handed back first so that anything flush() hands back is read before it.
      pending.push(unit);
      yield* flush();
      continue;
    }
    parts.push(unit);
    estimate += unit.tokens;
  }
}
