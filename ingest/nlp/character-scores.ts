// After clustering, what the text around each character's names says of them: their gender, from
// the pronouns that follow, and whether they are a person at all; and whether a name is a vocative.
import { FEMALE_PRONOUNS, GIVEN_NAMES, HONORIFICS, MALE_PRONOUNS, MOSTLY_MALE_TITLES } from "./lexicon.ts";
import type { Character } from "./character.ts";
import { formGender } from "./name-fit.ts";
import { isTagSubject, type NameMention } from "./names.ts";
import { classifyWords, type Tokenized } from "./tokenizer.ts";

const SKIP = 1;
const MALE = 2;
const FEMALE = 3;
// A name set in italics in one of every this many mentions, or more often, names a work or a ship.
const ITALIC_SHARE = 4;
const VOCATIVE_BEFORE = new Set([",", '"', "\u201c", "\u2018", "'", "dear", "dearest", "oh", "o", "my", "!", "ah", "good", "poor"]);
// Words before "<noun>, <Name>," that make the name an apposition: third-person possessives.
const APPOSED_AFTER = new Set(["his", "her", "their", "its"]);
const VOCATIVE_AFTER = new Set([",", "!", "?", ".", ";", "\u2014", "--", '"', "\u201d", "\u2019", "'"]);

/** "Oh, Jane," / "my dear Mr. Bennet!": the name addresses someone inside a quote. */
export function isVocative(tok: Tokenized, m: { start: number; end: number; inQuote: boolean }): boolean {
  if (!m.inQuote) return false;
  const before = tok.lower[m.start - 1] ?? "";
  const after = tok.text[m.end + 1] ?? "";
  // "Her daughter, Miss de Bourgh, will …": a name set off after "her <noun>" is that noun's
  // apposition, about someone, not to them. (After "the <noun>" it is as often an address: "the
  // Lord bless you, Mr. Brownlow" reads the same to a rule this size.)
  if (before === "," && APPOSED_AFTER.has(tok.lower[m.start - 3] ?? "") && /^[a-z]+$/.test(tok.lower[m.start - 2] ?? "")) return false;
  return VOCATIVE_BEFORE.has(before) && VOCATIVE_AFTER.has(after);
}

/**
 * Votes on each character's gender from the first he/she that follows its mentions in narration,
 * then decides who is a person: titles, dialogue tags, vocatives, given names and gendered pronouns
 * count for; "in"/"at"/"near" before the name counts against.
 */
export function scoreCharacters(tok: Tokenized, names: NameMention[], chars: Character[], inQuote: Uint8Array): void {
  const evidence = new Float64Array(chars.length);
  const bump = (id: number, x: number) => {
    evidence[id] = evidence[id]! + x;
  };
  const nameStarts = new Uint8Array(tok.count);
  for (const m of names) nameStarts[m.start] = 1;
  // Name mentions, and those in italics on their own ("_The Rivals_"): the title of a play, a
  // book, a ship or a paper; a person's name is set in italics only now and then, for stress.
  const mentions = new Uint32Array(chars.length);
  const italic = new Uint32Array(chars.length);
  // Object pronouns right after a name usually point at someone else ("Clara looked at him"): they
  // are skipped, not counted.
  const pronoun = classifyWords(tok, (lc) => (lc === "him" || lc === "her" ? SKIP : MALE_PRONOUNS.has(lc) ? MALE : FEMALE_PRONOUNS.has(lc) ? FEMALE : 0));
  for (const m of names) {
    if (m.char < 0) continue;
    const c = chars[m.char]!;
    mentions[c.id] = mentions[c.id]! + 1;
    if (tok.text[m.start - 1] === "_" && tok.text[m.end + 1] === "_") italic[c.id] = italic[c.id]! + 1;
    if (m.title !== undefined) bump(c.id, 2);
    if (isTagSubject(tok, m)) bump(c.id, 2);
    if (isVocative(tok, m)) bump(c.id, 1);
    if (m.placeContext) bump(c.id, -1.5);
    if (m.inQuote) continue;
    const para = tok.paragraph[m.start]!;
    for (let k = m.end + 1; k < tok.count && k <= m.end + 25; k++) {
      if (tok.paragraph[k] !== para || nameStarts[k]) break;
      // Past the mention's own sentence only the next sentence's first word still refers back to
      // it ("… said the Rabbit. He …"); later pronouns belong to whoever that sentence is about.
      if (tok.sentence[k] !== tok.sentence[m.end] && tok.inSentence[k]! > 0) break;
      if (inQuote[k]) continue;
      const kind = pronoun[tok.word[k]!];
      if (kind === MALE) {
        c.votes.m++;
        break;
      }
      if (kind === FEMALE) {
        c.votes.f++;
        break;
      }
    }
  }
  for (const c of chars) {
    let m = c.votes.m;
    let f = c.votes.f;
    const prior = formGender(undefined, [...c.firsts]);
    for (const t of c.titles) {
      const g = HONORIFICS.get(t);
      if (g === "m") m += 5;
      if (g === "f") f += 5;
      if (MOSTLY_MALE_TITLES.has(t)) m += 2;
    }
    if (prior === "m") m += 3;
    if (prior === "f") f += 3;
    if ((m >= 2 && m >= 1.5 * f) || (m >= 1 && f === 0)) c.gender = "m";
    else if ((f >= 2 && f >= 1.5 * m) || (f >= 1 && m === 0)) c.gender = "f";
    if (GIVEN_NAMES.has([...c.firsts][0] ?? "")) bump(c.id, 3);
    bump(c.id, Math.min(c.votes.m + c.votes.f, 10) * 0.5);
    c.person = evidence[c.id]! >= 2 && italic[c.id]! * ITALIC_SHARE < mentions[c.id]!;
  }
}
