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
// Tokens between two of a description's tags that still count as one scene.
const SCENE_TOKENS = 1000;

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
    link(d, n, quotes, attribution, names, chars);
  }
  for (const [d, n] of sceneCompanions(quotes, attribution, names, chars)) link(d, n, quotes, attribution, names, chars);
}

/** Merges description `d` into named character `n` (when their genders fit) and moves its quotes. */
function link(d: number, n: number, quotes: readonly Quote[], attribution: Attribution, names: NameMention[], chars: Character[]): void {
  const { speaker, addressee } = attribution;
  const from = chars[d]!;
  const into = chars[n]!;
  if (!isDescription(from) || (from.gender && into.gender && from.gender !== into.gender)) return;
  mergeCharacter(into, from, names);
  for (let q = 0; q < quotes.length; q++) {
    if (speaker[q] === d) speaker[q] = n;
    if (addressee[q] === d) addressee[q] = n;
  }
}

/**
 * Descriptions that speak, by their own tag, only in scenes where one named person also speaks by
 * name, in two scenes or more, and never in the turn just before or after that person's: "the
 * child declared" in every scene where "said Peter" is, the two never answering each other, is
 * the boy told of now by name, now by description. Two people who keep company answer each other
 * now and then (a landlord and his lodger, an officer and the doctor he guards); a description seen
 * in one scene only, beside two such people, or tagged fewer times than a vocative link needs
 * replies (a sovereign tagged once in each of two court scenes) is no evidence.
 */
function sceneCompanions(quotes: readonly Quote[], attribution: Attribution, names: NameMention[], chars: Character[]): [number, number][] {
  const { speaker, mentionStart } = attribution;
  const nameStart = new Set<number>();
  for (const m of names) if (m.char >= 0) nameStart.add(m.start);
  // Per quote, the speaker when its own tag names them (a name or a description, not a pronoun).
  const named = (q: number) => (q >= 0 && q < quotes.length && nameStart.has(mentionStart[q]!) ? speaker[q]! : -1);
  // Per description, its scenes as [first quote, last quote] of runs of its tags, and how many tags.
  const scenes = new Map<number, [number, number][]>();
  const tags = new Map<number, number>();
  // Speakers of turns next to each other, however they were found: a companion who ever answers is someone else.
  const answered = new Set<string>();
  for (let i = 1; i < quotes.length; i++) {
    if (quotes[i]!.paragraph === quotes[i - 1]!.paragraph) continue;
    answered.add(`${speaker[i]} ${speaker[i - 1]}`);
    answered.add(`${speaker[i - 1]} ${speaker[i]}`);
  }
  for (let i = 0; i < quotes.length; i++) {
    const d = named(i);
    if (d < 0 || !isDescription(chars[d]!)) continue;
    tags.set(d, (tags.get(d) ?? 0) + 1);
    const runs = scenes.get(d) ?? [];
    const last = runs[runs.length - 1];
    if (last && quotes[i]!.start - quotes[last[1]]!.start <= SCENE_TOKENS) last[1] = i;
    else runs.push([i, i]);
    scenes.set(d, runs);
  }
  const links: [number, number][] = [];
  for (const [d, runs] of scenes) {
    if (runs.length < 2 || tags.get(d)! < LINK_MIN_REPLIES) continue;
    let shared: Set<number> | undefined;
    for (const [first, last] of runs) {
      const here = new Set<number>();
      let j = first;
      while (j > 0 && quotes[first]!.start - quotes[j - 1]!.start <= SCENE_TOKENS) j--;
      for (; j < quotes.length && quotes[j]!.start - quotes[last]!.start <= SCENE_TOKENS; j++) {
        const n = named(j);
        if (n >= 0 && n !== d && !isDescription(chars[n]!) && (!shared || shared.has(n))) here.add(n);
      }
      shared = here;
    }
    const companions = [...shared!].filter((n) => !answered.has(`${d} ${n}`));
    if (companions.length === 1) links.push([d, companions[0]!]);
  }
  return links;
}
