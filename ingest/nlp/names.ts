import {
  capitalStats,
  isSentenceInitial,
  SHAPE_CAPITALISED,
  SHAPE_INITIAL,
  SHAPE_LOWER,
  SHAPE_UPPER_START,
  SHAPE_WORD,
  type CapitalStats,
} from "./capital-stats.ts";
import {
  COMPASS_POINTS,
  DEMONYMS,
  GIVEN_NAMES,
  HONORIFICS,
  INTERJECTIONS,
  MONTHS,
  NAME_PARTICLES,
  NOT_NAMES,
  PLACE_HEADS,
  PLACE_PREPOSITIONS,
  PLURAL_TITLES,
  SPEECH_VERBS,
  THOROUGHFARES,
} from "./lexicon.ts";
import { SHORT_TITLES, titleOf } from "./titles.ts";
import type { Tokenized } from "./tokenizer.ts";

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

// Share of a word's capitalised uses after "in"/"at"/… that makes it a place. A quarter: a city the
// story also travels to, leaves and writes from ("in Vienna" 13 of its 49 uses) is still a place, and
// "From Vienna Kutúzov wrote" is Kutúzov (at 0.3 it was a man "Vienna Kutúzov").
const PLACE_WORD_SHARE = 0.25;
// Dialogue tags that make an exclamation a character's name ("said Pooh").
const TAGGED_INTERJECTION_MIN = 3;

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
    // "Mrs. Hill", "Mr. Small": after a title that never stands alone, a capitalised word is a
    // surname, however often the book writes it in lower case.
    const titled = sameParagraph && title !== undefined && SHORT_TITLES.has(title) && is(j, SHAPE_CAPITALISED) && !is(j, SHAPE_INITIAL) && !notName(lowers[j]!);
    // "Miss de Bourgh": a particle between the title and the surname is part of the surname.
    const particle =
      sameParagraph && title !== undefined && NAME_PARTICLES.has(text[j]!) && j + 1 < count && paragraph[j + 1] === para && is(j + 1, SHAPE_CAPITALISED) && !notName(lowers[j + 1]!);
    if (!sameParagraph || !(isNameWord(j) || titled || particle || (initial && title === undefined && vouched(j)))) {
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
    let end = particle ? j + 1 : j;
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
        (!notName(lowers[start - 1]!) || (MONTHS.has(lowers[start - 1]!) && lowers[start - 2] === "the")) &&
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
    // "the Bennets", "the Miss Musgroves", "Mesdames Callendar", "Messrs. Hale": a family or a firm, not a person.
    if (PLURAL_TITLES.has(lowers[start]!) || PLURAL_TITLES.has(lowers[start - 1] ?? "")) {
      i = end;
      continue;
    }
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
