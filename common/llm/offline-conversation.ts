/**
 * The offline provider's answers for a chat turn: the query rewrite, the in-character reply and the
 * rolling summary. Each reads the prompt that common/prompt/ built (chat.ts, rewrite.ts, summary.ts)
 * and composes its answer from the material in it (the reader's words, the character's own quoted
 * lines, the fenced passages, whose excerpt offline-excerpt.ts picks), so nothing in a reply is
 * invented: only punctuation is added, to show where a line or an excerpt was cut. Pure: no I/O.
 */
import {
  NO_SUMMARY_YET,
  OWN_LINES_HEADING,
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
import { closestFirst, passageExcerpt } from "./offline-excerpt.ts";
import { contentTerms, contentWords, firstWords, rankByNamesThenSimilarity, rankBySimilarity, salientWords, sentences, withoutMarkup, wordCount } from "./offline-text.ts";

/** Heading of the persona section listing the character's real lines, one quoted line each. */
export const OFFLINE_QUOTES_HEADING = "Things I have said:";
/** Words of the recent conversation added to the narrative query. */
export const REWRITE_CONTEXT_WORDS = 6;
/** Words a line needs to be said before a shorter one that shares as much with the message. */
const MIN_REPLY_WORDS = 4;

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

/** The quoted lines under OWN_LINES_HEADING: what the character has said up to the reader's position. */
function ownLines(system: string): string[] {
  const start = system.indexOf(`\n\n${OWN_LINES_HEADING}\n`);
  if (start === -1) return [];
  const lines: string[] = [];
  // The heading, then its one line of introduction, then one quoted line each.
  for (const line of system.slice(start + 2).split("\n").slice(2)) {
    const quoted = QUOTE_LINE.exec(line);
    if (!quoted) break;
    lines.push(quoted[1]!.trim());
  }
  return lines;
}

/**
 * Persona quotes and fenced passages of a system prompt built by buildChatSystemPrompt. The lines the
 * turn chose for the message (OWN_LINES_HEADING) come first; the persona's own quotes after them.
 */
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
  const chosen = ownLines(system);
  return {
    quotes: [...new Set([...chosen, ...personaQuotes(persona.split(`\n\n${OWN_LINES_HEADING}\n`)[0]!)])].map(withoutMarkup),
    passages: Array.from(passagesText.matchAll(fence), (m) => withoutMarkup(m[1]!).trim()).filter(Boolean),
  };
}

/**
 * A line that starts mid-sentence: the quote was cut at a dialogue tag ("and a library that…"),
 * so its first letter, after any punctuation, is lower-case. Caseless scripts never count as cut.
 */
export function startsMidSentence(line: string): boolean {
  return /^[\s\p{P}]*\p{Ll}/u.test(line);
}

/**
 * A line the character can say as it stands: it starts where a sentence starts and ends at a
 * sentence end (or the comma before the dialogue tag that ended it), not clipped ("…") or broken off ("—").
 */
export const sayable = (line: string) => !startsMidSentence(line) && /[.!?,]["”’)]*$/.test(line);

/**
 * The line to say, from the whole ones not said in the replies still in view (`earlier`): the one
 * naming the most of the people the message names, then sharing the most with it
 * (rankByNamesThenSimilarity). One line: the list holds a character's lines from all over the book,
 * and two of them said as one reply join scenes that have nothing to do with each other ("You are
 * dancing with the only handsome girl in the room. Do not you feel a great inclination, Miss Bennet,
 * to seize such an opportunity of dancing a reel?"). When none shares a word with the message, the one
 * closest to `context` (the passage retrieval found for the message and its rewritten queries, which
 * carry the conversation's recent words); failing that too, one picked by a hash of the message, so
 * unrelated messages do not all get the same line. A fragment is never said: a piece of a line reads
 * as something the character did not say.
 */
function chooseQuotes(message: string, context: string, quotes: readonly string[], earlier: readonly string[]): string[] {
  const fresh = quotes.filter((q) => sayable(q) && !earlier.some((reply) => reply.includes(sayLine(q))));
  if (fresh.length === 0) return [];
  const sharing = rankByNamesThenSimilarity(message, fresh);
  // A line of a word or two ("Mr. Darcy!") shares the message's one name and says nothing: a fuller one first.
  const full = sharing.filter((r) => wordCount(fresh[r.index]!) >= MIN_REPLY_WORDS);
  const ranked = full.length > 0 ? full : sharing;
  if (ranked.length > 0) return [fresh[ranked[0]!.index]!];
  const near = context ? rankBySimilarity(context, fresh) : [];
  if (near.length > 0) return [fresh[near[0]!.index]!];
  return [fresh[fnv1a(message) % fresh.length]!];
}

/**
 * A line as the character says it: the comma that led into its dialogue tag ("Friday is too soon,"
 * said Ottilie.) becomes the full stop the tag stood for, inside a quotation the line ends on too
 * (“…TO YOU,”’ said Alice), so the reply's sentence ends where the book's did.
 */
export function sayLine(line: string): string {
  return line.replace(/,(["”’»)]*)$/u, ".$1");
}

/**
 * The character answers with its own line that best answers the reader's message (chooseQuotes),
 * then cites the passage closest to it (retrieval's order when none shares a word) from where it adds
 * something the line did not say; the excerpt stands in a paragraph of its own after its heading, in plain
 * text (no "> " marker a reader would see literally), so the book's own quotation marks are not
 * nested inside the reply's. When every passage only repeats the lines, the lines stand alone.
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
  if (excerpt !== undefined) parts.push(`${said.length > 0 ? "As the book tells it" : "The book tells it this way"}:\n${excerpt}`);
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
