/**
 * What a character's name may be before it is stored, and how two names are compared (nameKey).
 * Names come from the book NLP engine or, for books it cannot read, from a model: either can produce a
 * name no reader could use, and one such name must cost only its own character, never the book (a
 * 10,000-character name once made the database refuse the whole list). Pure: no I/O.
 */

/** Longer than any name a novel gives a character ("Lord Fitzwilliam Darcy of Pemberley" is 35). */
export const MAX_CHARACTER_NAME_CHARS = 100;
/** Aliases kept per character; the model and the engine rarely find more than a handful. */
export const MAX_ALIASES = 20;

/** Control and format characters (and the line and paragraph separators), which never belong in a name. */
const INVISIBLE = /[\p{Cc}\p{Cf}\u2028\u2029]/gu;

export type NameCheck = { ok: true; name: string } | { ok: false; reason: string };

/** The name as it will be stored (NFC, invisible characters removed, spaces collapsed), or why it is refused. */
export function checkCharacterName(raw: string): NameCheck {
  const name = raw.normalize("NFC").replace(/\s+/g, " ").replace(INVISIBLE, "").replace(/ {2,}/g, " ").trim();
  if (name === "") return { ok: false, reason: "the name is empty" };
  const length = [...name].length;
  if (length > MAX_CHARACTER_NAME_CHARS) return { ok: false, reason: `the name is ${length} characters long (at most ${MAX_CHARACTER_NAME_CHARS})` };
  return { ok: true, name };
}

/** The aliases that pass checkCharacterName, cleaned, without the name itself or repeats, at most MAX_ALIASES. */
export function cleanAliases(name: string, aliases: readonly string[]): string[] {
  const kept: string[] = [];
  for (const alias of aliases) {
    const check = checkCharacterName(alias);
    if (check.ok && check.name !== name && !kept.includes(check.name)) kept.push(check.name);
  }
  return kept.slice(0, MAX_ALIASES);
}

/** A name as two names are compared: compatibility forms folded, spacing collapsed, case aside. */
export const nameKey = (name: string) => name.normalize("NFKC").replace(/\s+/g, " ").trim().toLowerCase();
