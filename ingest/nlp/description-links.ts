import type { Attribution } from "./attribution.ts";
import { mergeCharacter, type Character } from "./character.ts";
import type { NameMention } from "./names.ts";
import type { Quote } from "./quotes.ts";

// Replies naming the person a description's turn answers or is answered by, before the two are one:
// fewer is chance (a vocative to someone else in a group scene).
export const LINK_MIN_REPLIES = 5;
// …and at least this share of the times both are tagged near each other: a description and a name
// tagged side by side all through a scene, with the name only now and then called out, are two
// people talking (Kemp and the Invisible Man); the same man under two names is called by his name
// far more often than he is tagged beside himself.
export const LINK_MIN_SHARE = 0.1;
// Quotes either side, and tokens apart, that count as one exchange.
const NEAR_QUOTES = 6;
const NEAR_TOKENS = 300;

/** A description used as a name ("the Jew", "the beadle"): no given name, no surname. */
function isDescription(c: Character): boolean {
  return c.heads.size > 0 && c.firsts.size === 0 && c.lasts.size === 0;
}

/**
 * Descriptions that are a named character under another name, merged into that character: "said
 * the Jew" answered by "Fagin, my dear" time after time is Fagin. The evidence is the exchange
 * itself: the turn just before or after a description's turn calls one named person by name, far
 * more often than any other, of a gender that fits, and not merely because the two talk together.
 */
export function linkDescriptions(quotes: readonly Quote[], attribution: Attribution, names: NameMention[], chars: Character[]): void {
  const { speaker, addressee, mentionStart } = attribution;
  const near = (i: number, j: number) => j >= 0 && j < quotes.length && Math.abs(quotes[j]!.start - quotes[i]!.start) <= NEAR_TOKENS;
  const replies = new Map<number, Map<number, number>>();
  const together = new Map<string, number>();
  const bump = <K>(m: Map<K, number>, k: K) => m.set(k, (m.get(k) ?? 0) + 1);
  for (let i = 0; i < quotes.length; i++) {
    const d = speaker[i]!;
    if (d < 0 || !isDescription(chars[d]!)) continue;
    for (const j of [i - 1, i + 1]) {
      const n = addressee[j] ?? -1;
      if (!near(i, j) || n < 0 || n === d || speaker[j] === d || isDescription(chars[n]!)) continue;
      const counts = replies.get(d) ?? new Map<number, number>();
      bump(counts, n);
      replies.set(d, counts);
    }
    if (mentionStart[i]! < 0) continue;
    for (let j = Math.max(0, i - NEAR_QUOTES); j <= i + NEAR_QUOTES; j++) {
      const n = speaker[j] ?? -1;
      if (n >= 0 && n !== d && mentionStart[j]! >= 0 && near(i, j)) bump(together, `${d} ${n}`);
    }
  }
  for (const [d, counts] of replies) {
    const [best, second] = [...counts].sort((a, b) => b[1] - a[1]);
    if (!best || best[1] < LINK_MIN_REPLIES || (second && best[1] < 2 * second[1])) continue;
    const [n, pro] = best;
    if (pro < LINK_MIN_SHARE * (together.get(`${d} ${n}`) ?? 0)) continue;
    const from = chars[d]!;
    const into = chars[n]!;
    if (from.gender && into.gender && from.gender !== into.gender) continue;
    mergeCharacter(into, from, names);
    for (let q = 0; q < quotes.length; q++) {
      if (speaker[q] === d) speaker[q] = n;
      if (addressee[q] === d) addressee[q] = n;
    }
  }
}
