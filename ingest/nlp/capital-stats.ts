import { PLACE_PREPOSITIONS, SPEECH_VERBS } from "./lexicon.ts";
import { classifyWords, type Tokenized } from "./tokenizer.ts";

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
export const SHAPE_WORD = 1;
export const SHAPE_UPPER_START = 2;
export const SHAPE_CAPITALISED = 4;
/** An initial such as "P.". */
export const SHAPE_INITIAL = 8;
/** Entirely lower case. */
export const SHAPE_LOWER = 16;

const LETTER = /\p{L}/u;
export const UPPER_START = /^\p{Lu}/u;
const HAS_LOWER = /\p{Ll}/u;
const INITIAL = /^\p{Lu}\.$/u;
const OPENERS = new Set(['"', "'", "\u201c", "\u2018", "(", "[", "_", "\u2014", "--", "-", ":"]);

const add = (m: Map<string, number>, k: string, n = 1) => m.set(k, (m.get(k) ?? 0) + n);

export function isCapitalised(word: string): boolean {
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
export function isSentenceInitial(tok: Tokenized, i: number, inQuote: Uint8Array): boolean {
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
