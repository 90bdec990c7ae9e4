import { isCapitalised } from "./capital-stats.ts";
import { HONORIFICS } from "./lexicon.ts";

// Titles that never stand alone as a name.
export const SHORT_TITLES = new Set(["mr", "mrs", "ms", "miss", "m", "mme", "mlle", "dr", "st", "rev", "capt", "col", "gen", "lieut", "lt", "sgt", "prof"]);

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
