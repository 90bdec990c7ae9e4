/**
 * The offline provider's answers to the ingestion passes (common/prompt/character.ts): the
 * profile (pass 1), the persona prompt (pass 2) and character discovery for books BookNLP cannot
 * read. Without a model nothing can be inferred, so these only count and quote: every word in a
 * profile or persona is the book's own, a count of it, or a plain statement that the offline
 * provider cannot know. Pure: no I/O.
 */
import type { CharacterProfile, Discovery, DiscoveryInput, ExtractionInput, PersonaInput } from "./prompt-format.ts";
import { normalizeText } from "../text-index/tokenize.ts";
import { contentTerms, isStopWord, rankedWords, wordCount, wordSpans, type WordSpan } from "./offline-text.ts";
import { OFFLINE_QUOTES_HEADING } from "./offline-conversation.ts";

/** What a profile field says when the text alone cannot tell. */
export const NOT_STATED = "Not stated in the text the offline provider sees";
/** Relationship type of a co-occurring character when no relation word stands next to the name. */
export const APPEARS_WITH = "appears with";
export const MAX_RELATIONSHIPS = 10;
export const MAX_THEMES = 6;
/** A word or phrase must come back at least this often to count as recurring. */
const MIN_RECURRENCE = 2;
const MAX_RECURRING_WORDS = 6;
const MAX_RECURRING_PHRASES = 4;
/** Words either side of a name searched for a relation word ("her sister Jane", "Jane, my sister"). */
const RELATION_WINDOW = 3;
export const MAX_PERSONA_QUOTES = 60;
/** A discovered name must be tagged as a speaker this often, so one stray capital is not a character. */
export const MIN_SPEAKER_TAGS = 2;
export const MAX_DISCOVERED_CHARACTERS = 30;
/** As many as the discovery prompt asks a model for. */
const MAX_DISCOVERED_QUOTES = 5;

const folded = (words: string) => new Set(words.split(" ").map(normalizeText));

const RELATION_WORDS = folded(
  [
    "mother father sister brother wife husband daughter son aunt uncle cousin niece nephew grandmother grandfather",
    "granddaughter grandson friend lover sweetheart fiancé fiancée betrothed suitor rival enemy master mistress servant",
    "maid guardian ward companion mama papa",
    "ماں والدہ امی باپ والد ابا بہن بھائی بیوی شوہر خاوند بیٹی بیٹا چچا چچی ماموں ممانی خالہ خالو پھوپھی دادا دادی نانا نانی",
    "دوست سہیلی منگیتر دشمن نوکر نوکرانی ملازم",
  ].join(" "),
);

/** Verbs of dialogue tags ("said Alice", "احمد نے کہا"), folded. */
const SPEECH_VERBS = folded(
  [
    "said says asked replied answered cried shouted whispered exclaimed muttered called continued added began",
    "کہا کہتا کہتی کہنے بولا بولی بولے پوچھا پوچھی پکارا پکاری چلایا چلائی",
  ].join(" "),
);
/** Particles between an Urdu speaker and the verb ("احمد نے کہا"). */
const SPEAKER_PARTICLES = folded("نے");
/** Titles that may open a name ("Mr. Darcy"); never a name on their own. */
const TITLES = folded("mr mrs miss ms dr sir lady lord captain colonel madame monsieur");
const ARTICLES = folded("the");

/** Courtesy and address forms whose presence says something about register, folded, as phrases. */
const ADDRESS_FORMS = [
  "sir",
  "madam",
  "my lord",
  "my lady",
  "my dear",
  "pray",
  "indeed",
  "i beg",
  "i assure you",
  "آپ",
  "تم",
  "جناب",
  "حضور",
  "صاحب",
].map((phrase) => phrase.split(" ").map(normalizeText).join(" "));

function distinct(texts: readonly string[]): string[] {
  return [...new Set(texts.map((t) => t.replace(/\s+/g, " ").trim()).filter(Boolean))];
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : Math.round((sorted[mid - 1]! + sorted[mid]!) / 2);
}

const normalizedWords = (text: string) => wordSpans(text).map((w) => w.normalized);

/** Word sequences of 2–3 words (two of them content words) found in MIN_RECURRENCE or more lines. */
function recurringPhrases(quotes: readonly string[]): { phrase: string; count: number }[] {
  const lines = new Map<string, number>();
  for (const quote of quotes) {
    const words = normalizedWords(quote);
    const inThisLine = new Set<string>();
    for (let n = 3; n >= 2; n--) {
      for (let i = 0; i + n <= words.length; i++) {
        const gram = words.slice(i, i + n);
        if (gram.filter((w) => !isStopWord(w)).length < 2) continue;
        inThisLine.add(gram.join(" "));
      }
    }
    for (const phrase of inThisLine) lines.set(phrase, (lines.get(phrase) ?? 0) + 1);
  }
  const ranked = [...lines.entries()]
    .filter(([, count]) => count >= MIN_RECURRENCE)
    .map(([phrase, count]) => ({ phrase, count }))
    .sort((a, b) => b.count - a.count || b.phrase.split(" ").length - a.phrase.split(" ").length);
  const kept: { phrase: string; count: number }[] = [];
  for (const candidate of ranked) {
    // "poor dear child" found as often as "poor dear" makes the shorter one redundant.
    if (kept.some((k) => k.count === candidate.count && ` ${k.phrase} `.includes(` ${candidate.phrase} `))) continue;
    kept.push(candidate);
    if (kept.length === MAX_RECURRING_PHRASES) break;
  }
  return kept;
}

const listQuoted = (items: readonly { text: string; count: number }[]) => items.map((i) => `"${i.text}" (${i.count})`).join(", ");

/** How the character speaks, measured on its own lines. */
function describeVoice(quotes: readonly string[]): string {
  if (quotes.length === 0) return `${NOT_STATED}: the book gives this character no lines of its own.`;
  const n = quotes.length;
  const lengths = quotes.map(wordCount);
  const typical = median(lengths);
  const size = typical <= 8 ? "mostly short lines" : typical <= 20 ? "mostly medium-length lines" : "mostly long lines";
  const questions = quotes.filter((q) => /[?؟]/.test(q)).length;
  const exclamations = quotes.filter((q) => q.includes("!")).length;
  const parts = [
    `Measured on ${n} line${n === 1 ? "" : "s"} the book gives this character: ${size} (median ${typical} words)`,
    `${questions} of ${n} ask a question and ${exclamations} of ${n} exclaim`,
  ];
  const latin = quotes.filter((q) => /\p{Script=Latin}/u.test(q));
  if (latin.length > 0) {
    const contracted = latin.filter((q) => /\p{L}['’](?:t|re|ve|ll|m|d)\b/iu.test(q)).length;
    parts.push(`contractions in ${contracted} of ${latin.length}`);
  }
  const sentences = [`${parts.join("; ")}.`];
  const words = rankedWords(quotes.join("\n"))
    .filter((w) => w.count >= MIN_RECURRENCE)
    .slice(0, MAX_RECURRING_WORDS);
  if (words.length > 0) sentences.push(`Recurring words: ${listQuoted(words.map((w) => ({ text: w.surface, count: w.count })))}.`);
  const phrases = recurringPhrases(quotes);
  if (phrases.length > 0) sentences.push(`Recurring phrases: ${listQuoted(phrases.map((p) => ({ text: p.phrase, count: p.count })))}.`);
  const padded = quotes.map((q) => ` ${normalizedWords(q).join(" ")} `);
  const address = ADDRESS_FORMS.map((form) => ({ text: form, count: padded.filter((q) => q.includes(` ${form} `)).length })).filter(
    (a) => a.count > 0,
  );
  if (address.length > 0) sentences.push(`Address and courtesy words: ${listQuoted(address)}.`);
  return sentences.join(" ");
}

/** The word sequences that stand for a character in running text: the full name and its first non-title word. */
function nameKeys(name: string): string[][] {
  const words = normalizedWords(name);
  const distinctive = words.find((w) => !TITLES.has(w));
  const keys = [words];
  if (distinctive && words.length > 1) keys.push([distinctive]);
  return keys.filter((k) => k.length > 0);
}

/** The relation word most often within RELATION_WINDOW words of the name, as the text spells it. */
function relationNear(name: string, texts: readonly string[]): string | undefined {
  const found = new Map<string, { surface: string; count: number }>();
  const keys = nameKeys(name);
  for (const text of texts) {
    const spans = wordSpans(text);
    for (let i = 0; i < spans.length; i++) {
      const key = keys.find((k) => k.every((w, j) => spans[i + j]?.normalized === w));
      if (!key) continue;
      const window = [...spans.slice(Math.max(0, i - RELATION_WINDOW), i), ...spans.slice(i + key.length, i + key.length + RELATION_WINDOW)];
      for (const word of window) {
        if (!RELATION_WORDS.has(word.normalized)) continue;
        const entry = found.get(word.normalized) ?? { surface: word.surface.toLowerCase(), count: 0 };
        entry.count++;
        found.set(word.normalized, entry);
      }
    }
  }
  return [...found.values()].sort((a, b) => b.count - a.count)[0]?.surface;
}

/**
 * Pass 1 without a model: voice from the character's own lines, relationships from the characters
 * named near it (typed by a relation word next to the name, else "appears with"), themes from the
 * content words that recur in its lines and passages. Psychology and motivations say they are not
 * known, with the counts the text does give.
 */
export function composeProfile(input: ExtractionInput): CharacterProfile {
  const { character, cooccurring, passages } = input;
  const quotes = distinct(character.quotes);
  const ownNames = new Set([character.name, ...character.aliases].map((n) => normalizedWords(n).join(" ")));
  const texts = [...quotes, ...passages];

  const relationships = cooccurring
    .filter((c) => c.name.trim() && !ownNames.has(normalizedWords(c.name).join(" ")))
    .slice(0, MAX_RELATIONSHIPS)
    .map((c) => ({ name: c.name.trim(), type: relationNear(c.name, texts) ?? APPEARS_WITH }));

  const names = [character.name, ...character.aliases, ...cooccurring.map((c) => c.name)];
  const excluded = new Set([...names.flatMap((n) => contentTerms(n)), ...[...SPEECH_VERBS].flatMap((v) => contentTerms(v))]);
  const themes = rankedWords(texts.join("\n"), excluded)
    .filter((w) => w.count >= MIN_RECURRENCE)
    .slice(0, MAX_THEMES)
    .map((w) => w.surface.toLowerCase());

  return {
    psychology:
      `${NOT_STATED}: without a language model, only counts are known. ` +
      `The book names ${character.name} ${character.mentionCount} times and gives ${character.quoteCount} lines of speech.`,
    voice: describeVoice(quotes),
    motivations: [NOT_STATED],
    relationships,
    signatureThemes: themes.length > 0 ? themes : [`${NOT_STATED}: no content word recurs in this character's lines and passages`],
  };
}

/** Whether a profile field carries information (a model-written profile always does). */
const known = (text: string) => !text.startsWith(NOT_STATED);

/**
 * Pass 2 without a model: the profile's known fields in the first person, then the character's real
 * lines under OFFLINE_QUOTES_HEADING, one per line in quotation marks, where the offline chat reply
 * finds them again.
 */
export function composePersona(input: PersonaInput): string {
  const { book, name, profile } = input;
  const quotes = distinct(input.quotes).slice(0, MAX_PERSONA_QUOTES);
  const lines = [
    `I am ${name}, a character in "${book.title}"${book.author ? ` by ${book.author}` : ""}.`,
    "(Offline persona: composed without a language model from the book's own text. It holds only what the book shows: " +
      "my own lines, how I speak, and the people and things around me.)",
    "",
  ];
  if (known(profile.voice)) lines.push(`How I speak: ${profile.voice}`);
  if (known(profile.psychology)) lines.push(`Who I am: ${profile.psychology}`);
  const motivations = profile.motivations.filter(known);
  if (motivations.length > 0) lines.push(`What I want: ${motivations.join("; ")}.`);
  if (profile.relationships.length > 0) {
    lines.push(`The people in my story: ${profile.relationships.map((r) => `${r.name} (${r.type})`).join(", ")}.`);
  }
  const themes = profile.signatureThemes.filter(known);
  if (themes.length > 0) lines.push(`What I keep coming back to: ${themes.join(", ")}.`);
  lines.push(
    "",
    "I answer in the first person, as myself and in my own words. I draw on my lines below and on the passages of the book " +
      "I am shown, and I do not make up events the book does not tell.",
  );
  if (quotes.length > 0) lines.push("", OFFLINE_QUOTES_HEADING, ...quotes.map((q) => `“${q}”`));
  else lines.push("", "The book gives me no lines of my own.");
  return lines.join("\n");
}

// Discovery ------------------------------------------------------------------------------------

const hasCase = (word: string) => word.toLowerCase() !== word.toUpperCase();
/** In cased scripts a name is capitalised; in Arabic-script (and other caseless) text any content word may be one. */
const nameLike = (w: WordSpan) => !isStopWord(w.normalized) && /\p{L}/u.test(w.surface) && (!hasCase(w.surface) || /^\p{Lu}/u.test(w.surface));

/** Only spaces, or the full stop of an abbreviated title, between two words of one name. */
function adjacent(text: string, left: WordSpan, right: WordSpan): boolean {
  const gap = text.slice(left.end, right.start);
  return /^\s+$/.test(gap) || (TITLES.has(left.normalized) && /^\.\s+$/.test(gap));
}

/** Longest name taken from a dialogue tag, titles included ("Lady Catherine de Bourgh" is cut to three words). */
const MAX_NAME_WORDS = 3;

/** The name before the verb: "Alice said", "Mr. Darcy said", "احمد نے کہا" (one word in caseless scripts). */
function nameBefore(text: string, spans: readonly WordSpan[], verb: number): WordSpan[] {
  let i = verb - 1;
  if (i >= 0 && SPEAKER_PARTICLES.has(spans[i]!.normalized)) i--;
  const name: WordSpan[] = [];
  for (; i >= 0 && name.length < MAX_NAME_WORDS; i--) {
    const word = spans[i]!;
    if (!adjacent(text, word, spans[i + 1]!)) break;
    if (nameLike(word) || (name.length > 0 && TITLES.has(word.normalized))) name.unshift(word);
    else break;
    if (!hasCase(word.surface)) break;
  }
  return name;
}

/** The name after the verb: "said Alice", "said the Hatter", "said Mr. Darcy" (cased scripts only). */
function nameAfter(text: string, spans: readonly WordSpan[], verb: number): WordSpan[] {
  let j = verb + 1;
  if (j < spans.length && ARTICLES.has(spans[j]!.normalized)) j++;
  const name: WordSpan[] = [];
  for (; j < spans.length && name.length < MAX_NAME_WORDS; j++) {
    const word = spans[j]!;
    if (!/^\p{Lu}/u.test(word.surface) || !(nameLike(word) || TITLES.has(word.normalized))) break;
    if (!adjacent(text, spans[j - 1]!, word)) break;
    name.push(word);
  }
  while (name.length > 0 && TITLES.has(name[name.length - 1]!.normalized)) name.pop();
  return name;
}

/** The speaker of the dialogue tag at `verb`, or undefined when none is named there. */
function speakerAt(text: string, spans: readonly WordSpan[], verb: number): WordSpan[] | undefined {
  const before = nameBefore(text, spans, verb);
  if (before.length > 0) return before;
  const after = nameAfter(text, spans, verb);
  return after.length > 0 ? after : undefined;
}

/**
 * Quoted speech within one paragraph: “…”, "…", «…», and ‘…’ whose closing mark is not an
 * apostrophe (an apostrophe is followed by a letter: ‘I don’t know’).
 */
const QUOTED = /“([^”]{1,600})”|"([^"]{1,600})"|«([^»]{1,600})»|‘((?:[^‘’]|’(?=\p{L})){1,600})’/gu;
/** Urdu direct speech is often introduced by a colon or کہ after the verb instead of quotation marks. */
const INTRODUCED = /^\s*(?::|کہ)\s*([^\n۔.!?؟]+[۔.!?؟]?)/u;

/** The line a tag attributes: the quoted span nearest the verb, else speech introduced after it. */
function quoteFor(paragraph: string, verb: WordSpan): string | undefined {
  let best: { text: string; distance: number } | undefined;
  for (const m of paragraph.matchAll(QUOTED)) {
    const start = m.index;
    const end = start + m[0].length;
    const distance = end <= verb.start ? verb.start - end : start >= verb.end ? start - verb.end : 0;
    if (!best || distance < best.distance) best = { text: (m[1] ?? m[2] ?? m[3] ?? m[4])!, distance };
  }
  const text = best?.text ?? INTRODUCED.exec(paragraph.slice(verb.end))?.[1];
  return text?.replace(/\s+/g, " ").trim() || undefined;
}

/**
 * Discovery without a model: a character is a name tagged as a speaker (next to a speech verb,
 * with Urdu's نے skipped) at least MIN_SPEAKER_TAGS times across the samples; its quotes are the
 * lines those tags attribute. Names are written as first found; aliases are not guessed. A book
 * whose dialogue carries no tags yields no characters, which is the honest answer.
 */
export function composeDiscovery(input: DiscoveryInput): Discovery {
  const found = new Map<string, { name: string; tags: number; first: number; quotes: string[] }>();
  let order = 0;
  for (const sample of input.samples) {
    for (const paragraph of sample.split(/\n\s*\n/)) {
      const spans = wordSpans(paragraph);
      spans.forEach((word, index) => {
        if (!SPEECH_VERBS.has(word.normalized)) return;
        const speaker = speakerAt(paragraph, spans, index);
        if (!speaker) return;
        const key = speaker.map((w) => w.normalized).join(" ");
        const entry = found.get(key) ?? {
          name: paragraph.slice(speaker[0]!.start, speaker[speaker.length - 1]!.end).replace(/\s+/g, " "),
          tags: 0,
          first: order++,
          quotes: [],
        };
        entry.tags++;
        const quote = quoteFor(paragraph, word);
        if (quote && !entry.quotes.includes(quote) && entry.quotes.length < MAX_DISCOVERED_QUOTES) entry.quotes.push(quote);
        found.set(key, entry);
      });
    }
  }
  const characters = [...found.values()]
    .filter((c) => c.tags >= MIN_SPEAKER_TAGS)
    .sort((a, b) => b.tags - a.tags || a.first - b.first)
    .slice(0, MAX_DISCOVERED_CHARACTERS)
    .map(({ name, quotes }) => ({ name, aliases: [], quotes }));
  return { characters };
}
