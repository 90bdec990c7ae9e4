/**
 * The offline provider's excerpt of a passage for a chat reply: the sentences of the passage that add
 * to the lines the character says, read with the book's quotation marks so that an excerpt never
 * leaves a quotation open or closes one it did not open. Pure: no I/O.
 */
import { firstWords, rankBySimilarity, sentences, wordCount, wordSpans } from "./offline-text.ts";

/** Length of the passage excerpt cited in a reply. */
export const REPLY_PASSAGE_WORDS = 60;

/** Indices of `texts`: those sharing a word with the message, closest first, then the rest in their order. */
export function closestFirst(message: string, texts: readonly string[]): number[] {
  const ranked = rankBySimilarity(message, texts).map((r) => r.index);
  return [...ranked, ...texts.map((_, i) => i).filter((i) => !ranked.includes(i))];
}

/** The mark closing each quotation mark that opens a quotation. */
const CLOSING_MARK: Readonly<Record<string, string>> = { '"': '"', "“": "”", "«": "»" };
/** The opening mark of each closing mark. */
const OPENING_MARK: Readonly<Record<string, string>> = { '"': '"', "”": "“", "»": "«" };
/** The end of a whole sentence, or of one already cut with an ellipsis. */
const SENTENCE_END = /[.!?…۔؟]$/u;
/** A sentence that ends where the book ends it, closing quotation marks and brackets included. */
const WHOLE_SENTENCE = /[.!?…۔؟]["”’»)\]]*$/u;
/** What may stand before a straight quotation mark that opens a quotation. */
const BEFORE_OPENING = /[\s([{—–-]/u;

interface QuoteScan {
  /** Quotations open at the end of the text, innermost last. */
  open: string[];
  /** The first closing mark that found no quotation open. */
  stray?: string;
  /** [from, to) character ranges of the text inside quotations, marks excluded. */
  speech: [number, number][];
}

/**
 * The quotations of `text`, given those open before it. A straight mark opens when it starts the
 * text or follows a space or an opening bracket or dash, and closes otherwise.
 */
function scanQuotes(text: string, openBefore: readonly string[]): QuoteScan {
  const open = [...openBefore];
  const speech: [number, number][] = [];
  let stray: string | undefined;
  let from = open.length > 0 ? 0 : -1;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (!(ch in CLOSING_MARK) && !(ch in OPENING_MARK)) continue;
    const opens = ch === '"' ? i === 0 || BEFORE_OPENING.test(text[i - 1]!) : ch in CLOSING_MARK;
    if (opens) {
      if (open.length === 0) from = i + 1;
      open.push(ch);
    } else if (open.length > 0) {
      open.pop();
      if (open.length === 0) speech.push([from, i]);
    } else stray ??= ch;
  }
  if (open.length > 0) speech.push([from, text.length]);
  return { open, stray, speech };
}

interface PassageSentence {
  text: string;
  /** Quotations open where the sentence starts, innermost last. */
  openBefore: string[];
  openAfter: string[];
  /** Where the sentence's words are spoken, as scanQuotes gives it. */
  speech: [number, number][];
}

/**
 * The passage's sentences with the quotations open around each, paragraph by paragraph. A
 * paragraph whose first quotation mark closes one (a passage cut in the middle of a speech) is
 * read as opening inside that quotation.
 */
function passageSentences(passage: string): PassageSentence[] {
  const result: PassageSentence[] = [];
  for (const paragraph of passage.split(/\n\s*\n/)) {
    const units = sentences(paragraph);
    const stray = scanQuotes(units.join(" "), []).stray;
    let open = stray === undefined ? [] : [OPENING_MARK[stray]!];
    for (const text of units) {
      const scan = scanQuotes(text, open);
      result.push({ text, openBefore: open, openAfter: scan.open, speech: scan.speech });
      open = scan.open;
    }
  }
  return result;
}

/** Words in a row a sentence must share with a line to count as repeating it there. */
const REPEAT_RUN = 3;
/** Words besides the repeated ones that still leave a sentence a repeat: a dialogue tag ("said Mr. Crane"). */
const TAG_WORDS = 3;

/**
 * Whether the sentence repeats lines the reply already says. A word counts as repeated when it lies
 * in a run of REPEAT_RUN words (a shorter sentence: all of it) found in one of the lines, or in a
 * quoted stretch of the sentence found whole in one. The sentence repeats them when at least half
 * its words do, or all but a dialogue tag: `"Please?" said Pim.` repeats "Can I wind it? Please?",
 * while a sentence that merely shares a name, or adds a gesture to a repeated word, does not.
 */
function repeatsLines(sentence: PassageSentence, said: readonly string[]): boolean {
  const words = wordSpans(sentence.text);
  if (words.length === 0) return true;
  const lines = said.map((line) => ` ${wordSpans(line).map((w) => w.normalized).join(" ")} `);
  const inLine = (from: number, to: number) => {
    const stretch = words.slice(from, to).map((w) => w.normalized);
    return stretch.length > 0 && lines.some((line) => line.includes(` ${stretch.join(" ")} `));
  };
  const repeated = new Array<boolean>(words.length).fill(false);
  const run = Math.min(REPEAT_RUN, words.length);
  for (let i = 0; i + run <= words.length; i++) if (inLine(i, i + run)) repeated.fill(true, i, i + run);
  for (const [from, to] of sentence.speech) {
    const first = words.findIndex((w) => w.start >= from);
    const end = words.findIndex((w) => w.end > to);
    const last = end === -1 ? words.length : end;
    if (first !== -1 && inLine(first, last)) repeated.fill(true, first, last);
  }
  const count = repeated.filter(Boolean).length;
  return count > 0 && (count * 2 >= words.length || words.length - count <= TAG_WORDS);
}

/**
 * The excerpt starting at sentence `start`: the sentences up to REPLY_PASSAGE_WORDS (stopping
 * before one that repeats the reply's lines), ended where no quotation is left open when that is
 * possible. A quotation open at either edge is opened or closed with its own marks (after an
 * ellipsis when the excerpt stops mid-sentence), so the excerpt reads balanced.
 */
function excerptAt(all: readonly PassageSentence[], start: number, said: readonly string[]): string {
  let end = start;
  let words = wordCount(all[start]!.text);
  while (end + 1 < all.length && !repeatsLines(all[end + 1]!, said)) {
    const next = wordCount(all[end + 1]!.text);
    if (words + next > REPLY_PASSAGE_WORDS) break;
    end++;
    words += next;
  }
  let closed = end;
  while (closed > start && all[closed]!.openAfter.length > 0) closed--;
  if (all[closed]!.openAfter.length === 0) end = closed;
  // A passage is a chunk of the book and may stop inside a sentence: the excerpt stops at the last whole one.
  while (end > start && !WHOLE_SENTENCE.test(all[end]!.text)) end--;
  const openBefore = all[start]!.openBefore;
  // Whole sentences only: one sentence longer than the budget is cut only past twice the budget.
  const body = firstWords(all.slice(start, end + 1).map((s) => s.text).join(" "), end > start ? Infinity : 2 * REPLY_PASSAGE_WORDS);
  const stillOpen = scanQuotes(body, openBefore).open;
  const cut = !SENTENCE_END.test(body) && (stillOpen.length > 0 || !WHOLE_SENTENCE.test(body)) ? "…" : "";
  return `${openBefore.join("")}${body}${cut}${stillOpen.map((mark) => CLOSING_MARK[mark]!).reverse().join("")}`;
}

/**
 * The excerpt of the passage that best adds to the reply, or undefined when every sentence repeats
 * the lines it says. It starts at the passage sentence closest to the message (else the first);
 * when that sentence repeats the reply's lines, at the first one after it that does not (what the
 * book tells next), else at the next closest; one that cannot end at a sentence end is skipped.
 */
export function passageExcerpt(message: string, passage: string, said: readonly string[]): string | undefined {
  const all = passageSentences(passage);
  const fresh = all.map((s) => !repeatsLines(s, said));
  for (const candidate of closestFirst(message, all.map((s) => s.text))) {
    const start = fresh.indexOf(true, candidate);
    if (start === -1) continue;
    const excerpt = excerptAt(all, start, said);
    // A heading ("THE END") or a sentence the passage stops inside (": “") is no excerpt: try the next closest.
    if (WHOLE_SENTENCE.test(excerpt) && !/…["”’»)\]]*$/u.test(excerpt)) return excerpt;
  }
  return undefined;
}
