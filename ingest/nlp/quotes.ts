import { classifyWords, type Tokenized } from "./tokenizer.ts";

export type QuoteConvention = "double" | "single" | "dash";

export interface Quote {
  /** Token span, inclusive, with the quotation marks. */
  start: number;
  end: number;
  paragraph: number;
  /** True when this quote carries on an unclosed quote from the previous paragraph (same speaker). */
  continuation: boolean;
}

export interface QuoteScan {
  convention: QuoteConvention;
  quotes: Quote[];
  /** 1 for tokens inside a quote (marks included). */
  inQuote: Uint8Array;
}

const DOUBLE_OPEN = new Set(['"', "\u201c", "\u201e", "\u00ab"]);
const DOUBLE_CLOSE = new Set(['"', "\u201d", "\u00bb"]);
const SINGLE_MARKS = new Set(["'", "\u2018", "\u2019"]);
const DASHES = new Set(["\u2014", "\u2015", "--", "---", "\u2014\u2014"]);
const OPENING_PUNCT = new Set(["(", "[", "_", "\u2014", "--", "-", "\u2015"]);
const TRAILING_PUNCT = /^[,.;:!?)\]_\u2014\u2026-]/;
// Words that start with an apostrophe in dialect ("'tis", "'em"): the mark is not a quote.
const APOSTROPHE_WORDS = new Set(["tis", "twas", "em", "cause", "un", "ere", "im", "ow", "twere", "till", "n", "s"]);

const OPENS_DOUBLE = 1;
const CLOSES_DOUBLE = 2;
const SINGLE = 4;
const DASH = 8;

/** Which quotation marks each vocabulary word is (marks have no case, so lower-cased is as written). */
function markKinds(tok: Tokenized): Uint8Array {
  return classifyWords(
    tok,
    (w) => (DOUBLE_OPEN.has(w) ? OPENS_DOUBLE : 0) | (DOUBLE_CLOSE.has(w) ? CLOSES_DOUBLE : 0) | (SINGLE_MARKS.has(w) ? SINGLE : 0) | (DASHES.has(w) ? DASH : 0),
  );
}

function touchesPrev(tok: Tokenized, i: number, paraStart: number): boolean {
  return i > paraStart && tok.end[i - 1] === tok.start[i] && !OPENING_PUNCT.has(tok.text[i - 1]!);
}

function touchesNext(tok: Tokenized, i: number, paraEnd: number): boolean {
  return i + 1 < paraEnd && tok.start[i + 1] === tok.end[i] && !TRAILING_PUNCT.test(tok.text[i + 1]!);
}

/** Picks the book's dominant convention the way BookNLP does: double quotes unless others clearly dominate. */
export function detectConvention(tok: Tokenized): QuoteConvention {
  const { word, paragraphStarts } = tok;
  const marks = markKinds(tok);
  let double = 0;
  let single = 0;
  let dash = 0;
  for (let p = 0; p + 1 < paragraphStarts.length; p++) {
    const a = paragraphStarts[p]!;
    const b = paragraphStarts[p + 1]!;
    if (a < b && marks[word[a]!]! & DASH) dash++;
    for (let i = a; i < b; i++) {
      const m = marks[word[i]!]!;
      if (m === 0) continue;
      if (m & (OPENS_DOUBLE | CLOSES_DOUBLE)) double++;
      else if (m & SINGLE && !touchesPrev(tok, i, a) && touchesNext(tok, i, b)) {
        const next = tok.lower[i + 1]!;
        if (!APOSTROPHE_WORDS.has(next)) single += 2;
      }
    }
  }
  if (double >= single && double >= dash) return "double";
  if (single >= dash) return "single";
  return "dash";
}

export function findQuotes(tok: Tokenized, convention: QuoteConvention = detectConvention(tok)): QuoteScan {
  const { text, paragraphStarts } = tok;
  const marks = markKinds(tok);
  const quotes: Quote[] = [];
  let carry = false;
  for (let p = 0; p + 1 < paragraphStarts.length; p++) {
    const a = paragraphStarts[p]!;
    const b = paragraphStarts[p + 1]!;
    const before = quotes.length;
    if (convention === "dash") dashParagraph(tok, marks, a, b, p, quotes);
    else markParagraph(tok, marks, a, b, p, convention, quotes);
    const first = quotes[before];
    if (carry && first && first.start === a) first.continuation = true;
    const last = quotes[quotes.length - 1];
    // An unclosed quote ends at the paragraph; if the next paragraph reopens it, it is the same speech.
    carry = quotes.length > before && last !== undefined && last.end === b - 1 && !isCloser(text[b - 1]!, convention);
  }
  const inQuote = new Uint8Array(tok.count);
  for (const q of quotes) inQuote.fill(1, q.start, q.end + 1);
  return { convention, quotes, inQuote };
}

function isCloser(text: string, convention: QuoteConvention): boolean {
  return convention === "double" ? DOUBLE_CLOSE.has(text) : convention === "single" ? SINGLE_MARKS.has(text) : false;
}

function markParagraph(
  tok: Tokenized,
  marks: Uint8Array,
  a: number,
  b: number,
  paragraph: number,
  convention: "double" | "single",
  out: Quote[],
): void {
  let open = -1;
  // For single quotes a closing mark may also be a plural possessive ("the boys’ caps"): close at the
  // last candidate seen before the next opening mark.
  let lastCloser = -1;
  const push = (s: number, e: number) => out.push({ start: s, end: e, paragraph, continuation: false });
  for (let i = a; i < b; i++) {
    const m = marks[tok.word[i]!]!;
    if (m === 0) continue;
    const t = tok.text[i]!;
    if (convention === "double") {
      const canOpen = (m & OPENS_DOUBLE) !== 0;
      const canClose = (m & CLOSES_DOUBLE) !== 0;
      if (!canOpen && !canClose) continue;
      const prev = touchesPrev(tok, i, a);
      const next = touchesNext(tok, i, b);
      // Curly marks say what they are; a straight mark is read from the spacing around it.
      const role =
        canOpen && !canClose ? "open" : canClose && !canOpen ? "close" : prev && !next ? "close" : !prev && next ? "open" : "either";
      if (open < 0) {
        if (role !== "close") open = i;
      } else if (role !== "open") {
        push(open, i);
        open = -1;
      } else {
        // A new opening mark while a quote is open: the earlier one was never closed.
        push(open, i - 1);
        open = i;
      }
      continue;
    }
    if (!(m & SINGLE)) continue;
    const prev = touchesPrev(tok, i, a);
    const next = touchesNext(tok, i, b);
    const nextWord = i + 1 < b ? tok.lower[i + 1]! : "";
    const openLike = t !== "\u2019" && !prev && next && !APOSTROPHE_WORDS.has(nextWord);
    const closeLike = t !== "\u2018" && prev && !next;
    if (open < 0) {
      if (openLike) open = i;
    } else if (openLike && lastCloser >= 0) {
      push(open, lastCloser);
      open = i;
      lastCloser = -1;
    } else if (closeLike) lastCloser = i;
  }
  if (open >= 0) {
    push(open, lastCloser >= 0 ? lastCloser : b - 1);
  }
}

/** Em-dash dialogue: a paragraph opening with a dash is speech, broken by dash-fenced narration tags. */
function dashParagraph(tok: Tokenized, marks: Uint8Array, a: number, b: number, paragraph: number, out: Quote[]): void {
  const { text, word } = tok;
  if (a >= b || !(marks[word[a]!]! & DASH)) return;
  let start = a;
  let speaking = true;
  for (let i = a + 1; i < b; i++) {
    if (!(marks[word[i]!]! & DASH)) continue;
    if (speaking) {
      const after = text[i + 1] ?? "";
      // A dash followed by a lower-case word starts a narration tag ("— he said —").
      if (i + 1 < b && after === after.toLowerCase() && /\p{L}/u.test(after)) {
        out.push({ start, end: i - 1, paragraph, continuation: false });
        speaking = false;
      }
    } else {
      start = i;
      speaking = true;
    }
  }
  if (speaking) out.push({ start, end: b - 1, paragraph, continuation: false });
}
