import { partitionPoint } from "../../common/sorted.ts";
import type { Character } from "./character.ts";
import { isVocative } from "./character-scores.ts";
import { SALIENCE_WINDOW } from "./conversation-decoding.ts";
import type { Gender } from "./lexicon.ts";
import type { NameMention } from "./names.ts";
import type { Quote } from "./quotes.ts";
import type { Tokenized } from "./tokenizer.ts";

const SELF_INTRODUCTION = new Set(["am", "'m", "\u2019m"]);
const ADDRESS_GENDER = new Map<string, Gender>([["sir", "m"], ["madam", "f"], ["ma'am", "f"], ["ma\u2019am", "f"], ["mum", "f"]]);

// "My husband" is said by a wife, "my wife" by a husband.
const SPOUSE_GENDER = new Map<string, Gender>([["husband", "f"], ["wife", "m"]]);

/**
 * The genders a turn's own words give, whoever the people are: its listener's ("Yes, sir." /
 * "Indeed, madam!") and its speaker's ("My husband is away").
 */
export function turnGenders(tok: Tokenized, quotes: Quote[], qs: number[]): { listener: Gender | undefined; speaker: Gender | undefined } {
  const lower = tok.lower;
  let listener: Gender | undefined;
  let speaker: Gender | undefined;
  for (const qk of qs) {
    const q = quotes[qk]!;
    for (let i = q.start + 1; i < q.end; i++) {
      const g = ADDRESS_GENDER.get(lower[i]!);
      if (g && listener === undefined && isVocative(tok, { start: i, end: i, inQuote: true })) listener = g;
      if (lower[i - 1] === "my" && speaker === undefined) speaker = SPOUSE_GENDER.get(lower[i]!);
    }
  }
  return { listener, speaker };
}

/** "May I know your name?", "Tell me your names": the turn asks who the listener is. */
export function asksName(tok: Tokenized, quotes: Quote[], qs: number[]): boolean {
  for (const qk of qs) {
    const q = quotes[qk]!;
    for (let i = q.start + 1; i < q.end; i++) if (tok.lower[i] === "your" && (tok.lower[i + 1] === "name" || tok.lower[i + 1] === "names")) return true;
  }
  return false;
}

/** "I am Josiah Bounderby", "I'm only Ralph Moore", "my name is Alice": the speaker says who they are. */
function introducesSelf(tok: Tokenized, m: NameMention): boolean {
  const lower = tok.lower;
  let k = m.start - 1;
  if (lower[k] === "only" || lower[k] === "just") k--;
  if (SELF_INTRODUCTION.has(lower[k]!)) return lower[k - 1] === "i";
  return lower[k] === "is" && lower[k - 1] === "name" && lower[k - 2] === "my";
}

/**
 * Characters named inside the quote, those of them addressed by name, and the one the speaker
 * introduces as themselves (-1 if none); names are sorted by position. answersName: the turn
 * before asked the speaker's name, so a name that opens the quote ("Mrs. Moore.") is the answer,
 * not someone called.
 */
function quotedNames(tok: Tokenized, names: NameMention[], q: Quote, answersName = false): { all: number[]; vocatives: NameMention[]; self: number } {
  const lo = partitionPoint(names.length, (k) => names[k]!.start < q.start);
  const all: number[] = [];
  const vocatives: NameMention[] = [];
  let self = -1;
  for (let k = lo; k < names.length && names[k]!.end <= q.end; k++) {
    const m = names[k]!;
    if (m.char < 0) continue;
    if (introducesSelf(tok, m) || (answersName && m.start === q.start + 1)) {
      self = m.char;
      continue;
    }
    all.push(m.char);
    if (isVocative(tok, m)) vocatives.push(m);
  }
  return { all, vocatives, self };
}

/**
 * The people each quote of a turn names, whom each calls by name (its last vocative, or -1; `bearer`
 * says who a name called out is, see calledBearer), and the first who introduces themselves (-1 if
 * none). Only the first quote may answer a question about the speaker's name.
 */
export function turnNames(tok: Tokenized, names: NameMention[], quotes: Quote[], qs: number[], answersName: boolean, isPerson: (c: number) => boolean, bearer: (m: NameMention) => number) {
  const named: number[][] = [];
  const addressed: number[] = [];
  let self = -1;
  for (const qk of qs) {
    const found = quotedNames(tok, names, quotes[qk]!, answersName && qk === qs[0]);
    named.push(found.all.filter(isPerson));
    addressed.push(found.vocatives.filter((m) => isPerson(m.char)).map(bearer).at(-1) ?? -1);
    if (self < 0 && isPerson(found.self)) self = found.self;
  }
  return { named, addressed, self };
}

/**
 * "Do you play and sing, Miss Ashdown?" said to the younger sister while the elder is away: a title
 * and a surname called out alone name whichever bearer of both is in the scene, when the one the
 * name was clustered to (the eldest, whom it names by custom) has not been there lately. A fuller
 * name ("Miss Clara Ashdown", "Clara") is left as it is. present: the people lately in the scene,
 * the latest last, of whom the last SALIENCE_WINDOW count.
 */
export function calledBearer(m: NameMention, chars: Character[], present: readonly number[]): number {
  const v = chars[m.char]!;
  if (m.title === undefined || m.parts.length !== 1 || !v.lasts.has(m.parts[0]!.toLowerCase())) return m.char;
  const from = Math.max(0, present.length - SALIENCE_WINDOW);
  for (let k = from; k < present.length; k++) if (present[k] === m.char) return m.char;
  for (let k = present.length - 1; k >= from; k--) {
    const c = chars[present[k]!];
    if (c && c.id !== v.id && c.person && c.gender === v.gender && [...c.lasts].some((l) => v.lasts.has(l)) && [...c.titles].some((t) => v.titles.has(t))) return c.id;
  }
  return m.char;
}
