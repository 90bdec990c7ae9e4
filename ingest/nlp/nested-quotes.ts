// Speech reported inside someone's speech: a governess telling a detective what her employer said,
// "‘You can hardly expect us to find another such opening for you,’ said she sharply." The outer
// quote is the teller's; the inner one is the person she quotes, and its tag sits inside her speech.
// Without this a character whose every word comes to us through another's account has no lines.
import { partitionPoint } from "../../common/sorted.ts";
import type { Character } from "./character.ts";
import { isVocative } from "./character-scores.ts";
import { SPEECH_VERBS, type Gender } from "./lexicon.ts";
import type { NameMention } from "./names.ts";
import type { Quote } from "./quotes.ts";
import type { Tokenized } from "./tokenizer.ts";

export interface NestedQuote {
  /** Token span, inclusive, with its marks. */
  start: number;
  end: number;
  speaker: number;
  /** The tag's name or pronoun. */
  mentionStart: number;
  mentionEnd: number;
}

// How far after an inner quote its tag may start ("‘…,’ said she sharply").
const TAG_REACH = 3;
// How far back (tokens) a he/she in the teller's speech looks for the person it stands for.
const REFERENT_REACH = 2000;
const INNER_OPEN = new Set(["\u2018", "'"]);
const INNER_CLOSE = new Set(["\u2019", "'"]);
const LETTER = /^\p{L}/u;

/**
 * The tagged quotations inside each double-quoted quote, with their speakers: a name in the tag, "I"
 * (the teller), or he/she (the last person of that gender the speech around it names, not the
 * teller). Untagged inner quotes are left to the teller's line.
 */
export function findNestedQuotes(tok: Tokenized, quotes: readonly Quote[], tellers: ArrayLike<number>, names: readonly NameMention[], chars: readonly Character[]): NestedQuote[] {
  const nameAt = new Int32Array(tok.count).fill(-1);
  names.forEach((m, k) => {
    if (m.char >= 0 && chars[m.char]!.person) for (let i = m.start; i <= m.end; i++) nameAt[i] = k;
  });
  const spans = quotes.map((q) => innerSpans(tok, q));
  // Names a he/she may stand for: those the teller's own speech names, by name rather than by a
  // description ("the peasants"), and not inside an inner quote nor calling someone ("Mr. Holmes,
  // …"): the teller's listener, named in the narration or called by name, is not in the story told.
  const inner = new Uint8Array(tok.count);
  for (const list of spans) for (const [a, b] of list) inner.fill(1, a, b + 1);
  const candidate = (m: NameMention) => m.inQuote && !m.definite && m.char >= 0 && chars[m.char]!.person && !inner[m.start] && !isVocative(tok, m);
  const out: NestedQuote[] = [];
  quotes.forEach((q, qk) => {
    const teller = tellers[qk]!;
    for (const [start, end] of spans[qk]!) {
      const tag = innerTag(tok, end + 1, q.end - 1, nameAt, names);
      if (!tag) continue;
      const speaker = tag.gender === undefined ? tag.char : tag.gender === "i" ? teller : referent(start, tag.gender, teller, names, chars, candidate);
      // Nobody is named in their own line: "‘Mr. Holder,’ said he" is said to Mr. Holder.
      if (speaker < 0 || speaker === teller || namedIn(names, start, end, speaker)) continue;
      out.push({ start, end, speaker, mentionStart: tag.at, mentionEnd: tag.end });
    }
  });
  return out;
}

/** The ‘…’ spans inside a quote: an opening mark before a word, a closing mark after one and not inside a word ("don’t"). */
function innerSpans(tok: Tokenized, q: Quote): [number, number][] {
  const spans: [number, number][] = [];
  let open = -1;
  for (let i = q.start + 1; i < q.end; i++) {
    const w = tok.text[i]!;
    const touchesNext = tok.start[i + 1] === tok.end[i];
    const touchesPrev = tok.end[i - 1] === tok.start[i];
    if (open < 0 && INNER_OPEN.has(w) && touchesNext && (!touchesPrev || i === q.start + 1)) open = i;
    else if (open >= 0 && INNER_CLOSE.has(w) && touchesPrev && !(touchesNext && LETTER.test(tok.text[i + 1] ?? ""))) {
      spans.push([open, i]);
      open = -1;
    }
  }
  return spans;
}

interface InnerTag {
  at: number;
  end: number;
  /** undefined for a name (char), "i" for the teller. */
  gender?: Gender | "i";
  char: number;
}

/** "said she", "said Mr. Rucastle", "I answered", "he cried" right after an inner quote's close. */
function innerTag(tok: Tokenized, from: number, hi: number, nameAt: Int32Array, names: readonly NameMention[]): InnerTag | undefined {
  let v = from;
  while (v <= hi && v < from + TAG_REACH && !LETTER.test(tok.text[v]!)) v++;
  const subject = (i: number): InnerTag | undefined => {
    if (i < from || i > hi) return undefined;
    const lc = tok.lower[i]!;
    if (lc === "he" || lc === "she" || lc === "i") return { at: i, end: i, gender: lc === "he" ? "m" : lc === "she" ? "f" : "i", char: -1 };
    const k = nameAt[i]!;
    return k >= 0 ? { at: names[k]!.start, end: names[k]!.end, char: names[k]!.char } : undefined;
  };
  if (v > hi) return undefined;
  // "said she" / "said Mr. Rucastle"
  if (SPEECH_VERBS.has(tok.lower[v]!)) return subject(v + 1);
  // "she said" / "I answered" / "Mr. Rucastle said"
  const k = nameAt[v]!;
  const after = k >= 0 ? names[k]!.end + 1 : v + 1;
  return after <= hi && SPEECH_VERBS.has(tok.lower[after]!) ? subject(v) : undefined;
}

/** The last person of gender g the text names before token `at`, within REFERENT_REACH, other than the teller. */
function referent(at: number, g: Gender, teller: number, names: readonly NameMention[], chars: readonly Character[], candidate: (m: NameMention) => boolean): number {
  for (let k = lastBefore(names, at); k >= 0 && at - names[k]!.start <= REFERENT_REACH; k--) {
    const m = names[k]!;
    if (m.char !== teller && candidate(m) && chars[m.char]!.gender === g) return m.char;
  }
  return -1;
}

function namedIn(names: readonly NameMention[], start: number, end: number, c: number): boolean {
  for (let k = lastBefore(names, end + 1); k >= 0 && names[k]!.start >= start; k--) if (names[k]!.char === c) return true;
  return false;
}

/** Index of the last mention starting before token `at`, or -1. */
function lastBefore(names: readonly NameMention[], at: number): number {
  return partitionPoint(names.length, (k) => names[k]!.start < at) - 1;
}
