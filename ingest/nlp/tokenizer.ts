// A self-contained tokenizer and sentence splitter for whole books.
//
// Why not wink-nlp: it is ~10x slower than this single-pass scanner on a 700 KB novel, it keeps
// "Darcy’s" as one token (BookNLP, via spaCy, splits the possessive), and Bun's transpiler rewrites
// its regex literals that escape a non-ASCII dash (`/[\-\–\—]/` becomes a class matching "u", "2", …),
// so it tokenizes differently under Bun and Node. This file imports nothing and keeps every regex
// ASCII-only (non-ASCII characters are written as \u escapes) so it behaves the same on both runtimes;
// tests/integration/nlp-parity.test.ts checks that by running it under Node.

/**
 * A book's tokens as parallel columns: token i is text[i], spanning start[i]..end[i] of the book.
 * Columns instead of one object per token keep a 600,000-token novel to a few flat arrays.
 */
export interface Tokenized {
  /** Number of tokens. */
  count: number;
  /** Surface form exactly as in the text; equal words share one interned string. */
  text: string[];
  /** The surface form lower-cased, interned too. */
  lower: string[];
  /** Index into vocab of each token's surface form. */
  word: Int32Array;
  /** Distinct surface forms in order of first appearance. */
  vocab: string[];
  /** vocab lower-cased (interned like lower). */
  vocabLower: string[];
  /** UTF-16 offsets into the text: text.slice(start[i], end[i]) === this.text[i]. */
  start: Int32Array;
  end: Int32Array;
  paragraph: Int32Array;
  sentence: Int32Array;
  /** Index within its sentence. */
  inSentence: Int32Array;
  /** First token index of each sentence, plus a final sentinel equal to count. */
  sentenceStarts: Int32Array;
  /** First token index of each paragraph, plus a final sentinel equal to count. */
  paragraphStarts: Int32Array;
  /** Some character lies outside the Basic Multilingual Plane (a surrogate pair in UTF-16). */
  astral: boolean;
}

/**
 * A number per vocabulary word, computed from its lower-cased form: a loop over tokens then reads
 * kind[tok.word[i]] instead of looking the token up in a set.
 */
export function classifyWords(tok: Tokenized, classify: (lower: string) => number): Uint8Array {
  const kind = new Uint8Array(tok.vocabLower.length);
  for (let id = 0; id < kind.length; id++) kind[id] = classify(tok.vocabLower[id]!);
  return kind;
}

// Abbreviations that keep their period (so the period never ends a sentence).
/** Whether the word before `start` (across spaces) ends in a lower-case letter: "said I." is the pronoun. */
function afterLowerWord(text: string, start: number): boolean {
  let i = start - 1;
  while (i >= 0 && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 10 || text.charCodeAt(i) === 13 || text.charCodeAt(i) === 9)) i--;
  if (i < 0) return false;
  const ch = text[i]!;
  return ch !== ch.toUpperCase() && ch === ch.toLowerCase();
}

const ABBREVIATIONS = new Set([
  "mr", "mrs", "ms", "dr", "st", "messrs", "mme", "mlle", "capt", "col", "gen", "lieut", "lt", "sgt",
  "rev", "prof", "hon", "esq", "jr", "sr", "co", "vs", "viz", "etc", "no", "vol", "ch", "fig", "ft",
  "sq", "mt", "ave", "maj", "adm", "gov", "supt", "insp",
]);

// Character classes for the scanner. ASCII is decided by code; anything else by a Unicode regex,
// remembered per code unit.
const WORD_CHAR = /[\p{L}\p{M}\p{N}]/u;
const LETTER_OR_MARK = /[\p{L}\p{M}]/u;
const SPACE = /\s/u;
const HIGH_SURROGATE = /[\uD800-\uDBFF]/;
const NON_ASCII_CLASS = new Uint8Array(65536); // 0 unknown, bit 1 word, bit 2 letter, bit 4 space, bit 8 decided

function classOf(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c < 128) {
    if ((c >= 97 && c <= 122) || (c >= 65 && c <= 90)) return 3;
    if (c >= 48 && c <= 57) return 1;
    return c === 32 || (c >= 9 && c <= 13) ? 4 : 0;
  }
  if (c >= 0xd800 && c <= 0xdbff) {
    const ch = String.fromCodePoint(text.codePointAt(i)!);
    return (WORD_CHAR.test(ch) ? 1 : 0) | (LETTER_OR_MARK.test(ch) ? 2 : 0);
  }
  let k = NON_ASCII_CLASS[c]!;
  if (k === 0) {
    const ch = String.fromCharCode(c);
    k = 8 | (WORD_CHAR.test(ch) ? 1 : 0) | (LETTER_OR_MARK.test(ch) ? 2 : 0) | (SPACE.test(ch) ? 4 : 0);
    NON_ASCII_CLASS[c] = k;
  }
  return k & 7;
}

/** Length in code units of the character at i (2 for a surrogate pair). */
function width(text: string, i: number): number {
  const c = text.charCodeAt(i);
  return c >= 0xd800 && c <= 0xdbff && i + 1 < text.length ? 2 : 1;
}

const isAsciiLetter = (c: number) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90);
const isAsciiWordChar = (c: number) => isAsciiLetter(c) || (c >= 48 && c <= 57);
const isApostrophe = (c: number) => c === 39 || c === 0x2019;
const isLongDash = (c: number) => c === 0x2013 || c === 0x2014 || c === 0x2015;

const CONTRACTION_RE = /^(.+?)(n['\u2019]t|['\u2019](?:s|m|re|ve|ll|d|S|M|RE|VE|LL|D))$/;
const SENTENCE_END = new Set([".", "!", "?", "\u2026", "..."]);
const CLOSERS = new Set(['"', "'", "\u201d", "\u2019", ")", "]", "_"]);

const INITIAL_WORD_SLOTS = 1 << 14;
const HASH_SEED = 0x811c9dc5;
const hashStep = (h: number, c: number) => Math.imul(h ^ c, 0x01000193);

/** FNV-1a over the UTF-16 code units of text[start, end). */
function hashOf(text: string, start: number, end: number): number {
  let h = HASH_SEED;
  for (let i = start; i < end; i++) h = hashStep(h, text.charCodeAt(i));
  return h;
}

/**
 * Growable token columns and the word interner, filled one token at a time. Words are hashed
 * straight from the text, so a word seen before costs no string allocation.
 */
class Columns {
  count = 0;
  start: Int32Array;
  end: Int32Array;
  paragraph: Int32Array;
  word: Int32Array;
  readonly vocab: string[] = [];
  readonly vocabLower: string[] = [];
  /** Where each vocabulary word first occurs, and its hash. */
  private readonly vocabAt: number[] = [];
  private readonly vocabHash: number[] = [];
  /** Open addressing: vocabulary id + 1 per slot, 0 for empty. */
  private slots = new Int32Array(INITIAL_WORD_SLOTS);
  private readonly lowers = new Map<string, string>();

  constructor(private readonly source: string) {
    // Novels average about five characters per token.
    const capacity = (source.length >> 2) + 64;
    this.start = new Int32Array(capacity);
    this.end = new Int32Array(capacity);
    this.paragraph = new Int32Array(capacity);
    this.word = new Int32Array(capacity);
  }

  /** Adds text[start, end) as a token; hash is hashOf(text, start, end), often computed while scanning. */
  push(start: number, end: number, paragraph: number, hash: number = hashOf(this.source, start, end)): void {
    const k = this.count;
    if (k === this.start.length) this.grow();
    const id = this.intern(start, end, hash);
    this.start[k] = start;
    this.end[k] = end;
    this.paragraph[k] = paragraph;
    this.word[k] = id;
    this.count = k + 1;
  }

  private intern(start: number, end: number, h: number): number {
    const src = this.source;
    const mask = this.slots.length - 1;
    const len = end - start;
    for (let slot = h & mask; ; slot = (slot + 1) & mask) {
      const entry = this.slots[slot]!;
      if (entry === 0) {
        const id = this.vocab.length;
        this.slots[slot] = id + 1;
        this.addWord(src.slice(start, end), start, h);
        return id;
      }
      const id = entry - 1;
      if (this.vocabHash[id] !== h || this.vocab[id]!.length !== len) continue;
      const at = this.vocabAt[id]!;
      let same = true;
      for (let i = 0; i < len && same; i++) same = src.charCodeAt(at + i) === src.charCodeAt(start + i);
      if (same) return id;
    }
  }

  private addWord(surface: string, at: number, hash: number): void {
    this.vocab.push(surface);
    this.vocabAt.push(at);
    this.vocabHash.push(hash);
    const lc = surface.toLowerCase();
    let shared = this.lowers.get(lc);
    if (shared === undefined) this.lowers.set(lc, (shared = lc));
    this.vocabLower.push(shared);
    // Keep the table at most half full.
    if (this.vocab.length * 2 > this.slots.length) {
      const slots = new Int32Array(this.slots.length * 2);
      const mask = slots.length - 1;
      for (let id = 0; id < this.vocab.length; id++) {
        let slot = this.vocabHash[id]! & mask;
        while (slots[slot] !== 0) slot = (slot + 1) & mask;
        slots[slot] = id + 1;
      }
      this.slots = slots;
    }
  }

  private grow(): void {
    const widen = (a: Int32Array) => {
      const b = new Int32Array(a.length * 2);
      b.set(a);
      return b;
    };
    this.start = widen(this.start);
    this.end = widen(this.end);
    this.paragraph = widen(this.paragraph);
    this.word = widen(this.word);
  }
}

/** Each token's entry of a per-word list. */
function perToken(list: string[], word: Int32Array): string[] {
  const out = new Array<string>(word.length);
  for (let i = 0; i < word.length; i++) out[i] = list[word[i]!]!;
  return out;
}

/** Splits a word with an inner apostrophe into the word and a trailing clitic the way spaCy does ("do" "n't", "Darcy" "'s"). */
function pushContraction(out: Columns, text: string, start: number, end: number, paragraph: number): void {
  const m = CONTRACTION_RE.exec(text.slice(start, end));
  if (m && m[1] && m[2]) {
    const cut = start + m[1].length;
    out.push(start, cut, paragraph);
    out.push(cut, end, paragraph);
  } else out.push(start, end, paragraph);
}

export function tokenize(text: string): Tokenized {
  const cols = new Columns(text);
  const paragraphStarts: number[] = [];
  let paragraph = 0;
  let paragraphHasTokens = false;
  // Books with no blank lines at all use one line per paragraph.
  const lineParagraphs = !/\n[ \t]*\r?\n/.test(text);
  const n = text.length;
  let pos = 0;
  while (pos < n) {
    const start = pos;
    const cls = classOf(text, pos);
    if (cls & 4) {
      // A whitespace run with a blank line in it (or any newline, in line-per-paragraph books).
      let newlines = 0;
      while (pos < n && classOf(text, pos) & 4) {
        if (text.charCodeAt(pos) === 10) newlines++;
        pos++;
      }
      if ((newlines >= 2 || (lineParagraphs && newlines >= 1)) && paragraphHasTokens) {
        paragraph++;
        paragraphHasTokens = false;
      }
      continue;
    }
    if (!paragraphHasTokens) {
      paragraphStarts.push(cols.count);
      paragraphHasTokens = true;
    }
    const c = text.charCodeAt(pos);
    // Initialisms such as U.S. stay one token.
    if (isAsciiLetter(c) && text.charCodeAt(pos + 1) === 46 && isAsciiLetter(text.charCodeAt(pos + 2)) && text.charCodeAt(pos + 3) === 46) {
      pos += 4;
      while (isAsciiLetter(text.charCodeAt(pos)) && text.charCodeAt(pos + 1) === 46) pos += 2;
      cols.push(start, pos, paragraph);
      continue;
    }
    if (cls & 1) {
      // A word, with inner apostrophes (o'clock, don't) when a letter follows them; hashed on the way.
      let h = HASH_SEED;
      let apostrophe = false;
      while (pos < n) {
        const u = text.charCodeAt(pos);
        if (u < 128 ? isAsciiWordChar(u) : classOf(text, pos) & 1) {
          h = hashStep(h, u);
          if (width(text, pos) === 2) h = hashStep(h, text.charCodeAt(++pos));
          pos++;
        } else if (isApostrophe(u) && pos + 1 < n && classOf(text, pos + 1) & 2) {
          h = hashStep(h, u);
          apostrophe = true;
          pos++;
        } else break;
      }
      // Keep an abbreviation's period on the word ("Mr."), and a single capital's ("P." in "Annie P. Miller"),
      // but not the pronoun's after a lower-case word ("said I.").
      if (text.charCodeAt(pos) === 46 && text.charCodeAt(pos + 1) !== 46) {
        if ((pos - start === 1 && c >= 65 && c <= 90 && !(c === 73 && afterLowerWord(text, start))) || ABBREVIATIONS.has(text.slice(start, pos).toLowerCase())) {
          cols.push(start, pos + 1, paragraph, hashStep(h, 46));
          pos++;
          continue;
        }
      }
      if (apostrophe) pushContraction(cols, text, start, pos, paragraph);
      else cols.push(start, pos, paragraph, h);
      continue;
    }
    if ((c === 45 || c === 46) && text.charCodeAt(pos + 1) === c) {
      while (text.charCodeAt(pos) === c) pos++;
    } else if (isLongDash(c)) {
      while (isLongDash(text.charCodeAt(pos))) pos++;
    } else pos += width(text, pos);
    cols.push(start, pos, paragraph);
  }
  const count = cols.count;
  paragraphStarts.push(count);
  const word = cols.word.slice(0, count);
  const tokens = {
    count,
    text: perToken(cols.vocab, word),
    lower: perToken(cols.vocabLower, word),
    word,
    vocab: cols.vocab,
    vocabLower: cols.vocabLower,
    start: cols.start.slice(0, count),
    end: cols.end.slice(0, count),
    paragraph: cols.paragraph.slice(0, count),
  };
  const { sentence, inSentence, sentenceStarts } = splitSentences(tokens);
  // Every character but whitespace is inside some token, so the words show whether the text has any.
  const astral = cols.vocab.some((w) => HIGH_SURROGATE.test(w));
  return { ...tokens, sentence, inSentence, sentenceStarts, paragraphStarts: Int32Array.from(paragraphStarts), astral };
}

function startsUpperOrQuote(word: string | undefined): boolean {
  if (word === undefined) return true;
  const c = word.charAt(0);
  return c !== c.toLowerCase() || /^["'\u201c\u2018(\[_\d]/.test(c);
}

/** Sentence boundaries: paragraph ends, and . ! ? (with trailing closers) before a capital or quote. */
function splitSentences(t: Pick<Tokenized, "count" | "text" | "start" | "end" | "paragraph" | "word" | "vocab">): {
  sentence: Int32Array;
  inSentence: Int32Array;
  sentenceStarts: Int32Array;
} {
  const { count, text, start, end, paragraph, word } = t;
  const ends = t.vocab.map((w) => SENTENCE_END.has(w));
  const closes = t.vocab.map((w) => CLOSERS.has(w));
  const sentenceOf = new Int32Array(count);
  const inSentenceOf = new Int32Array(count);
  const starts: number[] = [];
  let sentence = -1;
  let inSentence = 0;
  let boundary = true;
  for (let i = 0; i < count; i++) {
    const para = paragraph[i]!;
    if (boundary || (i > 0 && paragraph[i - 1] !== para)) {
      sentence++;
      inSentence = 0;
      starts.push(i);
      boundary = false;
    }
    sentenceOf[i] = sentence;
    inSentenceOf[i] = inSentence++;
    if (ends[word[i]!]) {
      let j = i + 1;
      // A closer only counts when it touches the previous token: a spaced quote opens the next sentence.
      while (j < count && closes[word[j]!] && start[j] === end[j - 1] && paragraph[j] === para) j++;
      if (j >= count || paragraph[j] !== para || startsUpperOrQuote(text[j])) {
        // Closing quotes and brackets belong to the sentence they close.
        for (let k = i + 1; k < j; k++) {
          sentenceOf[k] = sentence;
          inSentenceOf[k] = inSentence++;
        }
        i = j - 1;
        boundary = true;
      }
    }
  }
  starts.push(count);
  return { sentence: sentenceOf, inSentence: inSentenceOf, sentenceStarts: Int32Array.from(starts) };
}
