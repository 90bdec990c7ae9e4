/**
 * The one analyzer the embedded BM25 index uses for documents and queries alike, so a query term
 * matches exactly when the same word appears in a chunk.
 *
 * 1. Compatibility decomposition (NFKD), so presentation forms, ligatures and full-width letters
 *    fall apart into base letters plus marks.
 * 2. Marks removed: Latin/Greek/Cyrillic accents (café = cafe) and Arabic-script harakat, hamza and
 *    madda above, superscript alef and Quranic marks, plus tatweel and zero-width joiners. Urdu is
 *    written with and without these, so folding them makes both spellings meet. Marks of other
 *    scripts (Devanagari vowel signs, …) carry meaning and stay.
 * 3. Arabic-keyboard letters folded to their Urdu forms (ي ى → ی, ك → ک, ه ە → ہ) and Arabic-Indic
 *    digits to ASCII; lower-cased with the locale-independent toLowerCase; recomposed (NFC).
 * 4. Words are runs of letters, marks and digits, so punctuation splits them ("Pierre's" yields
 *    "pierre"); a run in a script written without spaces (Chinese, Japanese, Thai, …) is further cut
 *    with Intl.Segmenter's dictionary. Segmenting everything that way would cost three times more.
 * 5. A small English stop list (Lucene's, plus the "s" and "t" left by "'s" and "n't") dropped, and plain English plurals reduced (Harman's
 *    S-stemmer, ASCII words only) so "letters" finds "letter". No other stemming.
 */

/** Bump when the output changes: persisted indexes built with another version are rebuilt. */
export const TOKENIZER_VERSION = 1;

const STRIPPED = /[\u0300-\u036f\u0610-\u061a\u0640\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e8\u06ea-\u06ed\u00ad\u200b-\u200d\u2060\ufeff]/g;

const FOLDED: Record<string, string> = {
  "\u064a": "\u06cc", // ARABIC YEH → FARSI YEH
  "\u0649": "\u06cc", // ALEF MAKSURA → FARSI YEH
  "\u0643": "\u06a9", // ARABIC KAF → KEHEH
  "\u0647": "\u06c1", // ARABIC HEH → HEH GOAL
  "\u06d5": "\u06c1", // AE → HEH GOAL
};
for (let d = 0; d <= 9; d++) {
  FOLDED[String.fromCharCode(0x0660 + d)] = String(d);
  FOLDED[String.fromCharCode(0x06f0 + d)] = String(d);
}
const FOLDABLE = new RegExp(`[${Object.keys(FOLDED).join("")}]`, "g");

const ASCII = /^[\x00-\x7f]*$/;
const ASCII_WORD = /^[a-z]+$/;
const WORD = /[\p{L}\p{M}\p{N}]+/gu;
const UNSPACED_SCRIPT = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;

const STOP_WORDS = new Set(
  "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with s t".split(" "),
);

const segmenter = new Intl.Segmenter("und", { granularity: "word" });

/** Text folded as described above, before it is cut into words. */
export function normalizeText(text: string): string {
  // Nothing below changes ASCII except case; most English chunks skip two normalisation passes.
  if (ASCII.test(text)) return text.toLowerCase();
  return text
    .normalize("NFKD")
    .replace(STRIPPED, "")
    .replace(FOLDABLE, (c) => FOLDED[c]!)
    .toLowerCase()
    .normalize("NFC");
}

/** Harman's S-stemmer: ies → y, es → e, s → "" with the usual exceptions. */
function stemPlural(word: string): string {
  if (!word.endsWith("s") || word.length <= 3 || !ASCII_WORD.test(word)) return word;
  if (word.endsWith("ies") && !word.endsWith("eies") && !word.endsWith("aies")) return word.slice(0, -3) + "y";
  if (word.endsWith("es") && !word.endsWith("aes") && !word.endsWith("ees") && !word.endsWith("oes")) return word.slice(0, -1);
  if (word.endsWith("us") || word.endsWith("ss")) return word;
  return word.slice(0, -1);
}

function addTerm(terms: string[], word: string): void {
  if (!STOP_WORDS.has(word)) terms.push(stemPlural(word));
}

/** Index and query terms of `text`, in order, repeats kept (BM25 counts them). */
export function tokenize(text: string): string[] {
  const terms: string[] = [];
  const normalized = normalizeText(text);
  const unspaced = UNSPACED_SCRIPT.test(normalized);
  for (const [word] of normalized.matchAll(WORD)) {
    if (!unspaced || !UNSPACED_SCRIPT.test(word)) {
      addTerm(terms, word);
      continue;
    }
    for (const segment of segmenter.segment(word)) if (segment.isWordLike) addTerm(terms, segment.segment);
  }
  return terms;
}
