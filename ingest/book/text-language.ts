/**
 * Whether a decoded book reads as language, or is bytes that decoded without an error. Windows-1252
 * gives a character for every byte, so a Russian book in KOI8-R, an Arabic-script one in a Windows
 * code page, or random printable bytes all decode: left alone they would be chunked, indexed and
 * end `completed` with no character found and nothing to say why.
 *
 * The evidence is what every written language shares, not a lexicon of the supported ones:
 * - letters: prose is mostly letters (English about 80% of what is not a space, Urdu more); random
 *   printable ASCII is about half letters, half digits and marks.
 * - accented Latin letters: languages written in Latin letters accent a few in a hundred (French
 *   about 4%, Icelandic, among the most, about 15%; Vietnamese's accents are mostly beyond Latin-1);
 *   a Cyrillic, Greek or Arabic code page read as Windows-1252 turns nearly every letter into one
 *   of À…ÿ ("ÓÞÁÓÔÌÉ×ÙÅ"), and random high bytes about 40%.
 * - case changing inside a word: prose does it in a few names (McDonald, Irish "i mBaile"); random
 *   letters do it in about half their words ("xQm"), Greek read as Windows-1252 in a third.
 * Scripts without case or without Latin letters (Urdu, Russian as UTF-8) are judged by letters alone.
 *
 * Pure: no I/O.
 */
import { DEFAULT_SCRIPT_SAMPLE_CHARS, sampleText } from "./text-script.ts";

/** Below this share of letters among the characters that are not spaces, the text is not prose. */
export const MIN_LETTER_SHARE = 0.65;
/** Above this share of accented Latin-1 letters among the Latin letters, the text is mojibake. */
export const MAX_ACCENTED_SHARE = 0.3;
/** Above this share of words that change from lower to upper case inside the word, the text is not language. */
export const MAX_MIXED_CASE_SHARE = 0.2;
/** Fewer characters than this (spaces aside) are too few to judge: a short text is judged by having words at all. */
export const MIN_EVIDENCE_CHARS = 500;

export interface LanguageEvidence {
  /** Characters that are not whitespace, in the sample. */
  characters: number;
  letters: number;
  latinLetters: number;
  /** Latin letters of Latin-1's accented range (À…ÿ) and Windows-1252's own (Š, Œ, Ž, š, œ, ž, Ÿ). */
  accentedLatinLetters: number;
  /** Runs of two letters or more. */
  words: number;
  /** Of them, those with a lower-case letter followed by a capital. */
  mixedCaseWords: number;
}

const LETTER = /[\p{L}\p{M}]/u;
const LATIN = /\p{Script=Latin}/u;
const ACCENTED = /[\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff\u0160\u0161\u0152\u0153\u017d\u017e\u0178]/;
const WORD = /[\p{L}\p{M}]{2,}/gu;
const MIXED_CASE = /\p{Ll}\p{M}*\p{Lu}/u;

export function languageEvidence(text: string, sampleChars: number = DEFAULT_SCRIPT_SAMPLE_CHARS): LanguageEvidence {
  const part = sampleText(text, sampleChars);
  const evidence: LanguageEvidence = { characters: 0, letters: 0, latinLetters: 0, accentedLatinLetters: 0, words: 0, mixedCaseWords: 0 };
  for (const c of part) {
    if (/\s/.test(c)) continue;
    evidence.characters++;
    if (!LETTER.test(c)) continue;
    evidence.letters++;
    if (!LATIN.test(c)) continue;
    evidence.latinLetters++;
    if (ACCENTED.test(c)) evidence.accentedLatinLetters++;
  }
  for (const [word] of part.matchAll(WORD)) {
    evidence.words++;
    if (MIXED_CASE.test(word)) evidence.mixedCaseWords++;
  }
  return evidence;
}

const percent = (share: number) => `${Math.round(share * 100)}%`;

/** Why the text is not language (what to record as the book's failure), or undefined when it reads as language. */
export function notLanguage(evidence: LanguageEvidence): string | undefined {
  if (evidence.characters < MIN_EVIDENCE_CHARS) return undefined;
  const letters = evidence.letters / evidence.characters;
  if (letters < MIN_LETTER_SHARE) {
    return `the text is not language: only ${percent(letters)} of its characters are letters (prose has more than ${percent(MIN_LETTER_SHARE)})`;
  }
  const accented = evidence.latinLetters > 0 ? evidence.accentedLatinLetters / evidence.latinLetters : 0;
  if (evidence.latinLetters >= MIN_EVIDENCE_CHARS / 2 && accented > MAX_ACCENTED_SHARE) {
    return (
      `the text is not language: ${percent(accented)} of its Latin letters are accented (no language has more than ${percent(MAX_ACCENTED_SHARE)}), ` +
      "the mark of a file in another encoding (KOI8-R, a Cyrillic, Greek or Arabic code page) read as Windows-1252: save it as UTF-8"
    );
  }
  const mixed = evidence.words > 0 ? evidence.mixedCaseWords / evidence.words : 0;
  if (mixed > MAX_MIXED_CASE_SHARE) {
    return `the text is not language: ${percent(mixed)} of its words change from small letters to capitals inside the word (prose: under ${percent(MAX_MIXED_CASE_SHARE)})`;
  }
  return undefined;
}
