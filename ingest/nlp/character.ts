// A character as the engine builds it: the names it answers to, its mentions, gender votes and
// whether it is a person. Clustering makes them (name-clusters.ts), scoring decides their gender
// (character-scores.ts), description links join two (description-links.ts).
import type { Gender } from "./lexicon.ts";
import type { NameMention } from "./names.ts";

export interface Character {
  id: number;
  titles: Set<string>;
  /** Lower-cased name words known to be given names / surnames of this character. */
  firsts: Set<string>;
  lasts: Set<string>;
  /** Heads of "the X" names ("rabbit" for "the White Rabbit"). */
  heads: Set<string>;
  /** Name form (as written, e.g. "Miss Bennet") → occurrences. */
  forms: Map<string, number>;
  mentionCount: number;
  gender: Gender | undefined;
  votes: { m: number; f: number };
  person: boolean;
  /** Token where the character's first name mention starts. */
  firstStart: number;
}

/** A character with no names, mentions or votes yet. */
export function emptyCharacter(id: number, gender: Gender | undefined): Character {
  return {
    id,
    titles: new Set(),
    firsts: new Set(),
    lasts: new Set(),
    heads: new Set(),
    forms: new Map(),
    mentionCount: 0,
    gender,
    votes: { m: 0, f: 0 },
    person: false,
    firstStart: Number.POSITIVE_INFINITY,
  };
}

/**
 * Moves every name, mention and vote of `from` to `into`; `from` is left empty and no person, no
 * longer a candidate for anything. Clustering merges elaborations with it, and description links
 * (after attribution) a description with the name it turns out to be.
 */
export function mergeCharacter(into: Character, from: Character, names: NameMention[]): void {
  for (const t of from.titles) into.titles.add(t);
  for (const w of from.firsts) into.firsts.add(w);
  for (const w of from.lasts) into.lasts.add(w);
  for (const w of from.heads) into.heads.add(w);
  for (const [form, n] of from.forms) into.forms.set(form, (into.forms.get(form) ?? 0) + n);
  into.mentionCount += from.mentionCount;
  into.firstStart = Math.min(into.firstStart, from.firstStart);
  into.votes.m += from.votes.m;
  into.votes.f += from.votes.f;
  if (!into.gender) into.gender = from.gender;
  for (const m of names) if (m.char === from.id) m.char = into.id;
  from.forms = new Map();
  from.mentionCount = 0;
  from.firsts = new Set();
  from.lasts = new Set();
  from.heads = new Set();
  from.person = false;
}
