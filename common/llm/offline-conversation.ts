/**
 * The offline provider's answers for a chat turn: the query rewrite, the in-character reply and the
 * rolling summary. Each reads the prompt that common/prompt/chat.ts built and composes its answer from
 * the material in it (the reader's words, the character's own quoted lines, the fenced passages),
 * so nothing in a reply is invented: only punctuation is added, to show where a line or an excerpt
 * was cut. Pure: no I/O.
 */
import {
  NO_SUMMARY_YET,
  PASSAGE_CLOSE,
  PASSAGE_OPEN,
  PASSAGES_HEADING,
  PREFERENCES_HEADING,
  READER_LABEL,
  REWRITE_HISTORY_LABEL,
  REWRITE_MESSAGE_LABEL,
  SUMMARY_HEADING,
  SUMMARY_MAX_WORDS,
  SUMMARY_MESSAGES_LABEL,
  SUMMARY_PREVIOUS_LABEL,
} from "./prompt-format.ts";
import { fnv1a } from "../hash.ts";
import type { ChatMessage } from "./index.ts";
import {
  contentTerms,
  contentWords,
  firstWords,
  rankBySimilarity,
  salientWords,
  sentences,
  wordCount,
  wordSpans,
} from "./offline-text.ts";

/** Heading of the persona section listing the character's real lines, one quoted line each. */
export const OFFLINE_QUOTES_HEADING = "Things I have said:";
/** Words of the recent conversation added to the narrative query. */
export const REWRITE_CONTEXT_WORDS = 6;
/** Lines of the character quoted in one reply: the best match, and the runner-up when it shares words too. */
const MAX_REPLY_QUOTES = 2;
/** Length of the passage excerpt cited in a reply. */
export const REPLY_PASSAGE_WORDS = 60;

export const OFFLINE_NO_MATERIAL_REPLY =
  "(Offline provider: no language model is configured, and none of this character's lines and no passage of the book " +
  "were available for your message, so there is nothing to compose a reply from.)";

function lastUserContent(messages: readonly ChatMessage[]): string {
  return messages.findLast((m) => m.role === "user")?.content ?? "";
}

/** Text after `label` (on its own line) up to `end` or the end of the text; undefined when the label is absent. */
function section(text: string, label: string, end?: string): string | undefined {
  const start = text.startsWith(`${label}\n`) ? 0 : text.indexOf(`\n\n${label}\n`);
  if (start === -1) return undefined;
  const from = text.indexOf("\n", start === 0 ? 0 : start + 2) + 1;
  const to = end === undefined ? -1 : text.indexOf(`\n\n${end}\n`, from);
  return text.slice(from, to === -1 ? undefined : to);
}

interface TranscriptEntry {
  speaker: string;
  text: string;
}

/** "Speaker: text" lines; a line without a label continues the message before it. */
function readTranscript(text: string): TranscriptEntry[] {
  const entries: TranscriptEntry[] = [];
  for (const line of text.split("\n")) {
    const labelled = /^([^:\n]{1,60}): (.*)$/.exec(line);
    if (labelled) entries.push({ speaker: labelled[1]!, text: labelled[2]! });
    else if (entries.length > 0) entries[entries.length - 1]!.text += `\n${line}`;
    else if (line.trim()) entries.push({ speaker: "", text: line });
  }
  return entries;
}

// Query rewrite --------------------------------------------------------------------------------

/**
 * keyword_query: the reader's message without function words (the recent conversation's salient
 * words when the message has none, e.g. "Why?"); narrative_query: the message plus the salient
 * words of the recent turns, the latest turns winning ties.
 */
export function composeRewrite(messages: readonly ChatMessage[]): string {
  const content = lastUserContent(messages);
  const message = (section(content, REWRITE_MESSAGE_LABEL) ?? content).trim();
  const history = section(content, REWRITE_HISTORY_LABEL, REWRITE_MESSAGE_LABEL) ?? "";
  const recentText = readTranscript(history)
    .reverse()
    .map((e) => e.text)
    .join("\n");
  const recentWords = salientWords(recentText, REWRITE_CONTEXT_WORDS, new Set(contentTerms(message)));
  const keywords = contentWords(message);
  const keywordQuery = (keywords.length > 0 ? keywords : recentWords).join(" ") || message;
  const narrativeQuery = recentWords.length > 0 ? `${message} (${recentWords.join(", ")})` : message;
  return JSON.stringify({ narrative_query: narrativeQuery, keyword_query: keywordQuery });
}

// Chat reply -----------------------------------------------------------------------------------

interface ChatMaterial {
  quotes: string[];
  passages: string[];
}

const QUOTE_LINE = /^\s*(?:[-*•]\s*)?["“](.+)["”]\s*$/;
const QUOTED_SPAN = /["“]([^"”\n]{8,400})["”]/g;

/**
 * The character's lines: the quoted lines under OFFLINE_QUOTES_HEADING (the offline persona writes
 * them); for a persona written by a model, any quoted span in it.
 */
export function personaQuotes(persona: string): string[] {
  const lines = persona.split("\n");
  const heading = lines.findIndex((l) => l.trim() === OFFLINE_QUOTES_HEADING);
  if (heading === -1) return Array.from(persona.matchAll(QUOTED_SPAN), (m) => m[1]!.trim());
  const quotes: string[] = [];
  for (const line of lines.slice(heading + 1)) {
    const quoted = QUOTE_LINE.exec(line);
    if (!quoted) break;
    quotes.push(quoted[1]!.trim());
  }
  return quotes;
}

/** Persona quotes and fenced passages of a system prompt built by buildChatSystemPrompt. */
function readChatMaterial(system: string): ChatMaterial {
  const personaEnd = [PREFERENCES_HEADING, PASSAGES_HEADING]
    .map((heading) => system.indexOf(`\n\n${heading}\n`))
    .filter((i) => i !== -1);
  const persona = personaEnd.length > 0 ? system.slice(0, Math.min(...personaEnd)) : system;
  // The summary comes last and may quote anything the reader typed: passages are read only before it.
  const passagesStart = system.indexOf(`\n\n${PASSAGES_HEADING}\n`);
  const summaryStart = system.lastIndexOf(`\n\n${SUMMARY_HEADING}\n`);
  const passagesText =
    passagesStart === -1 ? "" : system.slice(passagesStart, summaryStart > passagesStart ? summaryStart : undefined);
  const fence = new RegExp(`${PASSAGE_OPEN}\\n([\\s\\S]*?)\\n${PASSAGE_CLOSE}`, "g");
  return {
    quotes: personaQuotes(persona),
    passages: Array.from(passagesText.matchAll(fence), (m) => m[1]!.trim()).filter(Boolean),
  };
}

/**
 * Scores of lines that start mid-sentence are multiplied by this: such a line is said only when it
 * is more than twice as close to the message as every whole one.
 */
const MID_SENTENCE_WEIGHT = 0.5;

/**
 * A line that starts mid-sentence: the quote was cut at a dialogue tag ("and a library that…"),
 * so its first letter, after any punctuation, is lower-case. Caseless scripts never count as cut.
 */
export function startsMidSentence(line: string): boolean {
  return /^[\s\p{P}]*\p{Ll}/u.test(line);
}

/**
 * The lines to say, from those not said in the replies still in view (`earlier`): the lines sharing
 * the most with the message (up to MAX_REPLY_QUOTES), lines that start mid-sentence weighed down by
 * MID_SENTENCE_WEIGHT. When none shares a word with the message, the one closest to `context` (the
 * passage retrieval found for the message and its rewritten queries, which carry the conversation's
 * recent words); failing that too, one picked by a hash of the message, from the whole lines when
 * there are any, so unrelated messages do not all get the same line.
 */
function chooseQuotes(message: string, context: string, quotes: readonly string[], earlier: readonly string[]): string[] {
  const fresh = quotes.filter((q) => !earlier.some((reply) => reply.includes(sayLine(q))));
  if (fresh.length === 0) return [];
  const weight = (quote: string) => (startsMidSentence(quote) ? MID_SENTENCE_WEIGHT : 1);
  const rank = (query: string) =>
    rankBySimilarity(query, fresh)
      .map((r) => ({ index: r.index, score: r.score * weight(fresh[r.index]!) }))
      .sort((a, b) => b.score - a.score || a.index - b.index);
  const ranked = rank(message);
  if (ranked.length > 0) return ranked.slice(0, MAX_REPLY_QUOTES).map((r) => fresh[r.index]!);
  const near = context ? rank(context) : [];
  if (near.length > 0) return [fresh[near[0]!.index]!];
  const whole = fresh.filter((q) => !startsMidSentence(q));
  const pool = whole.length > 0 ? whole : fresh;
  return [pool[fnv1a(message) % pool.length]!];
}

/**
 * A line as the character says it. A quote cut at a dialogue tag shows the cut at its edges: a line
 * that starts with a lower-case letter gets a leading ellipsis (one that starts with punctuation,
 * "—and so", already shows it), and the comma that led into the tag ("Someone's coming in," said
 * Jonah) becomes the full stop it stands for, so two lines said in a row do not run together.
 */
export function sayLine(line: string): string {
  const opened = /^\p{Ll}/u.test(line) ? `…${line}` : line;
  return opened.replace(/,$/, ".");
}

// Passage excerpt ------------------------------------------------------------------------------

/** Indices of `texts`: those sharing a word with the message, closest first, then the rest in their order. */
function closestFirst(message: string, texts: readonly string[]): number[] {
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
 * book tells next), else at the next closest.
 */
function passageExcerpt(message: string, passage: string, said: readonly string[]): string | undefined {
  const all = passageSentences(passage);
  const fresh = all.map((s) => !repeatsLines(s, said));
  for (const candidate of closestFirst(message, all.map((s) => s.text))) {
    const start = fresh.indexOf(true, candidate);
    if (start !== -1) return excerptAt(all, start, said);
  }
  return undefined;
}

/**
 * The character answers with its own lines closest to the reader's message, then cites the
 * passage closest to it (retrieval's order when none shares a word) from where it adds something
 * the lines did not say; the excerpt is set off as a block quote, so the book's own quotation marks
 * are not nested inside the reply's. When every passage only repeats the lines, the lines stand alone.
 */
export function composeChatReply(messages: readonly ChatMessage[]): string {
  const system = messages.find((m) => m.role === "system")?.content ?? "";
  const message = lastUserContent(messages);
  const { quotes, passages } = readChatMaterial(system);
  const earlier = messages.filter((m) => m.role === "assistant").map((m) => m.content);
  const context = passages[closestFirst(message, passages)[0] ?? -1] ?? "";
  const said = quotes.length > 0 ? chooseQuotes(message, context, quotes, earlier) : [];
  const parts: string[] = [];
  if (said.length > 0) parts.push(said.map(sayLine).join(" "));
  const excerpt = closestFirst(message, passages)
    .map((i) => passageExcerpt(message, passages[i]!, said))
    .find((e) => e !== undefined);
  if (excerpt !== undefined) parts.push(`${said.length > 0 ? "As the book tells it" : "The book tells it this way"}:\n> ${excerpt}`);
  return parts.length > 0 ? parts.join("\n\n") : OFFLINE_NO_MATERIAL_REPLY;
}

// Rolling summary ------------------------------------------------------------------------------

interface SummaryUnit {
  text: string;
  terms: string[];
  fromNewMessages: boolean;
  order: number;
}

/**
 * Extractive: the sentences of the old summary and of the messages leaving the window (attributed
 * to their speaker, repeats dropped) compete on how much they share the conversation's recurring
 * words; the best-ranked that fit in SUMMARY_MAX_WORDS are kept, in their original order. The best
 * sentence of the new messages always is, so the summary moves on even when the old one is full.
 */
export function composeSummary(messages: readonly ChatMessage[]): string {
  const content = lastUserContent(messages);
  const previous = (section(content, SUMMARY_PREVIOUS_LABEL, SUMMARY_MESSAGES_LABEL) ?? "").trim();
  const leaving = readTranscript(section(content, SUMMARY_MESSAGES_LABEL) ?? "");

  const units: SummaryUnit[] = [];
  const seen = new Set<string>();
  // Scored on the sentence alone: the speaker's label would favour whoever spoke most.
  const add = (sentence: string, text: string, fromNewMessages: boolean) => {
    if (seen.has(text)) return;
    seen.add(text);
    units.push({ text, terms: contentTerms(sentence), fromNewMessages, order: units.length });
  };
  if (previous !== NO_SUMMARY_YET) for (const s of sentences(previous)) add(s, s, false);
  for (const { speaker, text } of leaving) {
    const who = speaker === READER_LABEL ? "The reader" : speaker || "Someone";
    for (const s of sentences(text)) add(s, `${who} ${s.endsWith("?") ? "asked" : "said"}: “${s}”`, true);
  }

  const frequency = new Map<string, number>();
  for (const term of units.flatMap((u) => [...new Set(u.terms)])) frequency.set(term, (frequency.get(term) ?? 0) + 1);
  const score = (u: SummaryUnit) =>
    u.terms.length === 0 ? 0 : u.terms.reduce((sum, t) => sum + frequency.get(t)!, 0) / Math.sqrt(u.terms.length);
  const ranked = [...units].sort((a, b) => score(b) - score(a) || Number(b.fromNewMessages) - Number(a.fromNewMessages) || a.order - b.order);
  const firstNew = ranked.find((u) => u.fromNewMessages);

  const chosen = new Map<number, string>();
  let words = 0;
  for (const unit of firstNew ? [firstNew, ...ranked.filter((u) => u !== firstNew)] : ranked) {
    const length = wordCount(unit.text);
    if (words + length <= SUMMARY_MAX_WORDS) {
      chosen.set(unit.order, unit.text);
      words += length;
    } else {
      // Stopping at the first misfit keeps the summary the best-ranked sentences, not the best plus whatever small talk still fits.
      if (chosen.size === 0) chosen.set(unit.order, firstWords(unit.text, SUMMARY_MAX_WORDS));
      break;
    }
  }
  return [...chosen.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([, text]) => text)
    .join(" ");
}
