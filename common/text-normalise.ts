/**
 * Text as a reader sees it, not as it is encoded: what a spelling of a word or a line looks like once
 * compatibility forms, invisible characters, accents and look-alike letters are taken away. The
 * spoiler guard matches a model's reply against the book with it (api/chat/spoiler-filter.ts,
 * ingest/spoiler-guard/), and the prompt's fences tell a forged marker line by it (common/prompt/fences.ts),
 * so that "Ａｓｈｂｙ", "Ash\u200bby", "Ashbý", "Аshby" (Cyrillic А) and "ᴀsʜʙʏ" are all "ashby".
 *
 * The skeleton follows Unicode TR39's: NFKC (full-width and mathematical letters, ligatures), the
 * default-ignorable code points removed (zero-width spaces and joiners, soft hyphens, Hangul fillers,
 * variation selectors, bidi controls), combining marks removed after NFD (accents), then each
 * look-alike letter replaced by the Latin letter it is drawn like (LOOK_ALIKES, from Unicode's
 * confusables.txt for the scripts whose letters pass for Latin ones). Case is kept there (a small
 * capital or a Cyrillic capital counts as a capital, which the guard reads as evidence of a name);
 * `wordKey` folds it. Pure: no I/O.
 */

/**
 * Look-alikes of Latin letters, as pairs of equal-length strings: each character of the first is
 * drawn like the letter at the same place in the second. Capitals and small capitals map to capitals.
 */
const LOOK_ALIKE_ROWS: readonly (readonly [script: string, from: string, to: string])[] = [
  ["Cyrillic capitals", "АВЕЅІЈКМНОРСТХУҮԚԜӀҺԌ", "ABESIJKMHOPCTXYYQWIHG"],
  ["Cyrillic small letters", "аеорсухѕіјԁԛԝһүӏвкмнт", "aeopcyxsijdqwhylBKMHT"],
  ["Greek capitals", "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹͿ", "ABEZHIKMNOPTYXCJ"],
  ["Greek small letters", "αογιρχυνϲϳηκτ", "aoyipxuvcjnKT"],
  ["Armenian", "ՍՏՕԼագզհոռսցօ", "USOLwqqhnnugo"],
  ["Cherokee capitals", "ᎠᎡᎢᎥᎩᎪᎫᎬᎳᎷᎻᏀᏂᏃᏏᏒᏔᏕᏙᏚᏞᏟᏢᏦᏧᏳᏴ", "DRTiyAJEWMHGhZbRWSVSLCPKdGB"],
  ["Lisu", "ꓐꓑꓓꓔꓖꓗꓙꓚꓜꓝꓟꓠꓡꓢꓣꓦꓧꓪꓫꓬꓮꓰꓲꓳꓴ", "BPDTGKJCZFMNLSRVHWXYAEIOU"],
  ["Latin small capitals", "ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘꞯʀꜱᴛᴜᴠᴡʏᴢ", "ABCDEFGHIJKLMNOPQRSTUVWYZ"],
  ["Latin letters without a decomposition", "ıȷɑɡɩøØłŁđĐħĦŧŦ", "ijagioOlLdDhHtT"],
];

/**
 * Characters drawn as angle brackets, or as two of them ("«", "≪"): "<" and ">", their full-width,
 * small and vertical forms, and the look-alikes of other blocks (Canadian syllabics, modifier letters,
 * ornaments, mathematical brackets); every character NFKC turns into one of them is one of them. A
 * fence marker is a run of them.
 */
export const ANGLE_BRACKETS = "<>‹›«»\u2329\u232a〈〉《》︽︾︿﹀⟨⟩⟪⟫≪≫⋘⋙＜＞﹤﹥˂˃ᐸᐳ❬❭❮❯❰❱⧼⧽⦉⦊⦑⦒";

/** Letters in blocks laid out A to Z with no compatibility decomposition (negative circled and squared, regional indicators). */
const ALPHABET_BLOCKS = [0x1f150, 0x1f170, 0x1f1e6];

export const LOOK_ALIKES: ReadonlyMap<string, string> = (() => {
  const map = new Map<string, string>();
  for (const [script, from, to] of LOOK_ALIKE_ROWS) {
    const chars = [...from];
    if (chars.length !== to.length) throw new Error(`look-alike row ${script} is misaligned`);
    chars.forEach((c, i) => map.set(c, to[i]!));
  }
  // Cherokee's small letters (U+AB70…) are drawn as small capitals of the capitals above.
  for (const [c, latin] of [...map]) if (c >= "\u13a0" && c <= "\u13f5") map.set(c.toLowerCase(), latin);
  for (const start of ALPHABET_BLOCKS) for (let i = 0; i < 26; i++) map.set(String.fromCodePoint(start + i), String.fromCharCode(65 + i));
  // The modifier apostrophe is a letter to Unicode but reads as an apostrophe ("Wickhamʼs").
  map.set("\u02bc", "'");
  return map;
})();

const IGNORABLE = /\p{Default_Ignorable_Code_Point}/gu;
const MARKS = /\p{M}/gu;
const ASCII_WORD = /^[A-Za-z0-9]*$/;
const NOT_WORD = /[^\p{L}\p{N}]/gu;

/**
 * A word of a text: letters and digits, with the marks and invisible characters that may sit inside
 * one (so "Ash\u200bby" and a decomposed "Ashb\u0301y" are one word each), and the enclosed and
 * squared letters that read as letters. A match may key to nothing (a lone zero-width space): skip it.
 */
export const WORD_PATTERN = /[\p{L}\p{N}\p{M}\p{Default_Ignorable_Code_Point}\u249c-\u24e9\u{1f110}-\u{1f189}\u{1f1e6}-\u{1f1ff}]+/gu;

function replaceLookAlikes(text: string): string {
  let out = "";
  for (const c of text) out += LOOK_ALIKES.get(c) ?? c;
  return out;
}

/**
 * The TR39-style skeleton of a text, case kept. Look-alikes are replaced before NFKC too, which
 * would otherwise turn some into letters that no longer look like the Latin ones (the lunate sigma
 * "ϲ", drawn like "c", into "ς").
 */
export function skeleton(text: string): string {
  if (ASCII_WORD.test(text)) return text;
  return replaceLookAlikes(replaceLookAlikes(text).normalize("NFKC").replace(IGNORABLE, "").normalize("NFD").replace(MARKS, ""));
}

/** Case folded beyond lower case: "ß" is "ss", a final sigma is a sigma. */
const FOLDS: Readonly<Record<string, string>> = { ß: "ss", ς: "σ" };

/**
 * What a text spells: its skeleton case-folded, letters and digits only. Equal keys read alike.
 * Look-alikes are replaced again after lower-casing, for letters whose capital has none ("Γ", whose
 * small "γ" is drawn like "y"). A letter whose capital and small forms look like different Latin
 * letters (Greek "Η" and "η": "H" and "n") keys differently in capitals than in small letters.
 */
export function spelledKey(text: string): string {
  if (ASCII_WORD.test(text)) return text.toLowerCase();
  return replaceLookAlikes(skeleton(text).toLowerCase())
    .toLowerCase()
    .replace(MARKS, "")
    .replace(/[ßς]/g, (c) => FOLDS[c]!)
    .replace(NOT_WORD, "");
}

/** How a word is written, which says whether it may be a name: "lower" ("crane"), "capitalised" ("Crane"), "upper" ("CRANE"). */
export type WordCase = "lower" | "capitalised" | "upper";

export function wordCase(word: string): WordCase {
  const letters = skeleton(word).replace(/\P{L}/gu, "");
  if (!/^\p{Lu}|^\p{Lt}/u.test(letters)) return "lower";
  return letters.length > 1 && !/\p{Ll}/u.test(letters) ? "upper" : "capitalised";
}

/**
 * The case of a word of ASCII letters and digits (wordCase, without normalising), or null for any
 * other word: most words of most books, told apart without a look-up.
 */
function asciiCase(word: string): WordCase | null {
  let letters = 0;
  let upper = 0;
  let firstUpper = false;
  for (let i = 0; i < word.length; i++) {
    const c = word.charCodeAt(i);
    if (c >= 97 && c <= 122) letters++;
    else if (c >= 65 && c <= 90) {
      if (letters === 0) firstUpper = true;
      letters++;
      upper++;
    } else if (c < 48 || c > 57) return null;
  }
  if (!firstUpper) return "lower";
  return letters > 1 && upper === letters ? "upper" : "capitalised";
}

/** Distinct spellings whose key and case `eachWord` remembers. */
const MAX_REMEMBERED_SPELLINGS = 100_000;

/**
 * Visits the words of a text in order, each with its key (spelledKey) and case; a word that spells
 * nothing (a lone zero-width character) is not one. Both are remembered per spelling: a book has far
 * fewer distinct words than words, and a book's pass over them is on ingestion's path.
 */
export function eachWord(text: string, visit: (key: string, kase: WordCase, start: number, end: number) => void): void {
  const known = new Map<string, { key: string; kase: WordCase }>();
  const pattern = new RegExp(WORD_PATTERN);
  for (let m = pattern.exec(text); m; m = pattern.exec(text)) {
    const word = m[0];
    const ascii = asciiCase(word);
    if (ascii !== null) {
      visit(ascii === "lower" ? word : word.toLowerCase(), ascii, m.index, m.index + word.length);
      continue;
    }
    let seen = known.get(word);
    if (seen === undefined) {
      if (known.size >= MAX_REMEMBERED_SPELLINGS) known.clear();
      seen = { key: spelledKey(word), kase: wordCase(word) };
      known.set(word, seen);
    }
    if (seen.key) visit(seen.key, seen.kase, m.index, m.index + word.length);
  }
}

export interface KeyedWord {
  key: string;
  kase: WordCase;
  /** The word as written. */
  word: string;
}

/** The words of a short text (a name, a reply's tail), as `eachWord` sees them. */
export function wordsOf(text: string): KeyedWord[] {
  const words: KeyedWord[] = [];
  eachWord(text, (key, kase, start, end) => words.push({ key, kase, word: text.slice(start, end) }));
  return words;
}

/** A short text's word keys, in order. */
export const keysOf = (text: string) => wordsOf(text).map((w) => w.key);

/** The keys a word may stand for: itself, and the singular of a plural ("ashbys", "vanes"). */
export const singulars = (key: string) => [key, ...(key.endsWith("s") ? [key.slice(0, -1)] : []), ...(key.endsWith("es") ? [key.slice(0, -2)] : [])];

/** What ends a sentence before a word, so that its capital says nothing. */
const SENTENCE_BREAKS = new Set([...".!?…:;\n\r\u2028\u2029\"“”«»"].map((c) => c.charCodeAt(0)));

/** Whether text[from, to) (the gap between two words) ends a sentence. */
export function breaksSentence(text: string, from: number, to: number): boolean {
  for (let i = Math.max(0, from); i < to; i++) if (SENTENCE_BREAKS.has(text.charCodeAt(i))) return true;
  return false;
}
