/**
 * A character's lines as a profile gets them: only the quotations the book confidently gives them, as
 * the book prints them, and a spread of those across the book. Pure: no I/O.
 */
import { endsInAbbreviation } from "../../common/abbreviations.ts";
import { countBelow } from "../../common/sorted.ts";
import { PREPOSITIONS } from "../nlp/lexicon.ts";
import { nameKey } from "./character-names.ts";
import type { ParsedBookNlp, QuoteRow } from "../nlp/booknlp-files.ts";
import type { TokenColumns } from "../nlp/token-columns.ts";

/** Enough lines that the offline reply finds one close to most questions; a model reads them all in passes 1 and 2. */
export const MAX_PROFILE_QUOTES = 60;
/**
 * Lines kept for what a character knows at a reader's position (api/chat/knowledge.ts): every line the
 * book confidently gives them, up to this many, spread across the book; a chat turn picks a few of
 * those before the reader's page. 400 lines of at most 300 characters bound a character's row at 120 KB.
 */
export const MAX_KNOWN_LINES = 400;
const MAX_QUOTE_CHARS = 300;

/** `count` items spread evenly from first to last, in order. */
export function spread<T>(items: readonly T[], count: number): T[] {
  if (items.length <= count) return [...items];
  if (count <= 0) return [];
  if (count === 1) return [items[0]!];
  return Array.from({ length: count }, (_, i) => items[Math.round((i * (items.length - 1)) / (count - 1))]!);
}

/**
 * At most `max` characters, cut after the last sentence that fits (else after the last whole word,
 * with an ellipsis), never inside a word: a line is said as the book prints it.
 */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = text.slice(0, max);
  // A full stop after "Mr" or an initial ends no sentence: a line cut there would end on a dangling "Mr.".
  const ends = [...head.matchAll(/[.!?…]["”’)]*(?=\s)/g)].filter((m) => !endsInAbbreviation(head.slice(0, m.index! + 1)));
  const sentenceEnd = Math.max(...ends.map((m) => m.index! + m[0].length), -1);
  if (sentenceEnd > max / 3) return head.slice(0, sentenceEnd);
  const wordEnd = head.lastIndexOf(" ", max - 1);
  return `${head.slice(0, wordEnd > 0 ? wordEnd : max - 1).replace(/[\s,;:—–-]+$/u, "")}…`;
}

const QUOTE_EDGES = /^[\s"“”‘’'«»]+|[\s"“”‘’'«»]+$/gu;

/**
 * A quotation inside the line closed again when stripping the line's own marks took its closing one
 * (‘But, it goes on “THEY ALL RETURNED FROM HIM TO YOU,”’ said Alice): double marks only, as a single
 * closing mark cannot be told from an apostrophe.
 */
function balanced(line: string): string {
  const count = (mark: string) => line.split(mark).length - 1;
  return line + "”".repeat(Math.max(0, count("“") - count("”"))) + "»".repeat(Math.max(0, count("«") - count("»")));
}

/** Tokens between a quotation and its dialogue tag's name: ”, said Mr. Darcy (the name starts 3 tokens on). */
const TAG_REACH = 4;
/**
 * Tokens between a name and the quotation it introduces, in the same sentence with no one else named
 * between: "At length Darcy spoke, and in a constrained manner said, “…”". On the twelve annotated
 * novels such tags give the right speaker as often as the close ones (58 of 61 at 20 tokens).
 */
const LEADING_TAG_REACH = 20;
/** Words between two pieces of one line: the dialogue tag that splits it (“…,” said she to Charlotte, with a smile, “…”). */
const MAX_TAG_WORDS = 25;
/** Verbs of a dialogue tag. */
const SPEECH_VERBS = new Set(
  "said says say cried replied answered asked added continued returned observed remarked exclaimed whispered resumed rejoined inquired enquired began muttered shouted called interrupted repeated retorted murmured".split(" "),
);
/** A he/she tag: it names no one, and counts only where the paragraph names the speaker too. */
const PRONOUN_TAG = /^(?:he|she)$/i;
/** A tag's words compared with a character's names: case, a leading article and spacing aside. */
const tagKey = (phrase: string) => nameKey(phrase).replace(/^(?:the|a|an)\s+/, "");

/**
 * Each speaker's lines as the book prints them, in book order: cut from the text by the quote's
 * token offsets (tokens re-joined leave seams such as "could n’t"), and only the lines whose
 * attribution is confident: a dialogue tag right by the quotation, with a verb of speech, that calls
 * the speaker by one of its names ("said Elizabeth", "Mr. Darcy replied", "said the stranger" when
 * the stranger is what the book calls him), or a he/she tag in a paragraph that names the speaker.
 * A speaker inferred from the turns of a conversation, a tag by a description the speaker is not
 * known by ("replied her uncle" given to Darcy) or a pronoun resolved across paragraphs is right
 * often enough to rank characters, not to put words in their mouth. The pieces of one line split by
 * its tag (“…,” said she, “…”) are joined into the line, without the tag. `names` holds each
 * cluster's name and aliases.
 */
export function taggedLines(parsed: ParsedBookNlp, tokens: TokenColumns, source: string, names: ReadonlyMap<number, readonly string[]>): Map<number, string[]> {
  const lines = new Map<number, string[]>();
  for (const line of bookLines(parsed, tokens, source, names)) {
    if (!line.sure) continue;
    const list = lines.get(line.charId) ?? [];
    list.push(line.text);
    lines.set(line.charId, list);
  }
  return lines;
}

/** A line as the book prints it, whoever the engine gives it to; `sure` when its attribution is confident (taggedLines). */
export interface BookLine {
  charId: number;
  text: string;
  /** Its quotations: more than one when its tag splits it. */
  quotes: QuoteRow[];
  sure: boolean;
}

export function bookLines(parsed: ParsedBookNlp, tokens: TokenColumns, source: string, names: ReadonlyMap<number, readonly string[]>): BookLine[] {
  const paragraphOf = (token: number) => (token >= 0 && token < tokens.paragraph.length ? tokens.paragraph[token]! : -1);
  const namedIn = new Set<string>();
  for (const e of parsed.entities) if (e.prop === "PROP") namedIn.add(`${e.coref}:${paragraphOf(e.start)}`);
  const textOf = (q: QuoteRow) => {
    const [from, to] = [tokens.start[q.quoteStart] ?? -1, tokens.end[q.quoteEnd] ?? -1];
    return from < 0 || to <= from ? "" : balanced(source.slice(from, to).replace(/\s+/g, " ").replace(QUOTE_EDGES, ""));
  };
  const wordsOf = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, k) => tokens.word[from + k]?.toLowerCase() ?? "");
  const people = parsed.entities.filter((e) => e.cat === "PER").map((e) => e.start).sort((a, b) => a - b);
  // The name leads the sentence that opens the quotation: no sentence end between, and anyone else
  // named between is named after a preposition ("Mr. Darcy, drawing near Elizabeth, said to her").
  const leads = (q: QuoteRow) => {
    if (wordsOf(q.mentionEnd + 1, q.quoteStart).some((w) => /^[.!?;]$/.test(w))) return false;
    for (let k = countBelow(people, q.mentionEnd + 1); k < people.length && people[k]! < q.quoteStart; k++) {
      if (!PREPOSITIONS.has(tokens.word[people[k]! - 1]?.toLowerCase() ?? "")) return false;
    }
    return true;
  };
  // A narration paragraph ending on a colon, comma or dash introduces the quotation opening the next one.
  const introduces = (q: QuoteRow) => {
    if (q.mentionStart < 0 || paragraphOf(q.mentionStart) !== paragraphOf(q.quoteStart) - 1 || q.quoteStart - q.mentionEnd > LEADING_TAG_REACH) return false;
    const last = wordsOf(q.mentionEnd + 1, q.quoteStart).filter((w) => !/^["“”‘’']+$/u.test(w)).at(-1) ?? "";
    return /^[:,—–-]+$/u.test(last);
  };
  // The speaker's mention right by the quotation, with a verb of speech between or next to it ("as she appeared" is no tag).
  const tagged = (q: QuoteRow) => {
    const after = q.mentionStart > q.quoteEnd;
    if (paragraphOf(q.mentionStart) !== paragraphOf(q.quoteStart) && (after || !introduces(q))) return false;
    const gap = after ? q.mentionStart - q.quoteEnd : q.quoteStart - q.mentionEnd;
    if (gap <= 0 || gap > (after ? TAG_REACH : LEADING_TAG_REACH)) return false;
    if (!after && gap > TAG_REACH && !leads(q)) return false;
    const around = after ? wordsOf(q.quoteEnd + 1, q.mentionEnd + 2) : wordsOf(q.mentionStart, q.quoteStart);
    // "Elizabeth replied that it was" reports speech; it tags no quotation.
    const from = after ? q.quoteEnd + 1 : q.mentionStart;
    return around.some((w, k) => SPEECH_VERBS.has(w) && tokens.word[from + k + 1]?.toLowerCase() !== "that");
  };
  const keys = new Map([...names].map(([id, list]) => [id, new Set(list.map(tagKey))]));
  const confident = (q: QuoteRow) => {
    if (!tagged(q)) return false;
    const phrase = q.mentionPhrase.trim();
    if (PRONOUN_TAG.test(phrase)) return namedIn.has(`${q.charId}:${paragraphOf(q.mentionStart)}`);
    return keys.get(q.charId!)?.has(tagKey(phrase)) ?? false;
  };
  const quotes = parsed.quotes.filter((q) => q.charId !== null && q.quoteStart >= 0).sort((a, b) => a.quoteStart - b.quoteStart);
  const lines: BookLine[] = [];
  for (let i = 0; i < quotes.length; i++) {
    const q = quotes[i]!;
    const parts = [q];
    let text = textOf(q);
    let sure = confident(q);
    // A line split by its tag: the quotations that follow in the paragraph, by the same speaker.
    const sameParagraph = (next: QuoteRow | undefined) => next !== undefined && paragraphOf(next.quoteStart) === paragraphOf(q.quoteStart);
    for (let next = quotes[i + 1]; sameParagraph(next) && next!.charId === q.charId; next = quotes[i + 1]) {
      const rest = textOf(next!);
      // A quotation ending without punctuation ('THAT you won't') is a line of its own.
      if (!rest || !/[,;:—–-]$|[.!?]$/u.test(text)) break;
      // The comma before the tag stands for a full stop when the tag ended the sentence (“…,” said Ottilie. “…”).
      const tag = source.slice(tokens.end[quotes[i]!.quoteEnd] ?? 0, tokens.start[next!.quoteStart] ?? 0);
      // More than a dialogue tag between them: narration, and the next quotation a word it quotes
      // (replied: “Yes, I agree,” and … he was spoken of now as the “Seeker,” …), not the line going on.
      if (tag.split(/\s+/).filter(Boolean).length > MAX_TAG_WORDS) break;
      const ended = /[.!?][\s“"‘«]*$/u.test(tag) && !/^\p{Ll}/u.test(rest);
      text = ended ? `${text.replace(/,$/, ".")} ${rest}` : `${text} ${rest}`;
      sure ||= confident(next!);
      parts.push(next!);
      i++;
    }
    // A sentence the paragraph's next quotation goes on with, given to someone else: only a piece of a line.
    const cut = /[,;—–-]$/u.test(text) && sameParagraph(quotes[i + 1]);
    if (!text || cut) continue;
    lines.push({ charId: q.charId!, text, quotes: parts, sure });
  }
  return lines;
}

/**
 * A long speech as lines of at most `max` characters, each of whole sentences: a sentence deep in a
 * speech ("Could you expect me to rejoice in the inferiority of your connections?") can answer a
 * question, which a line clipped to its first sentences never could. A single sentence longer than
 * `max` is clipped.
 */
export function speechPieces(text: string, max: number): string[] {
  if (text.length <= max) return [text];
  const ends = [...text.matchAll(/[.!?…]["”’)]*(?=\s)/g)]
    .map((m) => m.index! + m[0].length)
    .filter((end) => !endsInAbbreviation(text.slice(0, end).replace(/["”’)]+$/u, "")) && !insideQuotation(text.slice(0, end)));
  const sentences = [0, ...ends].map((from, k) => text.slice(from, ends[k] ?? text.length).trim()).filter(Boolean);
  const pieces: string[] = [];
  for (const sentence of sentences) {
    const last = pieces.at(-1);
    if (last !== undefined && last.length + 1 + sentence.length <= max) pieces[pieces.length - 1] = `${last} ${sentence}`;
    else pieces.push(sentence);
  }
  return pieces.map((piece) => clip(piece, max));
}

/**
 * Whether `head` leaves a quotation inside the line open (‘I opened my antechambers and they crowded
 * in.’ is one piece with what leads to it): an opening mark at a word's start, a closing one not
 * followed by a letter (so "don’t" is no closing mark).
 */
function insideQuotation(head: string): boolean {
  const opened = (head.match(/(?:^|[\s(—–-])[“‘]/gu) ?? []).length;
  const closed = (head.match(/[”’](?!\p{L})/gu) ?? []).length;
  return opened > closed;
}

/** Every line, as a chat turn may quote it: long speeches in pieces, at most MAX_KNOWN_LINES, spread across the book. */
export function knownLines(quotes: readonly string[]): string[] {
  return spread(
    quotes.flatMap((q) => speechPieces(q, MAX_QUOTE_CHARS)),
    MAX_KNOWN_LINES,
  );
}

/** Lines worth imitating: those of three words or more when there are enough of them. */
export function quoteSample(quotes: readonly string[]): string[] {
  const substantial = quotes.filter((q) => q.split(/\s+/).length >= 3);
  const pool = substantial.length >= Math.min(MAX_PROFILE_QUOTES, quotes.length) ? substantial : quotes;
  return spread(pool, MAX_PROFILE_QUOTES).map((q) => clip(q, MAX_QUOTE_CHARS));
}
