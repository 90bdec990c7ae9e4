import { UPPER_START } from "./capital-stats.ts";
import { CREDIT_LABELS, CREDIT_VERBS } from "./lexicon.ts";
import type { NameMention } from "./names.ts";
import type { Tokenized } from "./tokenizer.ts";

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
  const creditWord = i > 0 && UPPER_START.test(tok.text[i - 1]!);
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
