import type { Character } from "./characters.ts";
import { isVocative } from "./characters.ts";
import { FIRST_PERSON, GENDERED_NOUNS, SPEECH_VERBS, type Gender } from "./lexicon.ts";
import type { NameMention } from "./names.ts";
import type { Quote } from "./quotes.ts";
import type { Tokenized } from "./tokenizer.ts";

/** Character id 0 is the first-person narrator, as in BookNLP. */
export const NARRATOR_ID = 0;

export interface Attribution {
  /** Per quote: speaker character id, or -1. */
  speaker: Int32Array;
  /** Per quote: token span of the mention that names the speaker (-1 when inferred). */
  mentionStart: Int32Array;
  mentionEnd: Int32Array;
  /** Per quote: addressee character id, or -1. */
  addressee: Int32Array;
}

export interface AttributionInput {
  tok: Tokenized;
  quotes: Quote[];
  inQuote: Uint8Array;
  names: NameMention[];
  chars: Character[];
  /** Whether the book has a first-person narrator (character NARRATOR_ID). */
  narrator: boolean;
}

type Tag =
  | { kind: "char"; char: number; start: number; end: number }
  | { kind: "pronoun"; gender: Gender | "i"; at: number }
  /** "his wife": the wife of whoever "his" is, found through a shared surname. */
  | { kind: "relation"; gender: Gender; possessor: Gender; title: string; at: number };

// Family words whose holder shares the possessor's surname under a known title.
const RELATIONS: Record<string, { gender: Gender; title: string }> = {
  wife: { gender: "f", title: "mrs" },
  mother: { gender: "f", title: "mrs" },
  husband: { gender: "m", title: "mr" },
  father: { gender: "m", title: "mr" },
};

const SKIPPABLE = new Set([",", "!", "?", "\u2014", "--", "-", ";", ":", "_", "."]);
const ADVERBS = new Set(["then", "again", "now", "at", "once", "still", "presently", "suddenly", "simply", "only", "quietly", "softly", "gravely", "calmly", "coldly", "eagerly", "warmly", "sharply", "slowly"]);
const MAX_TAG_DISTANCE = 14;
// A narration gap longer than this (in tokens) between two quoted paragraphs ends a conversation.
const CONVERSATION_GAP_TOKENS = 60;
const SALIENCE_WINDOW = 40;

function isAdverb(w: string): boolean {
  return ADVERBS.has(w) || (w.length > 4 && w.endsWith("ly"));
}

function pronounGender(lc: string): Gender | "i" | undefined {
  if (lc === "he") return "m";
  if (lc === "she") return "f";
  if (lc === "i") return "i";
  return undefined;
}

export function attributeSpeakers(input: AttributionInput): Attribution {
  const { tok, quotes, inQuote, names, chars, narrator } = input;
  const { text, lower, inSentence } = tok;
  const n = quotes.length;
  const speaker = new Int32Array(n).fill(-1);
  const mentionStart = new Int32Array(n).fill(-1);
  const mentionEnd = new Int32Array(n).fill(-1);
  const addressee = new Int32Array(n).fill(-1);

  const nameAt = new Int32Array(tok.count).fill(-1);
  names.forEach((m, k) => {
    if (m.char >= 0 && chars[m.char]!.person) nameAt[m.start] = k;
  });
  const isPerson = (c: number) => c === NARRATOR_ID && narrator ? true : c >= 0 && chars[c]!.person;
  const genderOf = (c: number): Gender | undefined => (c >= 0 && c < chars.length ? chars[c]!.gender : undefined);

  const nameEndingAt = new Int32Array(tok.count).fill(-1);
  names.forEach((m, k) => {
    if (m.char >= 0) nameEndingAt[m.end] = k;
  });
  // "said the young man", "cried his wife": a description that only gives a gender, read like he/she.
  const describedGender = (j: number, hi: number): Tag | undefined => {
    const det = lower[j]!;
    if (det !== "the" && det !== "his" && det !== "her" && det !== "my" && det !== "a" && det !== "their") return undefined;
    for (let k = j + 1; k <= Math.min(hi, j + 3); k++) {
      const noun = lower[k]!;
      const relation = RELATIONS[noun];
      if (relation && k === j + 1 && (det === "his" || det === "her")) {
        return { kind: "relation", gender: relation.gender, possessor: det === "his" ? "m" : "f", title: relation.title, at: k };
      }
      const g = GENDERED_NOUNS.get(noun);
      if (g) return { kind: "pronoun", gender: g, at: k };
      if (!/^\p{L}+$/u.test(text[k]!)) break;
    }
    return undefined;
  };

  // Subject of a speech verb next to the verb at v: "said Jane", "Jane said", "she replied".
  const subject = (v: number, lo: number, hi: number): Tag | undefined => {
    let j = v + 1;
    if (j <= hi && isAdverb(lower[j]!)) j++;
    if (j <= hi) {
      const k = nameAt[j]!;
      if (k >= 0) return { kind: "char", char: names[k]!.char, start: names[k]!.start, end: names[k]!.end };
      const g = pronounGender(lower[j]!);
      if (g) return { kind: "pronoun", gender: g, at: j };
      const d = describedGender(j, hi);
      if (d) return d;
    }
    for (let i = v - 1, skipped = 0; i >= lo && skipped <= 2; i--) {
      const lc = lower[i]!;
      const g = pronounGender(lc);
      if (g) return { kind: "pronoun", gender: g, at: i };
      const k = nameEndingAt[i]!;
      if (k >= 0 && isPerson(names[k]!.char)) return { kind: "char", char: names[k]!.char, start: names[k]!.start, end: names[k]!.end };
      if (!isAdverb(lc)) break;
      skipped++;
    }
    return undefined;
  };

  /** Dialogue tag in the narration right after a quote ("…," said Jane / "…," she replied). */
  const tagAfter = (lo: number, hi: number): Tag | undefined => {
    let i = lo;
    while (i <= hi && SKIPPABLE.has(text[i]!)) i++;
    const limit = Math.min(hi, i + 5);
    for (let v = i; v <= limit; v++) {
      if (SPEECH_VERBS.has(lower[v]!)) return subject(v, i, Math.min(hi, v + 5));
    }
    return undefined;
  };

  /** Dialogue tag in the narration just before a quote ("Jane said:" / "Then said he,"). */
  const tagBefore = (lo: number, hi: number): Tag | undefined => {
    for (let v = hi; v >= Math.max(lo, hi - MAX_TAG_DISTANCE); v--) {
      if (SPEECH_VERBS.has(lower[v]!)) return subject(v, Math.max(lo, v - 6), hi);
    }
    return undefined;
  };

  /** First person named (or he/she) in the narration that opens a paragraph before its first quote. */
  const leadSubject = (lo: number, hi: number): Tag | undefined => {
    for (let i = lo; i <= hi; i++) {
      const k = nameAt[i]!;
      if (k >= 0) {
        const prev = lower[i - 1];
        if (prev === "to" || prev === "at" || prev === "with" || prev === "of") continue;
        return { kind: "char", char: names[k]!.char, start: names[k]!.start, end: names[k]!.end };
      }
      const g = pronounGender(lower[i]!);
      if (g && inSentence[i]! <= 1) return { kind: "pronoun", gender: g, at: i };
    }
    return undefined;
  };

  // Forward pass: salience list of recently mentioned people, tags resolved in reading order.
  const recent: number[] = [];
  const remember = (c: number) => {
    if (c < 0) return;
    recent.push(c);
  };
  const resolvePronoun = (g: Gender | "i", avoid: number, paraMentions: number[]): number => {
    if (g === "i") return narrator ? NARRATOR_ID : -1;
    for (let k = paraMentions.length - 1; k >= 0; k--) {
      const c = paraMentions[k]!;
      if (genderOf(c) === g) return c;
    }
    let fallback = -1;
    for (let k = recent.length - 1, seen = 0; k >= 0 && seen < SALIENCE_WINDOW; k--, seen++) {
      const c = recent[k]!;
      if (genderOf(c) !== g || !isPerson(c)) continue;
      if (c !== avoid) return c;
      if (fallback < 0) fallback = c;
    }
    return fallback;
  };
  const resolveTag = (tag: Tag, avoid: number, paraMentions: number[]): number => {
    if (tag.kind === "char") return tag.char;
    if (tag.kind === "pronoun") return resolvePronoun(tag.gender, avoid, paraMentions);
    const holder = resolvePronoun(tag.possessor, -1, paraMentions);
    if (holder >= 0) {
      const surnames = chars[holder]!.lasts;
      const kin = chars.find((c) => c.id !== holder && c.person && c.titles.has(tag.title) && [...c.lasts].some((l) => surnames.has(l)));
      if (kin) return kin.id;
    }
    return resolvePronoun(tag.gender, avoid, paraMentions);
  };

  // Group quotes into paragraph units.
  const units: Unit[] = [];
  quotes.forEach((q, k) => {
    const last = units[units.length - 1];
    if (last && last.para === q.paragraph) last.qs.push(k);
    else units.push({ para: q.paragraph, qs: [k], speaker: -1, addressee: -1, continuation: q.continuation, recentAt: 0 });
  });

  const mentionsIn = (lo: number, hi: number, out: number[]) => {
    for (let i = lo; i <= hi; i++) {
      if (inQuote[i]) continue;
      const k = nameAt[i]!;
      if (k >= 0) out.push(names[k]!.char);
      else if (narrator && FIRST_PERSON.has(lower[i]!)) out.push(NARRATOR_ID);
    }
  };

  let nextPara = 0;
  let prevUnitSpeaker = -1;
  let prevUnitPara = -2;
  for (const u of units) {
    // Narration paragraphs between units feed salience.
    const paraStart = tok.paragraphStarts[u.para]!;
    const paraEnd = tok.paragraphStarts[u.para + 1]! - 1;
    if (nextPara < u.para) {
      const tmp: number[] = [];
      mentionsIn(tok.paragraphStarts[nextPara]!, paraStart - 1, tmp);
      for (const c of tmp) remember(c);
    }
    nextPara = u.para + 1;
    const avoid = u.para - prevUnitPara <= 2 ? prevUnitSpeaker : -1;
    const paraMentions: number[] = [];
    let cursor = paraStart;
    let lead: Tag | undefined;
    for (let idx = 0; idx < u.qs.length; idx++) {
      const qk = u.qs[idx]!;
      const q = quotes[qk]!;
      const nextStart = idx + 1 < u.qs.length ? quotes[u.qs[idx + 1]!]!.start - 1 : paraEnd;
      mentionsIn(cursor, q.start - 1, paraMentions);
      let tag = tagAfter(q.end + 1, Math.min(nextStart, q.end + MAX_TAG_DISTANCE));
      if (!tag && q.start > cursor) tag = tagBefore(cursor, q.start - 1);
      if (!tag && idx === 0 && q.start > cursor) lead = leadSubject(cursor, q.start - 1);
      if (tag) {
        const c = resolveTag(tag, avoid, paraMentions);
        if (c >= 0) {
          speaker[qk] = c;
          if (tag.kind === "char") {
            mentionStart[qk] = tag.start;
            mentionEnd[qk] = tag.end;
          } else {
            mentionStart[qk] = tag.at;
            mentionEnd[qk] = tag.at;
          }
        }
      }
      for (const m of vocativesIn(tok, names, q)) if (isPerson(m)) addressee[qk] = m;
      cursor = q.end + 1;
    }
    // Quotes of one paragraph share a speaker unless tagged otherwise.
    let unitSpeaker = -1;
    for (const qk of u.qs) if (speaker[qk]! >= 0) {
      unitSpeaker = speaker[qk]!;
      break;
    }
    if (unitSpeaker < 0 && lead) {
      unitSpeaker = resolveTag(lead, avoid, []);
    }
    if (unitSpeaker < 0 && u.continuation) unitSpeaker = prevUnitSpeaker;
    u.speaker = unitSpeaker;
    for (const qk of u.qs) if (addressee[qk]! >= 0) u.addressee = addressee[qk]!;
    if (u.speaker >= 0 && u.speaker === u.addressee) u.speaker = -1;
    const tail: number[] = [];
    mentionsIn(cursor, paraEnd, tail);
    for (const c of paraMentions) remember(c);
    if (u.speaker >= 0) remember(u.speaker);
    for (const c of tail) remember(c);
    u.recentAt = recent.length;
    prevUnitSpeaker = u.speaker;
    prevUnitPara = u.para;
  }

  // Conversations: runs of quoted paragraphs with little narration between them.
  const gapBefore = (k: number): number => {
    if (k === 0) return Infinity;
    const a = units[k - 1]!;
    const b = units[k]!;
    if (b.continuation) return 0;
    return tok.paragraphStarts[b.para]! - tok.paragraphStarts[a.para + 1]!;
  };
  let from = 0;
  for (let k = 1; k <= units.length; k++) {
    if (k < units.length && gapBefore(k) <= CONVERSATION_GAP_TOKENS) continue;
    fillConversation(units.slice(from, k), recent, isPerson);
    from = k;
  }

  for (const u of units) {
    for (const qk of u.qs) {
      if (speaker[qk]! < 0) speaker[qk] = u.speaker;
      if (addressee[qk]! < 0) addressee[qk] = u.addressee;
    }
  }
  return { speaker, mentionStart, mentionEnd, addressee };
}

/** The quotes of one paragraph: one turn of a conversation. */
interface Unit {
  para: number;
  /** Indices into the quote list. */
  qs: number[];
  speaker: number;
  addressee: number;
  continuation: boolean;
  /** Length of the salience list when this turn was read: who had been mentioned so far. */
  recentAt: number;
}

/**
 * Turn-taking: in a two-party exchange speakers alternate, a vocative names the next speaker, and
 * an untagged paragraph goes to the person two turns back.
 */
function fillConversation(conv: Unit[], recent: number[], isPerson: (c: number) => boolean): void {
  let changed = true;
  while (changed) {
    changed = false;
    for (let k = 0; k < conv.length; k++) {
      const u = conv[k]!;
      if (u.speaker >= 0) continue;
      const p1 = conv[k - 1];
      const p2 = conv[k - 2];
      const n1 = conv[k + 1];
      const n2 = conv[k + 2];
      let pick = -1;
      // A paragraph that carries on a quote waits for its first paragraph's speaker.
      if (u.continuation && p1) {
        if (p1.speaker < 0) continue;
        pick = p1.speaker;
      } else if (p1 && p1.addressee >= 0 && p1.addressee !== p1.speaker) pick = p1.addressee;
      else if (p1 && p2 && p1.speaker >= 0 && p2.speaker >= 0 && p1.speaker !== p2.speaker) pick = p2.speaker;
      else if (n1 && n2 && n1.speaker >= 0 && n2.speaker >= 0 && n1.speaker !== n2.speaker && !n1.continuation) pick = n2.speaker;
      if (pick >= 0 && pick !== u.addressee) {
        u.speaker = pick;
        changed = true;
      }
    }
  }
  for (let k = 0; k < conv.length; k++) {
    const u = conv[k]!;
    if (u.speaker >= 0) continue;
    const prev = conv[k - 1]?.speaker ?? -1;
    if (u.continuation && prev >= 0) {
      u.speaker = prev;
      continue;
    }
    const end = u.recentAt;
    for (let i = end - 1, seen = 0; i >= 0 && seen < SALIENCE_WINDOW; i--, seen++) {
      const c = recent[i]!;
      if (c !== prev && c !== u.addressee && isPerson(c)) {
        u.speaker = c;
        break;
      }
    }
  }
}

/** Characters addressed by name inside the quote; names are sorted by position. */
function vocativesIn(tok: Tokenized, names: NameMention[], q: Quote): number[] {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (names[mid]!.start < q.start) lo = mid + 1;
    else hi = mid;
  }
  const out: number[] = [];
  for (let k = lo; k < names.length && names[k]!.end <= q.end; k++) {
    const m = names[k]!;
    if (m.char >= 0 && isVocative(tok, m)) out.push(m.char);
  }
  return out;
}
