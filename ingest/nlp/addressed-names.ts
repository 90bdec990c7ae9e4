// A man the narration calls by his given name ("Gino") while the other people, in their speech,
// call him by title and surname ("Signor Carella"): the book may never write the two together, so
// no shared word links them. The evidence is where each name is used. Pure.
import { anyWithin } from "../../common/sorted.ts";
import { NARRATOR_ID } from "./attribution.ts";
import { mergeCharacter, type Character } from "./character.ts";
import type { NameMention } from "./names.ts";
import type { Tokenized } from "./tokenizer.ts";

// Narration paragraphs naming the titled surname before "never beside the given name" is evidence:
// in a handful, two people may simply not have met on the page.
const MIN_NARRATED = 5;
// Tokens around a use of the titled surname in which the given name counts as the same scene's.
const SCENE_TOKENS = 300;

interface Uses {
  starts: number[];
  inQuote: number;
  /** Paragraphs whose narration (outside quotes) names the character. */
  narrated: Set<number>;
}

/** A title before a surname and nothing more ("Signor Carella"): how others speak of a man. */
function titledSurnameOnly(c: Character): boolean {
  return c.titles.size > 0 && c.firsts.size === 0 && c.lasts.size === 1 && c.heads.size === 0;
}

/** A name of one word with never a title ("Gino"); a form of two words used once is noise ("Hitherto Gino"). */
function givenNameOnly(c: Character): boolean {
  return c.titles.size === 0 && c.heads.size === 0 && [...c.forms].every(([form, n]) => n === 1 || !form.includes(" "));
}

/**
 * Merges a titled surname used mostly in speech into the one given name that the narration uses
 * in the same scenes but never in a paragraph that names the titled surname too: two people in
 * one scene are sooner or later named side by side, one man under two names never is.
 */
export function mergeAddressedNames(tok: Tokenized, names: NameMention[], chars: Character[]): void {
  const uses = new Map<number, Uses>();
  for (const m of names) {
    if (m.char < 0 || m.char === NARRATOR_ID) continue;
    let u = uses.get(m.char);
    if (!u) uses.set(m.char, (u = { starts: [], inQuote: 0, narrated: new Set() }));
    u.starts.push(m.start);
    if (m.inQuote) u.inQuote++;
    else u.narrated.add(tok.paragraph[m.start]!);
  }
  const spoken = (u: Uses) => 2 * u.inQuote >= u.starts.length;
  const people = chars.filter((c) => c.person && uses.has(c.id));
  const given = people.filter((c) => givenNameOnly(c) && !spoken(uses.get(c.id)!));
  for (const t of people) {
    const tu = uses.get(t.id)!;
    if (!titledSurnameOnly(t) || tu.narrated.size < MIN_NARRATED || !spoken(tu)) continue;
    const fits = given.filter((g) => {
      if (g === t || g.mentionCount === 0 || (g.gender && t.gender && g.gender !== t.gender)) return false;
      const gu = uses.get(g.id)!;
      if ([...gu.narrated].some((p) => tu.narrated.has(p))) return false;
      const near = tu.starts.filter((s) => anyWithin(gu.starts, s, SCENE_TOKENS)).length;
      return 2 * near >= tu.starts.length;
    });
    if (fits.length !== 1) continue;
    const g = fits[0]!;
    const [into, from] = g.mentionCount >= t.mentionCount ? [g, t] : [t, g];
    mergeCharacter(into, from, names);
  }
}
