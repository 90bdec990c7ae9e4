/**
 * What the narration around a turn says about who speaks and to whom: an action beat between two
 * turns, the person "turned to" or spoken "to", the people looked at, a paragraph that leads into
 * the next one's quote.
 * Read by attribution.ts; pure reads of the tokens, no salience state.
 */
import { SPEECH_VERBS, type Gender } from "./lexicon.ts";
import { pronounGender } from "./dialogue-tags.ts";
import type { NameMention } from "./names.ts";
import type { Tokenized } from "./tokenizer.ts";

// The longest paragraph of narration read as an action beat between two turns.
const BEAT_TOKENS = 12;
const LEAD_IN_DASHES = new Set(["\u2014", "--", "-"]);

export interface NarrationText {
  tok: Tokenized;
  inQuote: Uint8Array;
  /** Per token: the index in `names` of the person's name starting there, or -1. */
  nameAt: Int32Array;
  names: NameMention[];
}

/**
 * A one-line paragraph of action between two turns ("He shook his head laughing."): who acts in
 * it, when it opens on a name or on he/she for one of the last two speakers; -1 otherwise.
 */
export function beatSubject(n: NarrationText, para: number, speakers: readonly number[], genderOf: (c: number) => Gender | undefined): number {
  const { tok, inQuote, nameAt, names } = n;
  const lo = tok.paragraphStarts[para]!;
  const hi = tok.paragraphStarts[para + 1]! - 1;
  if (hi - lo + 1 > BEAT_TOKENS) return -1;
  for (let i = lo; i <= hi; i++) if (inQuote[i]) return -1;
  const k = nameAt[lo]!;
  if (k >= 0) return names[k]!.char;
  const g = pronounGender(tok.lower[lo]!);
  if (g === undefined || g === "i") return -1;
  return speakers.find((c) => c >= 0 && genderOf(c) === g) ?? -1;
}

/** "turning to Jane", "said he to Elizabeth": whom the narration from lo to hi says is spoken to; -1 when none. */
function turnedTo(n: NarrationText, lo: number, hi: number): number {
  const { tok, inQuote, nameAt, names } = n;
  const { lower } = tok;
  for (let i = lo + 2; i <= hi; i++) {
    if (inQuote[i] || lower[i - 1] !== "to") continue;
    const k = nameAt[i]!;
    // "said he to Elizabeth": the verb may stand before the speaker.
    const verb = pronounGender(lower[i - 2]!) !== undefined ? (lower[i - 3] ?? "") : lower[i - 2]!;
    if (k >= 0 && (verb === "turned" || verb === "turning" || SPEECH_VERBS.has(verb))) return names[k]!.char;
  }
  return -1;
}

/**
 * Whom a turn speaks to: the last person its quotes call by name (`quotes`: each one's end token and
 * whom it calls, or -1), unless the narration after that call turns the speaker to someone else
 * ("Walter," said Clara, "…" Then, turning to Tobias, "…?"): the last spoken to, who answers.
 */
export function spokenTo(n: NarrationText, quotes: readonly { end: number; called: number }[], lo: number, hi: number): number {
  let to = -1;
  let from = lo;
  for (const q of quotes) {
    if (q.called < 0) continue;
    to = q.called;
    from = q.end + 1;
  }
  const turned = turnedTo(n, from, hi);
  return turned >= 0 ? turned : to;
}

// Words after which a name is whom someone looks or speaks at, not who acts.
const FACING = new Set(["at", "to", "towards", "toward"]);

/**
 * "with a glance at Fanny", "nodding to Jane": the people the narration from lo to hi names as looked
 * or spoken at, whom an untagged turn in that paragraph is seldom by.
 */
export function facedIn(n: NarrationText, lo: number, hi: number): number[] {
  const { tok, inQuote, nameAt, names } = n;
  const out: number[] = [];
  for (let i = lo + 1; i <= hi; i++) if (nameAt[i]! >= 0 && !inQuote[i] && FACING.has(tok.lower[i - 1]!)) out.push(names[nameAt[i]!]!.char);
  return out;
}

/**
 * "… she seized the opportunity of saying," / ¶ "Is your sister at Pemberley still?": a paragraph
 * of narration that ends on a comma, a colon or a dash ("Mr. Hale presumed to say--") introduces
 * the quote that opens the next one. The start of its last sentence, or -1.
 */
export function leadIn(n: NarrationText, para: number): number {
  const { tok, inQuote } = n;
  if (para === 0) return -1;
  const lo = tok.paragraphStarts[para - 1]!;
  const end = tok.paragraphStarts[para]! - 1;
  let hi = end;
  while (hi > lo && LEAD_IN_DASHES.has(tok.text[hi]!)) hi--;
  if (hi <= lo || inQuote[hi] || (tok.text[hi] !== "," && tok.text[hi] !== ":" && hi === end)) return -1;
  return Math.max(lo, tok.sentenceStarts[tok.sentence[hi]!]!);
}
