import {
  COMPASS_POINTS,
  CREDIT_LABELS,
  CREDIT_VERBS,
  DEMONYMS,
  GENDERED_NOUNS,
  GIVEN_NAMES,
  HONORIFICS,
  INTERJECTIONS,
  NAME_PARTICLES,
  NOT_NAMES,
  PLACE_HEADS,
  PLACE_PREPOSITIONS,
  SPEECH_VERBS,
  THOROUGHFARES,
} from "./lexicon.ts";
import { classifyWords, type Tokenized } from "./tokenizer.ts";

/** A run of tokens that names someone: "Miss Elizabeth Bennet", "Darcy", "the Mock Turtle". */
export interface NameMention {
  /** Inclusive token span (includes the title and a leading "the"). */
  start: number;
  end: number;
  /** Lower-cased title without its period ("mr", "miss"), if any. */
  title: string | undefined;
  /** The name words, original case, without title or article. */
  parts: string[];
  /** "the Hatter": a capitalised common noun used as a name. */
  definite: boolean;
  inQuote: boolean;
  /** Right after "in", "at", "near"…: a vote for a place. */
  placeContext: boolean;
  /** Cluster id, filled by clustering; -1 while unassigned or for non-persons. */
  char: number;
}

export interface PlaceMention {
  start: number;
  end: number;
}

export interface CapitalStats {
  /** Capitalised occurrences not at a sentence start, by lower-cased word. */
  capMid: Map<string, number>;
  /** All-lower-case occurrences, by word. */
  lower: Map<string, number>;
  /** Capitalised occurrences right after "in", "at", "near"…, by lower-cased word. */
  afterPlacePreposition: Map<string, number>;
  /** Capitalised occurrences right before or after a speech verb ("said Pooh"), by lower-cased word. */
  besideSpeechVerb: Map<string, number>;
  /** SHAPE_* bits of each vocabulary word (Tokenized.vocab), so no token needs a regex. */
  shape: Uint8Array;
}

/** Starts with a letter-bearing word character (not ASCII punctuation or a digit) and has a letter. */
const SHAPE_WORD = 1;
const SHAPE_UPPER_START = 2;
const SHAPE_CAPITALISED = 4;
/** An initial such as "P.". */
const SHAPE_INITIAL = 8;
/** Entirely lower case. */
const SHAPE_LOWER = 16;

const LETTER = /\p{L}/u;
const UPPER_START = /^\p{Lu}/u;
const HAS_LOWER = /\p{Ll}/u;
const INITIAL = /^\p{Lu}\.$/u;
const OPENERS = new Set(['"', "'", "\u201c", "\u2018", "(", "[", "_", "\u2014", "--", "-", ":"]);

// Share of a word's capitalised uses after "in"/"at"/… that makes it a place.
const PLACE_WORD_SHARE = 0.3;
// Dialogue tags that make an exclamation a character's name ("said Pooh").
const TAGGED_INTERJECTION_MIN = 3;
// Titles that never stand alone as a name.
const SHORT_TITLES = new Set(["mr", "mrs", "ms", "miss", "m", "mme", "mlle", "dr", "st", "rev", "capt", "col", "gen", "lieut", "lt", "sgt", "prof"]);

const add = (m: Map<string, number>, k: string, n = 1) => m.set(k, (m.get(k) ?? 0) + n);

function isCapitalised(word: string): boolean {
  return UPPER_START.test(word) && (word.length === 1 || HAS_LOWER.test(word) || INITIAL.test(word));
}

function wordShapes(vocab: string[], vocabLower: string[]): Uint8Array {
  const shape = new Uint8Array(vocab.length);
  for (let id = 0; id < vocab.length; id++) {
    const w = vocab[id]!;
    const c = w.charCodeAt(0);
    let s = 0;
    // ASCII punctuation and digits are the commonest non-words: skip them without a regex.
    if (!(c < 65 || (c > 90 && c < 97) || (c > 122 && c < 128)) && LETTER.test(w)) s |= SHAPE_WORD;
    if (UPPER_START.test(w)) s |= SHAPE_UPPER_START;
    if (isCapitalised(w)) s |= SHAPE_CAPITALISED;
    if (INITIAL.test(w)) s |= SHAPE_INITIAL;
    if (w === vocabLower[id]) s |= SHAPE_LOWER;
    shape[id] = s;
  }
  return shape;
}

/** A token opens a sentence (or a quoted sentence), where capitals say little about names. */
function isSentenceInitial(tok: Tokenized, i: number, inQuote: Uint8Array): boolean {
  const { text, sentence, inSentence } = tok;
  if (inSentence[i] === 0) return true;
  let j = i - 1;
  while (j >= 0 && OPENERS.has(text[j]!) && sentence[j] === sentence[i]) {
    if (inSentence[j] === 0) return true;
    // The first word inside a quote starts a quoted sentence.
    if (inQuote[j] && (j === 0 || !inQuote[j - 1])) return true;
    j--;
  }
  return false;
}

export function capitalStats(tok: Tokenized, inQuote: Uint8Array): CapitalStats {
  const { count, word, vocab, vocabLower } = tok;
  const shape = wordShapes(vocab, vocabLower);
  // Counted per vocabulary word, then summed per lower-cased form.
  const lowerCount = new Int32Array(vocab.length);
  const midCount = new Int32Array(vocab.length);
  const placeCount = new Int32Array(vocab.length);
  const speechCount = new Int32Array(vocab.length);
  const speech = classifyWords(tok, (lc) => (SPEECH_VERBS.has(lc) ? 1 : 0));
  for (let i = 0; i < count; i++) {
    const id = word[i]!;
    const s = shape[id]!;
    if (!(s & SHAPE_WORD)) continue;
    if (s & SHAPE_LOWER) lowerCount[id]!++;
    else if (s & SHAPE_CAPITALISED) {
      if ((i > 0 && speech[word[i - 1]!]) || (i + 1 < count && speech[word[i + 1]!])) speechCount[id]!++;
      if (isSentenceInitial(tok, i, inQuote)) continue;
      midCount[id]!++;
      if (i > 0 && PLACE_PREPOSITIONS.has(tok.lower[i - 1]!)) placeCount[id]!++;
    }
  }
  const capMid = new Map<string, number>();
  const lower = new Map<string, number>();
  const afterPlacePreposition = new Map<string, number>();
  const besideSpeechVerb = new Map<string, number>();
  for (let id = 0; id < vocab.length; id++) {
    const lc = vocabLower[id]!;
    if (lowerCount[id]) add(lower, lc, lowerCount[id]);
    if (midCount[id]) add(capMid, lc, midCount[id]);
    if (placeCount[id]) add(afterPlacePreposition, lc, placeCount[id]);
    if (speechCount[id]) add(besideSpeechVerb, lc, speechCount[id]);
  }
  return { capMid, lower, afterPlacePreposition, besideSpeechVerb, shape };
}


// Spellings of one title, so "Doctor Kemp" and "Dr. Kemp" are the same person.
const TITLE_SYNONYMS: Record<string, string> = {
  doctor: "dr", capt: "captain", col: "colonel", gen: "general", lieut: "lieutenant", lt: "lieutenant",
  sgt: "sergeant", prof: "professor", rev: "reverend", mme: "madame", mlle: "mademoiselle", madam: "madame",
};

/** The title a word is, spelling folded ("Doctor" and "Dr." are "dr"), or undefined. */
export function titleOf(word: string): string | undefined {
  if (!isCapitalised(word)) return undefined;
  const key = word.toLowerCase().replace(/\.$/, "");
  return HONORIFICS.has(key) ? (TITLE_SYNONYMS[key] ?? key) : undefined;
}

/**
 * Finds name mentions using capitalisation statistics: a capitalised word that also appears in
 * lower case mid-sentence is probably not a name, and a sentence-initial capital only counts when
 * the word is seen capitalised mid-sentence too.
 */
export function findNames(tok: Tokenized, inQuote: Uint8Array, stats: CapitalStats = capitalStats(tok, inQuote)): {
  names: NameMention[];
  places: PlaceMention[];
} {
  const { text, count, paragraph, word, vocab } = tok;
  const lowers = tok.lower;
  const { capMid, lower, afterPlacePreposition, besideSpeechVerb, shape } = stats;
  const is = (k: number, bit: number): boolean => (shape[word[k]!]! & bit) !== 0;
  const notName = (lc: string): boolean =>
    (NOT_NAMES.has(lc) && !(INTERJECTIONS.has(lc) && (besideSpeechVerb.get(lc) ?? 0) >= TAGGED_INTERJECTION_MIN)) || isPeopleWord(lc);
  // A word seen after "in"/"at" often enough is a place: it never joins a person's name ("in London Lydia").
  const isPlaceWord = (lc: string): boolean => (afterPlacePreposition.get(lc) ?? 0) >= PLACE_WORD_SHARE * (capMid.get(lc) ?? 0) && afterPlacePreposition.has(lc);
  // Whether a word is a name and which title it is depend only on the word: decided once per word.
  const nameWord = new Int8Array(vocab.length).fill(-1);
  const isNameWord = (k: number): boolean => {
    const id = word[k]!;
    if (nameWord[id]! < 0) {
      const lc = lowers[k]!;
      const mid = capMid.get(lc) ?? 0;
      const yes =
        is(k, SHAPE_CAPITALISED) &&
        !is(k, SHAPE_INITIAL) &&
        !notName(lc) &&
        !HONORIFICS.has(lc.replace(/\.$/, "")) &&
        mid >= 1 &&
        (lower.get(lc) ?? 0) <= mid * 0.15;
      nameWord[id] = yes ? 1 : 0;
    }
    return nameWord[id] === 1;
  };
  const titles = new Map<number, string | undefined>();
  const titleAt = (k: number): string | undefined => {
    const id = word[k]!;
    if (!titles.has(id)) titles.set(id, titleOf(text[k]!));
    // "E. M. Forster": after an initial, "M." is another initial, not Monsieur.
    if (is(k, SHAPE_INITIAL) && k > 0 && is(k - 1, SHAPE_INITIAL)) return undefined;
    return titles.get(id);
  };
  // At a sentence start a capital proves little; a word never seen in lower case still counts when
  // something vouches for it: a known given name, a surname right after it, or a speech verb.
  const vouched = (j: number): boolean => {
    const lc = lowers[j]!;
    if (!is(j, SHAPE_CAPITALISED) || is(j, SHAPE_INITIAL) || lower.has(lc) || notName(lc) || HONORIFICS.has(lc.replace(/\.$/, ""))) return false;
    return GIVEN_NAMES.has(lc) || (j + 1 < count && tok.start[j + 1]! - tok.end[j]! <= 1 && isNameWord(j + 1)) || SPEECH_VERBS.has(lowers[j + 1] ?? "");
  };
  const touching = (k: number): boolean => k < count && tok.start[k] === tok.end[k - 1] && paragraph[k] === paragraph[k - 1];
  // "Winnie-the-Pooh", "Wedge-Tomkins": hyphens, with lower-case words between, join capitalised
  // words into one name. Returns the last token of the name, or -1.
  const hyphenatedTail = (end: number): number => {
    let k = end + 1;
    while (text[k] === "-" && touching(k) && touching(k + 1)) {
      if (is(k + 1, SHAPE_CAPITALISED)) return notName(lowers[k + 1]!) ? -1 : k + 1;
      if (!is(k + 1, SHAPE_LOWER) || !is(k + 1, SHAPE_WORD)) return -1;
      k += 2;
    }
    return -1;
  };
  const names: NameMention[] = [];
  const places: PlaceMention[] = [];
  for (let i = 0; i < count; i++) {
    if (!is(i, SHAPE_UPPER_START)) continue;
    const w = text[i]!;
    const para = paragraph[i]!;
    let title: string | undefined;
    let j = i;
    // Titles may stack ("the Rev. Mr. Bunting"); keep the one that says most about gender.
    while (j < count && paragraph[j] === para) {
      const t = titleAt(j);
      if (t === undefined) break;
      if (title === undefined || HONORIFICS.get(title) === undefined) title = t;
      j++;
    }
    const sameParagraph = j < count && paragraph[j] === para;
    const initial = sameParagraph && isSentenceInitial(tok, j, inQuote);
    if (!sameParagraph || !(isNameWord(j) || (initial && title === undefined && vouched(j)))) {
      // A title standing alone after "the" names someone too ("the King", "the Admiral").
      if (
        title !== undefined &&
        j === i + 1 &&
        !SHORT_TITLES.has(title) &&
        lowers[i - 1] === "the" &&
        !isSentenceInitial(tok, i, inQuote)
      ) {
        names.push({ start: i - 1, end: i, title: undefined, parts: [w], definite: true, inQuote: inQuote[i] === 1, placeContext: false, char: -1 });
      }
      continue;
    }
    if (title === undefined && initial && (capMid.get(lowers[j]!) ?? 0) < 2 && !vouched(j)) continue;
    let end = j;
    for (;;) {
      const n = end + 1;
      if (n >= count || paragraph[n] !== para || tok.start[n]! - tok.end[end]! > 1) break;
      const tail = hyphenatedTail(end);
      if (tail > 0) {
        end = tail;
        continue;
      }
      const nLower = lowers[n]!;
      if (isPlaceWord(nLower) || isPlaceWord(lowers[end]!)) break;
      // After a name word, any capitalised word mid-sentence continues the name ("Jonathan Small").
      if (isNameWord(n) || is(n, SHAPE_INITIAL) || (is(n, SHAPE_CAPITALISED) && !notName(nLower) && titleAt(n) === undefined)) {
        end++;
        continue;
      }
      if (NAME_PARTICLES.has(text[n]!) && end + 2 < count && isNameWord(end + 2)) {
        end += 2;
        continue;
      }
      break;
    }
    while (end > j && is(end, SHAPE_INITIAL)) end--;
    let start = title !== undefined ? i : j;
    // A capitalised modifier in front of a name word ("the White Rabbit").
    if (title === undefined) {
      while (
        start > 0 &&
        is(start - 1, SHAPE_CAPITALISED) &&
        !notName(lowers[start - 1]!) &&
        !isPlaceWord(lowers[start - 1]!) &&
        (lower.get(lowers[start - 1]!) ?? 0) <= (capMid.get(lowers[start - 1]!) ?? 0) &&
        !isSentenceInitial(tok, start - 1, inQuote) &&
        paragraph[start - 1] === para &&
        titleAt(start - 1) === undefined
      )
        start--;
    }
    const lastLc = lowers[end]!;
    const nextLc = lowers[end + 1] ?? "";
    const nextIsHead =
      end + 1 < count && is(end + 1, SHAPE_CAPITALISED) && (title === undefined ? PLACE_HEADS.has(nextLc) : THOROUGHFARES.has(nextLc));
    const compass = title === undefined && end > start && COMPASS_POINTS.has(lowers[start]!);
    // "the College", "the Parsonage", "the East": a place word standing alone after "the" is that place.
    const placeByItself = title === undefined && end === start && lowers[start - 1] === "the" && (PLACE_HEADS.has(lastLc) || COMPASS_POINTS.has(lastLc));
    // "King Edward Street": a title, a name, then a street word is a street named after someone
    // ("Mr. Hall" alone stays a man: the street word must follow a name).
    const titledStreet = title !== undefined && end > j && THOROUGHFARES.has(lastLc);
    if (nextIsHead || compass || placeByItself || titledStreet || (title === undefined && end > start && PLACE_HEADS.has(lastLc))) {
      places.push({ start, end: nextIsHead ? end + 1 : end });
      i = nextIsHead ? end + 1 : end;
      continue;
    }
    // "the Bennets", "the Miss Musgroves": a family, not a person.
    if (lastLc.endsWith("s") && capMid.has(lastLc.slice(0, -1)) && (title !== undefined || lowers[start - 1] === "the")) {
      i = end;
      continue;
    }
    const parts: string[] = [];
    for (let k = title !== undefined ? j : start; k <= end; k++) parts.push(text[k]!);
    let definite = false;
    const prev = start - 1;
    if (title === undefined && prev >= 0 && lowers[prev] === "the" && paragraph[prev] === para) {
      definite = true;
      start--;
    }
    const placeContext = title === undefined && !definite && prev >= 0 && PLACE_PREPOSITIONS.has(lowers[prev]!);
    names.push({ start, end, title, parts, definite, inQuote: inQuote[j] === 1, placeContext, char: -1 });
    i = end;
  }
  return { names, places };
}

/** A title page's credit line is a short paragraph ("by Arthur Tobin", "A Winter Tale, by E. M. Forster"). */
export const MAX_CREDIT_LINE_TOKENS = 12;
const TITLE_SMALL_WORDS = new Set(["a", "an", "the", "of", "and", "in", "on", "at", "to", "for", "with", "from"]);
const LOWER_START = /^\p{Ll}/u;

/**
 * Whether a credit opens at token i: "by" after a credit verb ("Edited by"), "by" in a title-page
 * line that ends on a name, or a credit label and a colon ("Author:"). Outside quotes only.
 */
function opensCredit(tok: Tokenized, i: number, inQuote: Uint8Array, paragraphEndsOnName: (p: number, by: number) => boolean): boolean {
  if (inQuote[i]) return false;
  const lc = tok.lower[i]!;
  // A credit's first word is capitalised ("Edited by", "Author:"); in prose "produced by" is not a credit.
  const creditWord = i > 0 && CAPITAL.test(tok.text[i - 1]!);
  if (lc === ":") return creditWord && CREDIT_LABELS.has(tok.lower[i - 1]!);
  if (lc !== "by") return false;
  if (creditWord && CREDIT_VERBS.has(tok.lower[i - 1]!)) return true;
  return paragraphEndsOnName(tok.paragraph[i]!, i);
}

/**
 * The people credited with making the book (author, editor, transcriber…), from credit lines in the
 * text: "by Jane Tobin" alone on a title-page line, "Edited by …", "Produced by A and B",
 * "Author: …". Every name from the credit to the end of its sentence is credited. Returns the
 * credited names' words, lower-cased and joined by spaces, without titles.
 */
export function creditedNames(tok: Tokenized, names: readonly NameMention[], inQuote: Uint8Array): Set<string> {
  const credited = new Set<string>();
  if (names.length === 0) return credited;
  const nameEnds = new Uint8Array(tok.count);
  for (const m of names) nameEnds[m.end] = 1;
  // Paragraph bounds, found once: a title-page line is short and its last token ends a name.
  const paragraphStart = new Map<number, number>();
  const paragraphEnd = new Map<number, number>();
  for (let i = 0; i < tok.count; i++) {
    const p = tok.paragraph[i]!;
    if (!paragraphStart.has(p)) paragraphStart.set(p, i);
    paragraphEnd.set(p, i);
  }
  // …and what comes before its "by" is a title, capitalised but for small words ("The Tale of the
  // Mill, by …"), not a sentence ("He was saved by Clara").
  const endsOnName = (p: number, by: number) => {
    const start = paragraphStart.get(p)!;
    const end = paragraphEnd.get(p)!;
    if (end - start + 1 > MAX_CREDIT_LINE_TOKENS || nameEnds[end] !== 1) return false;
    for (let k = start; k < by; k++) if (LOWER_START.test(tok.text[k]!) && !TITLE_SMALL_WORDS.has(tok.lower[k]!)) return false;
    return true;
  };
  let k = 0;
  for (let i = 0; i < tok.count && k < names.length; i++) {
    if (!opensCredit(tok, i, inQuote, endsOnName)) continue;
    while (k < names.length && names[k]!.start <= i) k++;
    for (let n = k; n < names.length && tok.sentence[names[n]!.start] === tok.sentence[i] && tok.paragraph[names[n]!.start] === tok.paragraph[i]; n++) {
      credited.add(names[n]!.parts.join(" ").toLowerCase());
    }
  }
  return credited;
}

/**
 * The name mentions without the credited makers of the book: their full names, and their surnames
 * alone ("Miss Austen" in a preface) unless a surname is also some other full name's.
 */
export function withoutCredited(tok: Tokenized, names: NameMention[], inQuote: Uint8Array): NameMention[] {
  const credited = creditedNames(tok, names, inQuote);
  if (credited.size === 0) return names;
  const surnames = new Set<string>();
  for (const c of credited) if (c.includes(" ")) surnames.add(c.slice(c.lastIndexOf(" ") + 1));
  for (const m of names) {
    const key = m.parts.join(" ").toLowerCase();
    if (m.parts.length > 1 && !credited.has(key)) surnames.delete(m.parts[m.parts.length - 1]!.toLowerCase());
  }
  return names.filter((m) => {
    const key = m.parts.join(" ").toLowerCase();
    return !credited.has(key) && !(m.parts.length === 1 && surnames.has(key) && !m.definite);
  });
}

/**
 * Two words that read as one name but are not: "On seeing Natásha Pierre grew animated", "In Kiev
 * Pierre …". When the second word is a given name of this book (it begins a fuller name, "Pierre
 * Bezúkhov", used more often than any name ending in it) the pair is that person after a word
 * that is not their given name: the first word stays a name only when it is a given name of the
 * book too (Natásha), and is dropped otherwise (Kiev). Mentions stay in text order.
 */
export function splitRunTogether(names: NameMention[]): NameMention[] {
  // Fuller names by how often each is used, and the fuller names each word begins and ends.
  const uses = new Map<string, number>();
  for (const m of names) {
    if (m.parts.length < 2 || m.definite) continue;
    const key = m.parts.join(" ").toLowerCase();
    uses.set(key, (uses.get(key) ?? 0) + 1);
  }
  const begun = new Map<string, string[]>();
  const ended = new Map<string, string[]>();
  for (const key of uses.keys()) {
    const words = key.split(" ");
    begun.set(words[0]!, [...(begun.get(words[0]!) ?? []), key]);
    ended.set(words[words.length - 1]!, [...(ended.get(words[words.length - 1]!) ?? []), key]);
  }
  /** The most any fuller name other than `key` beginning with `word` is used. */
  const asGivenName = (word: string, key: string) => Math.max(0, ...(begun.get(word) ?? []).filter((k) => k !== key).map((k) => uses.get(k)!));
  const runTogether = (m: NameMention): boolean => {
    if (m.parts.length !== 2 || m.title !== undefined || m.definite || m.end !== m.start + 1) return false;
    const key = m.parts.join(" ").toLowerCase();
    const second = m.parts[1]!.toLowerCase();
    // Its own fuller name ("Pierre Bezúkhov") is used more than any name ending in it: a given
    // name, not a surname ("Nicholas Rostóv", where "Rostóv" begins no name).
    return asGivenName(second, key) > Math.max(...ended.get(second)!.map((k) => uses.get(k)!));
  };
  if (!names.some(runTogether)) return names;
  const out: NameMention[] = [];
  for (const m of names) {
    if (!runTogether(m)) {
      out.push(m);
      continue;
    }
    const [first, second] = m.parts as [string, string];
    if (asGivenName(first.toLowerCase(), m.parts.join(" ").toLowerCase()) > 0) out.push({ ...m, end: m.start, parts: [first], placeContext: false });
    out.push({ ...m, start: m.end, parts: [second], placeContext: false });
  }
  return out;
}

/** Plural of a nationality or the like ("Indians", "Englishmen"): a group, never one character. */
function isPeopleWord(lc: string): boolean {
  if (lc.endsWith("men")) return DEMONYMS.has(lc.slice(0, -3) + "man");
  return lc.endsWith("s") && DEMONYMS.has(lc.slice(0, -1));
}

/** True when a speech verb sits right next to the mention ("said Jane", "Jane replied"). */
export function isTagSubject(tok: Tokenized, m: { start: number; end: number }): boolean {
  const before = tok.lower[m.start - 1] ?? "";
  const after = tok.lower[m.end + 1] ?? "";
  const after2 = tok.lower[m.end + 2] ?? "";
  return SPEECH_VERBS.has(before) || SPEECH_VERBS.has(after) || (after.endsWith("ly") && SPEECH_VERBS.has(after2));
}

/** Dialogue tags needed before a description ("the mariner") is taken as a character's name. */
export const EPITHET_MIN_TAGS = 3;
const MAX_EPITHET_WORDS = 3;
const WORD = /^\p{L}+$/u;

/** Lower-cased words of "the X Y" right after index i ("the"), stopping at punctuation. */
function nounPhraseAfter(tok: Tokenized, i: number): string[] | undefined {
  if (tok.lower[i] !== "the") return undefined;
  const words: string[] = [];
  for (let k = i + 1; k < tok.count && words.length <= MAX_EPITHET_WORDS; k++) {
    const w = tok.text[k]!;
    if (!WORD.test(w)) break;
    words.push(tok.lower[k]!);
  }
  const end = tok.text[i + 1 + words.length];
  if (words.length === 0 || words.length > MAX_EPITHET_WORDS || (end !== undefined && WORD.test(end))) return undefined;
  return words;
}

/**
 * A description fit to name someone: not a bare gender ("the man"), unless the book writes it as a
 * proper name, every word capitalised ("the Invisible Man").
 */
function acceptableHead(words: string[], capitalised: boolean): boolean {
  const head = words[words.length - 1]!;
  const gendered = GENDERED_NOUNS.has(head) && !(capitalised && words.length > 1);
  return !NOT_NAMES.has(head) && !gendered && !SPEECH_VERBS.has(head) && !head.endsWith("ly") && words.every((w) => !HONORIFICS.has(w) || words.length > 1);
}

const CAPITAL = /^\p{Lu}/u;
const allCapitalised = (tok: Tokenized, from: number, to: number): boolean => {
  for (let k = from; k <= to; k++) if (!CAPITAL.test(tok.text[k]!)) return false;
  return true;
};

/**
 * Unnamed characters known by a description used in dialogue tags ("said the mariner", "the Cat
 * said"): once a description tags enough quotes, every "the <description>" becomes a mention.
 */
export function findEpithets(tok: Tokenized, inQuote: Uint8Array, names: NameMention[]): NameMention[] {
  const { count, text } = tok;
  const lowers = tok.lower;
  const counts = new Map<string, number>();
  const speech = classifyWords(tok, (lc) => (SPEECH_VERBS.has(lc) ? 1 : 0));
  for (let v = 1; v < count; v++) {
    if (inQuote[v] || !speech[tok.word[v]!]) continue;
    const after = nounPhraseAfter(tok, v + 1);
    if (after && acceptableHead(after, allCapitalised(tok, v + 2, v + 1 + after.length))) counts.set(after.join(" "), (counts.get(after.join(" ")) ?? 0) + 1);
    for (let t = v - 2; t >= Math.max(0, v - 1 - MAX_EPITHET_WORDS); t--) {
      if (lowers[t] !== "the") continue;
      const words = lowers.slice(t + 1, v);
      if (words.every((w) => WORD.test(w)) && acceptableHead(words, allCapitalised(tok, t + 1, v - 1))) counts.set(words.join(" "), (counts.get(words.join(" ")) ?? 0) + 1);
      break;
    }
  }
  const epithets = new Map<string, string[]>();
  for (const [key, n] of counts) if (n >= EPITHET_MIN_TAGS) epithets.set(key.split(" ")[0]!, [...(epithets.get(key.split(" ")[0]!) ?? []), key]);
  if (epithets.size === 0) return [];
  const taken = new Uint8Array(count);
  for (const m of names) taken.fill(1, m.start, m.end + 1);
  const out: NameMention[] = [];
  for (let i = 0; i + 1 < count; i++) {
    if (lowers[i] !== "the") continue;
    const keys = epithets.get(lowers[i + 1]!);
    if (!keys) continue;
    for (const key of keys) {
      const words = key.split(" ");
      const end = i + words.length;
      if (end >= count) continue;
      let ok = true;
      for (let k = 0; k < words.length && ok; k++) ok = lowers[i + 1 + k] === words[k];
      // The whole description, not the start of a longer one ("the voice" but not "the voice of").
      const next = text[end + 1];
      if (!ok || (next !== undefined && WORD.test(next) && /^\p{Ll}/u.test(next) && words.length > 1)) continue;
      let free = true;
      for (let k = i; k <= end && free; k++) free = taken[k] === 0;
      if (!free) continue;
      const parts = text.slice(i + 1, end + 1);
      out.push({ start: i, end, title: undefined, parts, definite: true, inQuote: inQuote[i] === 1, placeContext: false, char: -1 });
      break;
    }
  }
  return out;
}
