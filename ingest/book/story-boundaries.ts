/**
 * Where the stories of a collection begin ("ADVENTURE I. A SCANDAL IN BOHEMIA", "II. The Red-Headed
 * League"), read from the book's paragraphs. A novel's chapter headings ("CHAPTER I.", "Chapter 1",
 * "BOOK ONE: 1805") are not story headings. Pure: no I/O.
 */

/** Fewer story headings than this and the book is not a collection. */
export const MIN_STORIES = 3;
/** Prose paragraphs a story has at least: headings closer together are a table of contents. */
export const MIN_STORY_PARAGRAPHS = 5;
/** A heading is a short paragraph. */
export const MAX_HEADING_WORDS = 12;

const ROMAN: Record<string, number> = { i: 1, v: 5, x: 10, l: 50, c: 100 };
const WORD_NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
// "ADVENTURE I.", "Story 3: …": a word that says the numbered part is a story.
const LABELLED = /^(?:adventure|story|tale)\s+([ivxlc]+|\d{1,3}|[a-z]+)\b[.:]?(?:\s+(.*))?$/i;
// "II. THE RED-HEADED LEAGUE": a number, a stop and a title.
const NUMBERED_TITLE = /^([ivxlc]+|\d{1,3})[.:]\s+(\S.*)$/i;
/** Words a title prints in lower case ("The Man with the Twisted Lip"). */
export const TITLE_SMALL_WORDS = new Set(["a", "an", "and", "as", "at", "but", "by", "for", "from", "in", "into", "nor", "of", "on", "or", "the", "to", "upon", "with"]);

/** 4 for "IV", "4" or "four"; undefined for anything else. */
export function numberOf(word: string): number | undefined {
  const w = word.toLowerCase();
  if (/^\d+$/.test(w)) return Number(w);
  const spelled = WORD_NUMBERS.indexOf(w);
  if (spelled >= 0) return spelled + 1;
  if (!/^[ivxlc]+$/.test(w)) return undefined;
  let total = 0;
  for (let k = 0; k < w.length; k++) {
    const v = ROMAN[w[k]!]!;
    const next = ROMAN[w[k + 1] ?? ""] ?? 0;
    total += v < next ? -v : v;
  }
  return total;
}

/** A title: every word capitalised, but for small words ("The Man with the Twisted Lip"). */
function isTitle(text: string): boolean {
  const words = text.replace(/[.:]$/, "").split(/\s+/).filter(Boolean);
  return words.length > 0 && /\p{L}/u.test(text) && words.every((w, k) => /^[^\p{L}]*\p{Lu}/u.test(w) || (k > 0 && TITLE_SMALL_WORDS.has(w.toLowerCase())));
}

/** The story number a paragraph announces, or undefined when it is not a story heading. */
export function storyHeading(paragraph: string): number | undefined {
  const text = paragraph.replace(/\s+/g, " ").trim();
  if (text === "" || text.split(" ").length > MAX_HEADING_WORDS) return undefined;
  const labelled = LABELLED.exec(text);
  if (labelled) return numberOf(labelled[1]!);
  const numbered = NUMBERED_TITLE.exec(text);
  if (numbered && isTitle(numbered[2]!)) return numberOf(numbered[1]!);
  return undefined;
}

/**
 * Indices of the paragraphs that open each story of a collection, in order; [] when the book is
 * not a collection (fewer than MIN_STORIES headings numbered in sequence). Headings with fewer than
 * MIN_STORY_PARAGRAPHS paragraphs before the next one (a table of contents) are skipped.
 */
export function storyBoundaries(paragraphs: readonly string[]): number[] {
  const found: { at: number; n: number }[] = [];
  paragraphs.forEach((p, at) => {
    const n = storyHeading(p);
    if (n !== undefined) found.push({ at, n });
  });
  const kept = found.filter((h, k) => (found[k + 1]?.at ?? paragraphs.length) - h.at > MIN_STORY_PARAGRAPHS);
  // Numbered in sequence: each heading one more than the one before.
  const run: { at: number; n: number }[] = [];
  for (const h of kept) {
    if (run.length > 0 && h.n !== run[run.length - 1]!.n + 1) {
      if (run.length >= MIN_STORIES) break;
      run.length = 0;
    }
    if (run.length === 0 && h.n !== 1) continue;
    run.push(h);
  }
  return run.length >= MIN_STORIES ? run.map((h) => h.at) : [];
}
