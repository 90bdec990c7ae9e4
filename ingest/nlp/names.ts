import {
  GENDERED_NOUNS,
  GIVEN_NAMES,
  HONORIFICS,
  NAME_PARTICLES,
  NOT_NAMES,
  PLACE_HEADS,
  PLACE_PREPOSITIONS,
  SPEECH_VERBS,
} from "./lexicon.ts";
import type { Token, Tokenized } from "./tokenizer.ts";

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
}

const LETTER = /\p{L}/u;
const UPPER_START = /^\p{Lu}/u;
const HAS_LOWER = /\p{Ll}/u;
const INITIAL = /^\p{Lu}\.$/u;
const OPENERS = new Set(['"', "'", "\u201c", "\u2018", "(", "[", "_", "\u2014", "--", "-", ":"]);

// Share of a word's capitalised uses after "in"/"at"/… that makes it a place.
const PLACE_WORD_SHARE = 0.3;
// Titles that never stand alone as a name.
const SHORT_TITLES = new Set(["mr", "mrs", "ms", "miss", "m", "mme", "mlle", "dr", "st", "rev", "capt", "col", "gen", "lieut", "lt", "sgt", "prof"]);

const add = (m: Map<string, number>, k: string, n = 1) => m.set(k, (m.get(k) ?? 0) + n);

export function isCapitalised(word: string): boolean {
  return UPPER_START.test(word) && (word.length === 1 || HAS_LOWER.test(word) || INITIAL.test(word));
}

/** A token opens a sentence (or a quoted sentence), where capitals say little about names. */
export function isSentenceInitial(tokens: Token[], i: number, inQuote: Uint8Array): boolean {
  const t = tokens[i]!;
  if (t.inSentence === 0) return true;
  let j = i - 1;
  while (j >= 0 && OPENERS.has(tokens[j]!.text) && tokens[j]!.sentence === t.sentence) {
    if (tokens[j]!.inSentence === 0) return true;
    // The first word inside a quote starts a quoted sentence.
    if (inQuote[j] && (j === 0 || !inQuote[j - 1])) return true;
    j--;
  }
  return false;
}

export function capitalStats(tokens: Token[], inQuote: Uint8Array): CapitalStats {
  const capMid = new Map<string, number>();
  const lower = new Map<string, number>();
  const afterPlacePreposition = new Map<string, number>();
  for (let i = 0; i < tokens.length; i++) {
    const w = tokens[i]!.text;
    const c = w.charCodeAt(0);
    // ASCII punctuation and digits are the commonest non-words: skip them without a regex.
    if (c < 65 || (c > 90 && c < 97) || (c > 122 && c < 128) || !LETTER.test(w)) continue;
    const lc = tokens[i]!.lower;
    if (w === lc) add(lower, lc);
    else if (isCapitalised(w) && !isSentenceInitial(tokens, i, inQuote)) {
      add(capMid, lc);
      if (i > 0 && PLACE_PREPOSITIONS.has(tokens[i - 1]!.lower)) add(afterPlacePreposition, lc);
    }
  }
  return { capMid, lower, afterPlacePreposition };
}

// Spellings of one title, so "Doctor Kemp" and "Dr. Kemp" are the same person.
const TITLE_SYNONYMS: Record<string, string> = {
  doctor: "dr", capt: "captain", col: "colonel", gen: "general", lieut: "lieutenant", lt: "lieutenant",
  sgt: "sergeant", prof: "professor", rev: "reverend", mme: "madame", mlle: "mademoiselle", madam: "madame",
};

function titleOf(word: string): string | undefined {
  if (!isCapitalised(word)) return undefined;
  const key = word.toLowerCase().replace(/\.$/, "");
  return HONORIFICS.has(key) ? (TITLE_SYNONYMS[key] ?? key) : undefined;
}

/**
 * Finds name mentions using capitalisation statistics: a capitalised word that also appears in
 * lower case mid-sentence is probably not a name, and a sentence-initial capital only counts when
 * the word is seen capitalised mid-sentence too.
 */
export function findNames(tok: Tokenized, inQuote: Uint8Array, stats: CapitalStats = capitalStats(tok.tokens, inQuote)): {
  names: NameMention[];
  places: PlaceMention[];
} {
  const { tokens } = tok;
  const { capMid, lower, afterPlacePreposition } = stats;
  // A word seen after "in"/"at" often enough is a place: it never joins a person's name ("in London Lydia").
  const isPlaceWord = (lc: string): boolean => (afterPlacePreposition.get(lc) ?? 0) >= PLACE_WORD_SHARE * (capMid.get(lc) ?? 0) && afterPlacePreposition.has(lc);
  const isNameWord = (w: string): boolean => {
    if (!isCapitalised(w) || INITIAL.test(w)) return false;
    const lc = w.toLowerCase();
    if (NOT_NAMES.has(lc) || HONORIFICS.has(lc.replace(/\.$/, ""))) return false;
    const mid = capMid.get(lc) ?? 0;
    return mid >= 1 && (lower.get(lc) ?? 0) <= mid * 0.15;
  };
  // At a sentence start a capital proves little; a word never seen in lower case still counts when
  // something vouches for it: a known given name, a surname right after it, or a speech verb.
  const vouched = (j: number): boolean => {
    const w = tokens[j]!.text;
    const lc = w.toLowerCase();
    if (!isCapitalised(w) || INITIAL.test(w) || lower.has(lc) || NOT_NAMES.has(lc) || HONORIFICS.has(lc.replace(/\.$/, ""))) return false;
    const next = tokens[j + 1];
    const after = next?.text ?? "";
    return GIVEN_NAMES.has(lc) || (next !== undefined && next.start - tokens[j]!.end <= 1 && isNameWord(after)) || SPEECH_VERBS.has(after.toLowerCase());
  };
  const names: NameMention[] = [];
  const places: PlaceMention[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const w = tokens[i]!.text;
    if (!UPPER_START.test(w)) continue;
    let title: string | undefined;
    let j = i;
    // Titles may stack ("the Rev. Mr. Bunting"); keep the one that says most about gender.
    while (j < tokens.length && titleOf(tokens[j]!.text) !== undefined && tokens[j]!.paragraph === tokens[i]!.paragraph) {
      const t = titleOf(tokens[j]!.text)!;
      if (title === undefined || HONORIFICS.get(title) === undefined) title = t;
      j++;
    }
    const first = tokens[j];
    const sameParagraph = first !== undefined && first.paragraph === tokens[i]!.paragraph;
    const initial = sameParagraph && isSentenceInitial(tokens, j, inQuote);
    if (!first || !sameParagraph || !(isNameWord(first.text) || (initial && title === undefined && vouched(j)))) {
      // A title standing alone after "the" names someone too ("the King", "the Admiral").
      const prev = tokens[i - 1];
      if (
        title !== undefined &&
        j === i + 1 &&
        !SHORT_TITLES.has(title) &&
        prev?.lower === "the" &&
        !isSentenceInitial(tokens, i, inQuote)
      ) {
        names.push({ start: i - 1, end: i, title: undefined, parts: [w], definite: true, inQuote: inQuote[i] === 1, placeContext: false, char: -1 });
      }
      continue;
    }
    if (title === undefined && initial && (capMid.get(first.lower) ?? 0) < 2 && !vouched(j)) continue;
    let end = j;
    for (;;) {
      const n = tokens[end + 1];
      if (!n || n.paragraph !== first.paragraph || n.start - tokens[end]!.end > 1) break;
      if (isPlaceWord(n.lower) || isPlaceWord(tokens[end]!.lower)) break;
      // After a name word, any capitalised word mid-sentence continues the name ("Jonathan Small").
      if (isNameWord(n.text) || INITIAL.test(n.text) || (isCapitalised(n.text) && !NOT_NAMES.has(n.lower) && titleOf(n.text) === undefined)) {
        end++;
        continue;
      }
      const after = tokens[end + 2];
      if (NAME_PARTICLES.has(n.text) && after && isNameWord(after.text)) {
        end += 2;
        continue;
      }
      break;
    }
    while (end > j && INITIAL.test(tokens[end]!.text)) end--;
    let start = title !== undefined ? i : j;
    // A capitalised modifier in front of a name word ("the White Rabbit").
    if (title === undefined) {
      while (
        start > 0 &&
        isCapitalised(tokens[start - 1]!.text) &&
        !NOT_NAMES.has(tokens[start - 1]!.lower) &&
        !isPlaceWord(tokens[start - 1]!.lower) &&
        (lower.get(tokens[start - 1]!.lower) ?? 0) <= (capMid.get(tokens[start - 1]!.lower) ?? 0) &&
        !isSentenceInitial(tokens, start - 1, inQuote) &&
        tokens[start - 1]!.paragraph === first.paragraph &&
        titleOf(tokens[start - 1]!.text) === undefined
      )
        start--;
    }
    const next = tokens[end + 1];
    const lastLc = tokens[end]!.lower;
    const nextIsHead = next !== undefined && isCapitalised(next.text) && PLACE_HEADS.has(next.lower) && title === undefined;
    if (nextIsHead || (title === undefined && end > start && PLACE_HEADS.has(lastLc))) {
      places.push({ start, end: nextIsHead ? end + 1 : end });
      i = nextIsHead ? end + 1 : end;
      continue;
    }
    // "the Bennets", "the Miss Musgroves": a family, not a person.
    if (/s$/.test(lastLc) && capMid.has(lastLc.slice(0, -1)) && (title !== undefined || tokens[start - 1]?.lower === "the")) {
      i = end;
      continue;
    }
    const parts: string[] = [];
    for (let k = title !== undefined ? j : start; k <= end; k++) parts.push(tokens[k]!.text);
    let definite = false;
    const prev = tokens[start - 1];
    if (title === undefined && prev && prev.lower === "the" && prev.paragraph === first.paragraph) {
      definite = true;
      start--;
    }
    const placeContext = title === undefined && !definite && prev !== undefined && PLACE_PREPOSITIONS.has(prev.lower);
    names.push({ start, end, title, parts, definite, inQuote: inQuote[j] === 1, placeContext, char: -1 });
    i = end;
  }
  return { names, places };
}

/** True when a speech verb sits right next to the mention ("said Jane", "Jane replied"). */
export function isTagSubject(tokens: Token[], m: { start: number; end: number }): boolean {
  const before = tokens[m.start - 1]?.lower ?? "";
  const after = tokens[m.end + 1]?.lower ?? "";
  const after2 = tokens[m.end + 2]?.lower ?? "";
  return SPEECH_VERBS.has(before) || SPEECH_VERBS.has(after) || (after.endsWith("ly") && SPEECH_VERBS.has(after2));
}

/** Dialogue tags needed before a description ("the mariner") is taken as a character's name. */
export const EPITHET_MIN_TAGS = 3;
const MAX_EPITHET_WORDS = 3;
const WORD = /^\p{L}+$/u;

/** Lower-cased words of "the X Y" right after index i ("the"), stopping at punctuation. */
function nounPhraseAfter(tokens: Token[], i: number): string[] | undefined {
  if (tokens[i]?.lower !== "the") return undefined;
  const words: string[] = [];
  for (let k = i + 1; k < tokens.length && words.length <= MAX_EPITHET_WORDS; k++) {
    const w = tokens[k]!.text;
    if (!WORD.test(w)) break;
    words.push(w.toLowerCase());
  }
  const end = tokens[i + 1 + words.length];
  if (words.length === 0 || words.length > MAX_EPITHET_WORDS || (end && WORD.test(end.text))) return undefined;
  return words;
}

function acceptableHead(words: string[]): boolean {
  const head = words[words.length - 1]!;
  return !NOT_NAMES.has(head) && !GENDERED_NOUNS.has(head) && !SPEECH_VERBS.has(head) && !head.endsWith("ly") && words.every((w) => !HONORIFICS.has(w) || words.length > 1);
}

/**
 * Unnamed characters known by a description used in dialogue tags ("said the mariner", "the Cat
 * said"): once a description tags enough quotes, every "the <description>" becomes a mention.
 */
export function findEpithets(tokens: Token[], inQuote: Uint8Array, names: NameMention[]): NameMention[] {
  const counts = new Map<string, number>();
  for (let v = 1; v < tokens.length; v++) {
    if (inQuote[v] || !SPEECH_VERBS.has(tokens[v]!.lower)) continue;
    const after = nounPhraseAfter(tokens, v + 1);
    if (after && acceptableHead(after)) counts.set(after.join(" "), (counts.get(after.join(" ")) ?? 0) + 1);
    for (let t = v - 2; t >= Math.max(0, v - 1 - MAX_EPITHET_WORDS); t--) {
      if (tokens[t]!.lower !== "the") continue;
      const words = tokens.slice(t + 1, v).map((x) => x.lower);
      if (words.every((w) => WORD.test(w)) && acceptableHead(words)) counts.set(words.join(" "), (counts.get(words.join(" ")) ?? 0) + 1);
      break;
    }
  }
  const epithets = new Map<string, string[]>();
  for (const [key, n] of counts) if (n >= EPITHET_MIN_TAGS) epithets.set(key.split(" ")[0]!, [...(epithets.get(key.split(" ")[0]!) ?? []), key]);
  if (epithets.size === 0) return [];
  const taken = new Uint8Array(tokens.length);
  for (const m of names) taken.fill(1, m.start, m.end + 1);
  const out: NameMention[] = [];
  for (let i = 0; i + 1 < tokens.length; i++) {
    if (tokens[i]!.lower !== "the") continue;
    const keys = epithets.get(tokens[i + 1]!.lower);
    if (!keys) continue;
    for (const key of keys) {
      const words = key.split(" ");
      const end = i + words.length;
      if (end >= tokens.length) continue;
      let ok = true;
      for (let k = 0; k < words.length && ok; k++) ok = tokens[i + 1 + k]!.lower === words[k];
      // The whole description, not the start of a longer one ("the voice" but not "the voice of").
      const next = tokens[end + 1];
      if (!ok || (next && WORD.test(next.text) && /^\p{Ll}/u.test(next.text) && words.length > 1)) continue;
      let free = true;
      for (let k = i; k <= end && free; k++) free = taken[k] === 0;
      if (!free) continue;
      const parts = tokens.slice(i + 1, end + 1).map((t) => t.text);
      out.push({ start: i, end, title: undefined, parts, definite: true, inQuote: inQuote[i] === 1, placeContext: false, char: -1 });
      break;
    }
  }
  return out;
}
