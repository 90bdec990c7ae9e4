// Which name forms fit which character: the rules of how novels name people (titles, families,
// given names, one-off names). Clustering (name-clusters.ts) asks them for each form. Pure.
import type { Character } from "./character.ts";
import { FIRST_NAME_TITLES, GIVEN_NAMES, HONORIFICS, MILITARY_RANKS, MOSTLY_MALE_TITLES, NAME_PARTICLES, RANKS, type Gender } from "./lexicon.ts";
import type { NameMention } from "./names.ts";

/** One way the book writes a name ("Miss Bennet"), with every mention written so. */
export interface Form {
  key: string;
  title: string | undefined;
  parts: string[];
  /** parts, lower-cased. */
  words: string[];
  gender: Gender | undefined;
  definite: boolean;
  mentions: NameMention[];
}

// Bare uses that make a given name a name in its own right.
export const OWN_NAME_MIN = 3;
// How many times more often a man must be called by his given name than "Mr. <his surname>" is
// used for that "Mr." to be someone else (his father).
const GIVEN_NAME_OVER_TITLE = 5;
// How many times more often than any other unmarried woman of her surname the book must name the
// one "Miss <Surname>" is taken for.
const HEROINE_LEAD = 5;
// How many times more often than any other member of the family the book must name the one its
// bare surname is taken for.
const FAMILY_LEAD = 2;

export function formGender(title: string | undefined, parts: string[]): Gender | undefined {
  if (title !== undefined) {
    const g = HONORIFICS.get(title);
    if (g) return g;
    if (MOSTLY_MALE_TITLES.has(title)) return "m";
  }
  const first = parts[0]?.toLowerCase();
  return first !== undefined && (parts.length > 1 || title === undefined || FIRST_NAME_TITLES.has(title))
    ? GIVEN_NAMES.get(first)
    : undefined;
}

export function formKey(m: NameMention): string {
  return (m.definite ? "the " : m.title !== undefined ? m.title + " " : "") + m.parts.join(" ").toLowerCase();
}

export function compatible(c: Character, f: Form): boolean {
  const g = f.gender;
  if (g && c.gender && g !== c.gender) return false;
  // A married title names a different person from the same surname's "Miss" or first name.
  if (f.title === "mrs" && !c.titles.has("mrs")) return false;
  // So does "Lady" before a surname: Lady Bertram is not the untitled Maria Bertram, her daughter.
  if (f.title === "lady" && f.words.length === 1 && !c.titles.has("lady") && c.lasts.has(f.words[0]!) && !c.firsts.has(f.words[0]!)) return false;
  const words = f.words;
  // Different titles before one surname are different people (Major Sholto, Mr. Sholto), except
  // "Master", the old full form of "Mr.": "Master Holmes" before a surname is Mr. Holmes; and ranks,
  // which one person holds several of ("General Kutúzov", "Prince Kutúzov"; "Countess Olenska",
  // "Madame Olenska").
  const surnameOnly = words.length === 1 && c.lasts.has(words[0]!) && !c.firsts.has(words[0]!);
  const mister = f.title === "master" && c.titles.has("mr") && surnameOnly;
  // A bare surname is not a wife known by her married title ("Toller" beside "Mrs. Toller"): the
  // narration calls men by bare surnames, women hardly ever.
  if (f.title === undefined && !f.definite && surnameOnly && c.titles.size > 0 && [...c.titles].every((t) => t === "mrs")) return false;
  const ranked = f.title !== undefined && RANKS.has(f.title) && [...c.titles].every((t) => RANKS.has(t));
  if (f.title !== undefined && c.titles.size > 0 && !c.titles.has(f.title) && !mister && !ranked) return false;
  if (f.definite) return c.heads.has(words[words.length - 1]!);
  // "Lord St. Simon", "Mr. de Winter": a surname with its particle, no given name.
  if (particleSurname(words)) return c.lasts.has(words[words.length - 1]!);
  if (words.length >= 2) return c.lasts.has(words[words.length - 1]!) && c.firsts.has(words[0]!);
  const w = words[0]!;
  // "Colonel Openshaw" is not John Openshaw, whom the book never gives a rank: an officer's rank and
  // surname join a full name only once the book has written the rank with it.
  if (f.title !== undefined && MILITARY_RANKS.has(f.title) && c.titles.size === 0 && c.firsts.size > 0 && !c.firsts.has(w)) return false;
  if (f.title !== undefined && !FIRST_NAME_TITLES.has(f.title)) return c.lasts.has(w);
  return c.firsts.has(w) || c.lasts.has(w) || (f.title === undefined && c.heads.has(w));
}

export function particleSurname(words: readonly string[]): boolean {
  return words.length >= 2 && NAME_PARTICLES.has(words[0]!);
}

/** An untitled single word the book uses often: a given name (or a one-word name) in its own right. */
export function bareOwnName(f: Form): boolean {
  return f.title === undefined && !f.definite && f.words.length === 1 && f.mentions.length >= OWN_NAME_MIN;
}

/**
 * A full name met once, after the book has long used its given name, with a surname the book uses
 * nowhere else ("Lady Mary Grierson" in chapter 12 of a book that says "Mary" from chapter 1): when every full name the given name fits
 * is such a latecomer, the given name is someone of its own. A full name that comes first
 * introduces whoever the given name then means ("Tobias Fenwick … Tobias"), and beside an earlier
 * owner a latecomer stays a candidate: "Miss Mary Holder", met once, is the "Mary" of her own story.
 */
export function latecomer(c: Character, f: Form, wordUses: ReadonlyMap<string, number>): boolean {
  const w = f.words[0]!;
  // An elaboration ends on the name it elaborates ("Brave Wren" of Wren): that one stays a candidate.
  if (c.mentionCount > 1 || !c.firsts.has(w) || c.lasts.has(w) || c.lasts.size === 0) return false;
  // A surname the book uses elsewhere is a family it knows: "Miss Jane Bennet", met once, is the Jane
  // of the Bennets all along.
  if ([...c.lasts].some((l) => (wordUses.get(l) ?? 0) > c.mentionCount)) return false;
  let before = 0;
  for (const m of f.mentions) if (m.start < c.firstStart && ++before >= OWN_NAME_MIN) return true;
  return false;
}

/**
 * "Miss Morland", when no Morland is called Miss yet, is the unmarried Morland woman the book names
 * HEROINE_LEAD times as often as any other (Catherine, not the sister met twice); with two of like
 * weight (the Miss Bennets) it is neither: by custom that is the eldest, whom nothing here tells.
 */
export function heroine(cands: Character[], surname: string, forms: Map<string, Form>): Character | undefined {
  const [top, next] = daughters(cands, surname, forms);
  return top !== undefined && (next === undefined || weight(top, forms) >= HEROINE_LEAD * weight(next, forms)) ? top : undefined;
}

/**
 * The member of a family the bare surname means: when it is every candidate's surname, the one the
 * book names FAMILY_LEAD times as often as any other by their own given name, bare or titled ("Prince
 * Andrew"): the son whose war the book follows, not his father or younger brother. With two of
 * like weight, undefined.
 */
export function familyLead(cands: Character[], surname: string, forms: Map<string, Form>): Character | undefined {
  if (!cands.every((c) => c.lasts.has(surname) && !c.firsts.has(surname))) return undefined;
  const byGiven = new Map<string, number>();
  for (const f of forms.values()) {
    if (f.words.length === 1 && !f.definite && (f.title === undefined || FIRST_NAME_TITLES.has(f.title))) byGiven.set(f.words[0]!, (byGiven.get(f.words[0]!) ?? 0) + f.mentions.length);
  }
  const lead = (c: Character) => c.mentionCount + [...c.firsts].reduce((n, g) => n + (byGiven.get(g) ?? 0), 0);
  const [top, next] = [...cands].sort((a, b) => lead(b) - lead(a));
  return top !== undefined && (next === undefined || lead(top) >= FAMILY_LEAD * lead(next)) ? top : undefined;
}

/** How much the book names a character: its mentions so far and every bare use of its given names. */
function weight(c: Character, forms: Map<string, Form>): number {
  return c.mentionCount + [...c.firsts].reduce((n, g) => n + (forms.get(g)?.mentions.length ?? 0), 0);
}

/** The unmarried women of a surname among the candidates, the most named first. */
function daughters(cands: Character[], surname: string, forms: Map<string, Form>): Character[] {
  return cands
    .filter((c) => c.gender !== "m" && c.lasts.has(surname) && !c.firsts.has(surname) && !c.titles.has("mrs") && !c.titles.has("lady"))
    .sort((a, b) => weight(b, forms) - weight(a, forms));
}

/**
 * The daughters of a surname the book names as sisters: each named more than once, and none so
 * slight beside the most named (HEROINE_LEAD times less) that she may be the same woman under
 * another name ("Annie P. Miller" on Daisy Miller's card) or her mother's maiden name.
 */
export function sisters(cands: Character[], surname: string, forms: Map<string, Form>): Character[] {
  const all = daughters(cands, surname, forms);
  const top = all[0] === undefined ? 0 : weight(all[0], forms);
  return all.filter((c) => weight(c, forms) > 1 && HEROINE_LEAD * weight(c, forms) >= top);
}

/**
 * "Miss Bertram" where the family has several daughters: by custom the eldest, while her younger
 * sisters are "Miss Julia" or "Miss Julia Bertram". The one daughter the book never styles "Miss"
 * with her given name is the eldest; with none or several such, it is no one yet known.
 */
export function eldestDaughter(sisters: Character[]): Character | undefined {
  const styledByGivenName = (c: Character) =>
    [...c.forms.keys()].some((form) => {
      const [title, given] = form.split(" ");
      return title?.toLowerCase() === "miss" && given !== undefined && c.firsts.has(given.toLowerCase());
    });
  const eldest = sisters.filter((c) => !styledByGivenName(c));
  return eldest.length === 1 ? eldest[0] : undefined;
}

/**
 * "Mr. Price" in the narration is not William Price when the book calls William by his given name
 * many times more: a man the narrative knows by his given name is the son, and "Mr. <Surname>" is
 * the head of the family, whose given name the book may never give.
 */
export function fatherOf(c: Character, f: Form, forms: Map<string, Form>): boolean {
  if (f.title === undefined || HONORIFICS.get(f.title) !== "m" || FIRST_NAME_TITLES.has(f.title) || f.words.length !== 1) return false;
  const surname = f.words[0]!;
  if (!c.lasts.has(surname) || c.firsts.has(surname)) return false;
  // Said to his face ("Please, Mr. Herriton"), it is how others address the man the narrator calls
  // Philip; only the narrator's own "Mr. Price" is a second man.
  if (f.mentions.filter((m) => m.inQuote).length * 2 >= f.mentions.length) return false;
  return [...c.firsts].some((g) => (forms.get(g)?.mentions.length ?? 0) >= GIVEN_NAME_OVER_TITLE * f.mentions.length);
}
