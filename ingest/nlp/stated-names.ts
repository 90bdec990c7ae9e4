// Names the text itself says belong to one person: "Edward Bear, known to his friends as
// Winnie-the-Pooh", "Margaret, or Peggy as she was called", "John Hollis, called Jack". No shared
// word links such names, so clustering alone keeps them apart; the sentence is the evidence.
import { NARRATOR_ID } from "./attribution.ts";
import { mergeCharacter, type Character } from "./character.ts";
import type { NameMention } from "./names.ts";
import type { Tokenized } from "./tokenizer.ts";

// Words that may come between the comma and "known"/"called" ("better known as", "commonly called").
// Without one, "called" is as likely the other sense: "Mrs. Ashdown, called Kitty to her side".
const HEDGES = new Set(["also", "better", "commonly", "generally", "usually", "often", "always"]);
const NAMING_VERBS = new Set(["called", "nicknamed", "known", "styled", "christened", "named"]);
// Naming verbs that need no hedge: "known" only with "as" after it.
const PLAIN_NAMING = new Set(["known", "nicknamed"]);
// "known to his friends as", "called by everyone": the people who use the name, a few words at most.
const AUDIENCE_WORDS = 4;
const PRONOUNS = new Set(["he", "she", "they"]);
const PASSIVE = new Set(["was", "is", "were", "had", "been"]);

/**
 * Merges the characters of two names the text states are one person, unless they are of different
 * genders or one is the narrator's place.
 */
export function mergeStatedNames(tok: Tokenized, names: NameMention[], chars: Character[]): void {
  const startingAt = new Map<number, NameMention>();
  for (const m of names) startingAt.set(m.start, m);
  const lower = (i: number) => (i < tok.count ? tok.text[i]!.toLowerCase() : "");
  for (const first of names) {
    const second = statedAlias(first, lower, startingAt);
    if (!second) continue;
    const [a, b] = [chars[first.char], chars[second.char]];
    if (!a || !b || a === b || a.id === NARRATOR_ID || b.id === NARRATOR_ID) continue;
    if (a.gender && b.gender && a.gender !== b.gender) continue;
    const [into, from] = a.mentionCount >= b.mentionCount ? [a, b] : [b, a];
    mergeCharacter(into, from, names);
  }
}

/** The name `first` is said to go by, if the words after it say so. */
function statedAlias(first: NameMention, lower: (i: number) => string, startingAt: ReadonlyMap<number, NameMention>): NameMention | undefined {
  let i = first.end + 1;
  if (lower(i) !== ",") return undefined;
  i++;
  // "Margaret, or Peggy as she was called" / "…, or Peggy for short".
  if (lower(i) === "or") {
    const second = startingAt.get(i + 1);
    if (second && confirmsOr(lower, second.end + 1)) return second;
  }
  const hedged = HEDGES.has(lower(i));
  while (HEDGES.has(lower(i))) i++;
  if (!NAMING_VERBS.has(lower(i)) || (!hedged && !PLAIN_NAMING.has(lower(i)))) return undefined;
  const verb = lower(i++);
  // "known to his friends as", "called by all the village": skip the audience up to "as" or the name.
  const from = i;
  if (["to", "by", "among", "in"].includes(lower(i))) {
    while (i - from <= AUDIENCE_WORDS && lower(i) !== "as" && !startingAt.has(i)) i++;
  }
  if (lower(i) === "as") i++;
  else if (verb === "known") return undefined;
  return startingAt.get(i);
}

/** "as she was called", "as he was known", "for short" right after the second name. */
function confirmsOr(lower: (i: number) => string, i: number): boolean {
  if (lower(i) === "for" && lower(i + 1) === "short") return true;
  return lower(i) === "as" && PRONOUNS.has(lower(i + 1)) && PASSIVE.has(lower(i + 2)) && NAMING_VERBS.has(lower(i + 3));
}
