import { UPPER_START } from "./capital-stats.ts";
import { GENDERED_NOUNS, HONORIFICS, NOT_NAMES, SPEECH_VERBS } from "./lexicon.ts";
import type { NameMention } from "./names.ts";
import { classifyWords, type Tokenized } from "./tokenizer.ts";

/** Dialogue tags needed before a description ("the mariner") is taken as a character's name. */
export const EPITHET_MIN_TAGS = 3;
const MAX_EPITHET_WORDS = 3;
const WORD = /^\p{L}+$/u;

/** Lower-cased words of "the X Y" right after index i ("the"), stopping at punctuation. */
function nounPhraseAfter(tok: Tokenized, i: number): string[] | undefined {
  if (tok.lower[i] !== "the") return undefined;
  const words: string[] = [];
  for (let k = i + 1; k < tok.count && words.length <= MAX_EPITHET_WORDS; k++) {
    const w = tok.text[k]!;
    if (!WORD.test(w)) break;
    words.push(tok.lower[k]!);
  }
  const end = tok.text[i + 1 + words.length];
  if (words.length === 0 || words.length > MAX_EPITHET_WORDS || (end !== undefined && WORD.test(end))) return undefined;
  return words;
}

/**
 * A description fit to name someone: not a bare gender ("the man"), unless the book writes it as a
 * proper name, every word capitalised ("the Invisible Man").
 */
function acceptableHead(words: string[], capitalised: boolean): boolean {
  const head = words[words.length - 1]!;
  const gendered = GENDERED_NOUNS.has(head) && !(capitalised && words.length > 1);
  return !NOT_NAMES.has(head) && !gendered && !SPEECH_VERBS.has(head) && !head.endsWith("ly") && words.every((w) => !HONORIFICS.has(w) || words.length > 1);
}

const allCapitalised = (tok: Tokenized, from: number, to: number): boolean => {
  for (let k = from; k <= to; k++) if (!UPPER_START.test(tok.text[k]!)) return false;
  return true;
};

/**
 * Unnamed characters known by a description used in dialogue tags ("said the mariner", "the Cat
 * said"): once a description tags enough quotes, every "the <description>" becomes a mention.
 */
export function findEpithets(tok: Tokenized, inQuote: Uint8Array, names: NameMention[]): NameMention[] {
  const { count, text } = tok;
  const lowers = tok.lower;
  const counts = new Map<string, number>();
  const speech = classifyWords(tok, (lc) => (SPEECH_VERBS.has(lc) ? 1 : 0));
  for (let v = 1; v < count; v++) {
    if (inQuote[v] || !speech[tok.word[v]!]) continue;
    const after = nounPhraseAfter(tok, v + 1);
    if (after && acceptableHead(after, allCapitalised(tok, v + 2, v + 1 + after.length))) counts.set(after.join(" "), (counts.get(after.join(" ")) ?? 0) + 1);
    for (let t = v - 2; t >= Math.max(0, v - 1 - MAX_EPITHET_WORDS); t--) {
      if (lowers[t] !== "the") continue;
      const words = lowers.slice(t + 1, v);
      if (words.every((w) => WORD.test(w)) && acceptableHead(words, allCapitalised(tok, t + 1, v - 1))) counts.set(words.join(" "), (counts.get(words.join(" ")) ?? 0) + 1);
      break;
    }
  }
  const epithets = new Map<string, string[]>();
  for (const [key, n] of counts) if (n >= EPITHET_MIN_TAGS) epithets.set(key.split(" ")[0]!, [...(epithets.get(key.split(" ")[0]!) ?? []), key]);
  if (epithets.size === 0) return [];
  const taken = new Uint8Array(count);
  for (const m of names) taken.fill(1, m.start, m.end + 1);
  const out: NameMention[] = [];
  for (let i = 0; i + 1 < count; i++) {
    if (lowers[i] !== "the") continue;
    const keys = epithets.get(lowers[i + 1]!);
    if (!keys) continue;
    for (const key of keys) {
      const words = key.split(" ");
      const end = i + words.length;
      if (end >= count) continue;
      let ok = true;
      for (let k = 0; k < words.length && ok; k++) ok = lowers[i + 1 + k] === words[k];
      // The whole description, not the start of a longer one ("the voice" but not "the voice of").
      const next = text[end + 1];
      if (!ok || (next !== undefined && WORD.test(next) && /^\p{Ll}/u.test(next) && words.length > 1)) continue;
      let free = true;
      for (let k = i; k <= end && free; k++) free = taken[k] === 0;
      if (!free) continue;
      const parts = text.slice(i + 1, end + 1);
      out.push({ start: i, end, title: undefined, parts, definite: true, inQuote: inQuote[i] === 1, placeContext: false, char: -1 });
      break;
    }
  }
  return out;
}
