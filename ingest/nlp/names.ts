import {
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
}

const LETTER = /\p{L}/u;
const UPPER_START = /^\p{Lu}/u;
const HAS_LOWER = /\p{Ll}/u;
const INITIAL = /^\p{Lu}\.$/u;
const OPENERS = new Set(['"', "'", "\u201c", "\u2018", "(", "[", "_", "\u2014", "--", "-", ":"]);

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
  for (let i = 0; i < tokens.length; i++) {
    const w = tokens[i]!.text;
    if (!LETTER.test(w)) continue;
    const lc = w.toLowerCase();
    if (w === lc) add(lower, lc);
    else if (isCapitalised(w) && !isSentenceInitial(tokens, i, inQuote)) add(capMid, lc);
  }
  return { capMid, lower };
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
  const { capMid, lower } = stats;
  const isNameWord = (w: string): boolean => {
    if (!isCapitalised(w) || INITIAL.test(w)) return false;
    const lc = w.toLowerCase();
    if (NOT_NAMES.has(lc) || HONORIFICS.has(lc.replace(/\.$/, ""))) return false;
    const mid = capMid.get(lc) ?? 0;
    return mid >= 1 && (lower.get(lc) ?? 0) <= mid * 0.15;
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
    if (!first || first.paragraph !== tokens[i]!.paragraph || !isNameWord(first.text)) {
      // A title standing alone after "the" names someone too ("the King", "the Admiral").
      const prev = tokens[i - 1];
      if (
        title !== undefined &&
        j === i + 1 &&
        !SHORT_TITLES.has(title) &&
        prev?.text.toLowerCase() === "the" &&
        !isSentenceInitial(tokens, i, inQuote)
      ) {
        names.push({ start: i - 1, end: i, title: undefined, parts: [w], definite: true, inQuote: inQuote[i] === 1, placeContext: false, char: -1 });
      }
      continue;
    }
    const initial = isSentenceInitial(tokens, j, inQuote);
    const lc = first.text.toLowerCase();
    if (title === undefined && initial && (capMid.get(lc) ?? 0) < 2) continue;
    let end = j;
    for (;;) {
      const n = tokens[end + 1];
      if (!n || n.paragraph !== first.paragraph || n.start - tokens[end]!.end > 1) break;
      // After a name word, any capitalised word mid-sentence continues the name ("Jonathan Small").
      if (isNameWord(n.text) || INITIAL.test(n.text) || (isCapitalised(n.text) && !NOT_NAMES.has(n.text.toLowerCase()) && titleOf(n.text) === undefined)) {
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
        !NOT_NAMES.has(tokens[start - 1]!.text.toLowerCase()) &&
        !isSentenceInitial(tokens, start - 1, inQuote) &&
        tokens[start - 1]!.paragraph === first.paragraph &&
        titleOf(tokens[start - 1]!.text) === undefined
      )
        start--;
    }
    const next = tokens[end + 1];
    const lastLc = tokens[end]!.text.toLowerCase();
    const nextIsHead = next !== undefined && isCapitalised(next.text) && PLACE_HEADS.has(next.text.toLowerCase()) && title === undefined;
    if (nextIsHead || (title === undefined && end > start && PLACE_HEADS.has(lastLc))) {
      places.push({ start, end: nextIsHead ? end + 1 : end });
      i = nextIsHead ? end + 1 : end;
      continue;
    }
    // "the Bennets", "the Miss Musgroves": a family, not a person.
    if (/s$/.test(lastLc) && capMid.has(lastLc.slice(0, -1)) && (title !== undefined || tokens[start - 1]?.text.toLowerCase() === "the")) {
      i = end;
      continue;
    }
    const parts: string[] = [];
    for (let k = title !== undefined ? j : start; k <= end; k++) parts.push(tokens[k]!.text);
    let definite = false;
    const prev = tokens[start - 1];
    if (title === undefined && prev && prev.text.toLowerCase() === "the" && prev.paragraph === first.paragraph) {
      definite = true;
      start--;
    }
    const placeContext = title === undefined && !definite && prev !== undefined && PLACE_PREPOSITIONS.has(prev.text.toLowerCase());
    names.push({ start, end, title, parts, definite, inQuote: inQuote[j] === 1, placeContext, char: -1 });
    i = end;
  }
  return { names, places };
}

/** True when a speech verb sits right next to the mention ("said Jane", "Jane replied"). */
export function isTagSubject(tokens: Token[], m: { start: number; end: number }): boolean {
  const before = tokens[m.start - 1]?.text.toLowerCase() ?? "";
  const after = tokens[m.end + 1]?.text.toLowerCase() ?? "";
  const after2 = tokens[m.end + 2]?.text.toLowerCase() ?? "";
  return SPEECH_VERBS.has(before) || SPEECH_VERBS.has(after) || (after.endsWith("ly") && SPEECH_VERBS.has(after2));
}
