import { isVocative } from "./character-scores.ts";
import type { Gender } from "./lexicon.ts";
import type { NameMention } from "./names.ts";
import type { Quote } from "./quotes.ts";
import type { Tokenized } from "./tokenizer.ts";

const SELF_INTRODUCTION = new Set(["am", "'m", "\u2019m"]);
const ADDRESS_GENDER = new Map<string, Gender>([["sir", "m"], ["madam", "f"], ["ma'am", "f"], ["ma\u2019am", "f"], ["mum", "f"]]);

// "Yes, sir." / "Indeed, madam!": the listener is a man, or a woman, even unnamed.
export function listenerGender(tok: Tokenized, quotes: Quote[], qs: number[]): Gender | undefined {
  const lower = tok.lower;
  for (const qk of qs) {
    const q = quotes[qk]!;
    for (let i = q.start + 1; i < q.end; i++) {
      const g = ADDRESS_GENDER.get(lower[i]!);
      if (g && isVocative(tok, { start: i, end: i, inQuote: true })) return g;
    }
  }
  return undefined;
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
 * Characters named inside the quote, those of them addressed by name, the first of those called in
 * its first sentence (opening, -1 if none), and the one the speaker introduces as themselves (-1 if
 * none); names are sorted by position. answersName: the turn
 * before asked the speaker's name, so a name that opens the quote ("Mrs. Moore.") is the answer,
 * not someone called.
 */
export function quotedNames(tok: Tokenized, names: NameMention[], q: Quote, answersName = false): { all: number[]; vocatives: number[]; self: number; opening: number } {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (names[mid]!.start < q.start) lo = mid + 1;
    else hi = mid;
  }
  const all: number[] = [];
  const vocatives: number[] = [];
  let self = -1;
  let opening = -1;
  for (let k = lo; k < names.length && names[k]!.end <= q.end; k++) {
    const m = names[k]!;
    if (m.char < 0) continue;
    if (introducesSelf(tok, m) || (answersName && m.start === q.start + 1)) {
      self = m.char;
      continue;
    }
    all.push(m.char);
    if (isVocative(tok, m)) {
      vocatives.push(m.char);
      if (opening < 0 && tok.sentence[m.start] === tok.sentence[q.start + 1]) opening = m.char;
    }
  }
  return { all, vocatives, self, opening };
}
