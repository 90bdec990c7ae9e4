// A self-contained tokenizer and sentence splitter for whole books.
//
// Why not wink-nlp: it is ~10x slower than this single regex pass on a 700 KB novel, it keeps
// "Darcy’s" as one token (BookNLP, via spaCy, splits the possessive), and Bun's transpiler rewrites
// its regex literals that escape a non-ASCII dash (`/[\-\–\—]/` becomes a class matching "u", "2", …),
// so it tokenizes differently under Bun and Node. This file imports nothing and keeps every regex
// ASCII-only (non-ASCII characters are written as \u escapes) so it behaves the same on both runtimes;
// tests/nlp-parity.test.ts checks that by running it under Node.

export interface Token {
  /** Surface form exactly as in the text. */
  text: string;
  /** The surface form lower-cased, computed once for every later lookup. */
  lower: string;
  /** UTF-16 offsets into the text: text.slice(start, end) === this.text. */
  start: number;
  end: number;
  paragraph: number;
  sentence: number;
  /** Index within its sentence. */
  inSentence: number;
}

export interface Tokenized {
  tokens: Token[];
  /** First token index of each sentence, plus a final sentinel equal to tokens.length. */
  sentenceStarts: number[];
  /** First token index of each paragraph, plus a final sentinel equal to tokens.length. */
  paragraphStarts: number[];
}

// Abbreviations that keep their period (so the period never ends a sentence).
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
const isApostrophe = (c: number) => c === 39 || c === 0x2019;
const isLongDash = (c: number) => c === 0x2013 || c === 0x2014 || c === 0x2015;

const CONTRACTION_RE = /^(.+?)(n['\u2019]t|['\u2019](?:s|m|re|ve|ll|d|S|M|RE|VE|LL|D))$/;
const SENTENCE_END = new Set([".", "!", "?", "\u2026", "..."]);
const CLOSERS = new Set(['"', "'", "\u201d", "\u2019", ")", "]", "_"]);

function pushToken(
  out: Token[],
  text: string,
  start: number,
  end: number,
  paragraph: number,
): void {
  const surface = text.slice(start, end);
  out.push({ text: surface, lower: surface.toLowerCase(), start, end, paragraph, sentence: 0, inSentence: 0 });
}

/** Splits a word into the word and a trailing clitic the way spaCy does ("do" "n't", "Darcy" "'s"). */
function pushWord(out: Token[], text: string, start: number, end: number, paragraph: number): void {
  const word = text.slice(start, end);
  const m = word.includes("'") || word.includes("\u2019") ? CONTRACTION_RE.exec(word) : null;
  if (m && m[1] && m[2]) {
    const cut = start + m[1].length;
    pushToken(out, text, start, cut, paragraph);
    pushToken(out, text, cut, end, paragraph);
    return;
  }
  pushToken(out, text, start, end, paragraph);
}

export function tokenize(text: string): Tokenized {
  const tokens: Token[] = [];
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
      paragraphStarts.push(tokens.length);
      paragraphHasTokens = true;
    }
    const c = text.charCodeAt(pos);
    // Initialisms such as U.S. stay one token.
    if (isAsciiLetter(c) && text.charCodeAt(pos + 1) === 46 && isAsciiLetter(text.charCodeAt(pos + 2)) && text.charCodeAt(pos + 3) === 46) {
      pos += 4;
      while (isAsciiLetter(text.charCodeAt(pos)) && text.charCodeAt(pos + 1) === 46) pos += 2;
      pushToken(tokens, text, start, pos, paragraph);
      continue;
    }
    if (cls & 1) {
      // A word, with inner apostrophes (o'clock, don't) when a letter follows them.
      while (pos < n) {
        if (classOf(text, pos) & 1) pos += width(text, pos);
        else if (isApostrophe(text.charCodeAt(pos)) && pos + 1 < n && classOf(text, pos + 1) & 2) pos += 1;
        else break;
      }
      // Keep an abbreviation's period on the word ("Mr."), and a single capital's ("P." in "Annie P. Miller").
      if (text.charCodeAt(pos) === 46 && text.charCodeAt(pos + 1) !== 46) {
        const word = text.slice(start, pos);
        if (ABBREVIATIONS.has(word.toLowerCase()) || (pos - start === 1 && c >= 65 && c <= 90)) {
          pushToken(tokens, text, start, pos + 1, paragraph);
          pos++;
          continue;
        }
      }
      pushWord(tokens, text, start, pos, paragraph);
      continue;
    }
    if ((c === 45 || c === 46) && text.charCodeAt(pos + 1) === c) {
      while (text.charCodeAt(pos) === c) pos++;
    } else if (isLongDash(c)) {
      while (isLongDash(text.charCodeAt(pos))) pos++;
    } else pos += width(text, pos);
    pushToken(tokens, text, start, pos, paragraph);
  }
  paragraphStarts.push(tokens.length);
  const sentenceStarts = splitSentences(tokens);
  return { tokens, sentenceStarts, paragraphStarts };
}

function startsUpperOrQuote(t: Token | undefined): boolean {
  if (!t) return true;
  const c = t.text.charAt(0);
  return c !== c.toLowerCase() || /^["'\u201c\u2018(\[_\d]/.test(c);
}

/** Sentence boundaries: paragraph ends, and . ! ? (with trailing closers) before a capital or quote. */
function splitSentences(tokens: Token[]): number[] {
  const starts: number[] = [];
  let sentence = -1;
  let inSentence = 0;
  let boundary = true;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (boundary || (i > 0 && tokens[i - 1]!.paragraph !== t.paragraph)) {
      sentence++;
      inSentence = 0;
      starts.push(i);
      boundary = false;
    }
    t.sentence = sentence;
    t.inSentence = inSentence++;
    if (SENTENCE_END.has(t.text)) {
      let j = i + 1;
      // A closer only counts when it touches the previous token: a spaced quote opens the next sentence.
      while (
        j < tokens.length &&
        CLOSERS.has(tokens[j]!.text) &&
        tokens[j]!.start === tokens[j - 1]!.end &&
        tokens[j]!.paragraph === t.paragraph
      )
        j++;
      const next = tokens[j];
      if (!next || next.paragraph !== t.paragraph || startsUpperOrQuote(next)) {
        // Closing quotes and brackets belong to the sentence they close.
        for (let k = i + 1; k < j; k++) {
          const c = tokens[k]!;
          c.sentence = sentence;
          c.inSentence = inSentence++;
        }
        i = j - 1;
        boundary = true;
      }
    }
  }
  starts.push(tokens.length);
  return starts;
}
