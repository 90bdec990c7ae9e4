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

// One alternation per token class; the sticky flag walks the text without slicing it.
// Words may carry inner apostrophes (o'clock, don't) and inner periods only as initials (U.S.).
const TOKEN_RE = new RegExp(
  [
    "(\\r?\\n(?:[ \\t\\f\\v\\u00a0]*\\r?\\n)+)", // 1: paragraph break (a blank line)
    "([\\s\\u00a0\\u2028\\u2029]+)", // 2: other whitespace
    "((?:[A-Za-z]\\.){2,})", // 3: initialisms such as U.S.
    "([\\p{L}\\p{M}\\p{N}]+(?:['\\u2019][\\p{L}\\p{M}]+)*)", // 4: word, with inner apostrophes
    "(-{2,}|\\.{2,}|\\u2026|[\\u2013\\u2014\\u2015]+)", // 5: dashes and ellipses
    "([^\\s])", // 6: any other single character
  ].join("|"),
  "uy",
);

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
  out.push({ text: text.slice(start, end), start, end, paragraph, sentence: 0, inSentence: 0 });
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
  TOKEN_RE.lastIndex = 0;
  let pos = 0;
  while (pos < text.length) {
    TOKEN_RE.lastIndex = pos;
    const m = TOKEN_RE.exec(text);
    if (!m) break;
    const start = pos;
    const end = pos + m[0].length;
    pos = end;
    if (m[1] !== undefined || (m[2] !== undefined && lineParagraphs && m[2].includes("\n"))) {
      if (paragraphHasTokens) {
        paragraph++;
        paragraphHasTokens = false;
      }
      continue;
    }
    if (m[2] !== undefined) continue;
    if (!paragraphHasTokens) {
      paragraphStarts.push(tokens.length);
      paragraphHasTokens = true;
    }
    if (m[4] !== undefined) {
      // Keep an abbreviation's period on the word ("Mr."), and a single capital's ("P." in "Annie P. Miller").
      const word = m[4];
      if (
        text.charCodeAt(end) === 46 &&
        (ABBREVIATIONS.has(word.toLowerCase()) || /^[A-Z]$/.test(word)) &&
        text.charCodeAt(end + 1) !== 46
      ) {
        pushToken(tokens, text, start, end + 1, paragraph);
        pos = end + 1;
        continue;
      }
      pushWord(tokens, text, start, end, paragraph);
      continue;
    }
    pushToken(tokens, text, start, end, paragraph);
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
