import { GENDERED_NOUNS, PREPOSITIONS, SPEECH_VERBS, type Gender } from "./lexicon.ts";
import type { NameMention } from "./names.ts";
import type { Quote } from "./quotes.ts";
import type { Tokenized } from "./tokenizer.ts";

export type Tag =
  | { kind: "char"; char: number; start: number; end: number }
  /** goesOn: the verb carries on a speech ("she added", "he continued"). */
  | { kind: "pronoun"; gender: Gender | "i"; at: number; goesOn?: boolean }
  /** "his wife": the wife of whoever "his" is, found through a shared surname. */
  | { kind: "relation"; gender: Gender; possessor: Gender; title: string; at: number };

// Family words whose holder shares the possessor's surname under a known title.
const RELATIONS: Record<string, { gender: Gender; title: string }> = {
  wife: { gender: "f", title: "mrs" },
  mother: { gender: "f", title: "mrs" },
  husband: { gender: "m", title: "mr" },
  father: { gender: "m", title: "mr" },
};

// Verbs by which a speaker carries on after a pause, so the one who spoke last is still speaking.
const CONTINUING = new Set(["added", "continued", "resumed", "pursued"]);
const SKIPPABLE = new Set([",", "!", "?", "\u2014", "--", "-", ";", ":", "_", "."]);
const ADVERBS = new Set(["then", "again", "now", "at", "once", "still", "presently", "suddenly", "simply", "only", "quietly", "softly", "gravely", "calmly", "coldly", "eagerly", "warmly", "sharply", "slowly"]);
const MAX_TAG_DISTANCE = 14;
// Nouns for what someone said, in "was his answer", "was Elizabeth's reply".
const REPLY_NOUNS = new Set(["answer", "reply", "response", "rejoinder", "retort", "remark", "exclamation", "observation", "comment", "question", "cry"]);
const POSSESSIVE = new Set(["'s", "\u2019s"]);

function isAdverb(w: string): boolean {
  return ADVERBS.has(w) || (w.length > 4 && w.endsWith("ly"));
}

export function pronounGender(lc: string): Gender | "i" | undefined {
  if (lc === "he") return "m";
  if (lc === "she") return "f";
  if (lc === "i") return "i";
  return undefined;
}

export interface TagReaderInput {
  tok: Tokenized;
  quotes: Quote[];
  names: NameMention[];
  /** Per token: index of the name mention of a person starting there, or -1. */
  nameAt: Int32Array;
  isPerson: (c: number) => boolean;
}

export interface TagReader {
  tagOf: (qk: number, from: number, nextStart: number) => Tag | undefined;
  leadSubject: (lo: number, hi: number) => Tag | undefined;
}

/** Reads the dialogue tags in the narration around quotes ("…," said Jane / Jane said: / "…," she replied). */
export function createTagReader(input: TagReaderInput): TagReader {
  const { tok, quotes, names, nameAt, isPerson } = input;
  const { text, lower, inSentence } = tok;
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

  const subject = (v: number, lo: number, hi: number): Tag | undefined => {
    const tag = subjectOf(v, lo, hi);
    if (tag?.kind === "pronoun" && CONTINUING.has(lower[v]!)) tag.goesOn = true;
    return tag;
  };
  // Subject of a speech verb next to the verb at v: "said Jane", "Jane said", "she replied".
  const subjectOf = (v: number, lo: number, hi: number): Tag | undefined => {
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

  // "…," was Edmund's answer / was her only reply: whose reply, read from the possessive before it.
  const possessiveReply = (j: number, hi: number): Tag | undefined => {
    let owner: Tag | undefined;
    let k = j;
    const g = lower[j] === "his" ? "m" : lower[j] === "her" ? "f" : undefined;
    if (g) owner = { kind: "pronoun", gender: g, at: j };
    else {
      const m = nameAt[j]! >= 0 ? names[nameAt[j]!]! : undefined;
      if (!m || !POSSESSIVE.has(lower[m.end + 1] ?? "")) return undefined;
      owner = { kind: "char", char: m.char, start: m.start, end: m.end };
      k = m.end + 1;
    }
    for (let w = k + 1; w <= Math.min(hi, k + 3); w++) {
      if (REPLY_NOUNS.has(lower[w]!)) return owner;
      if (!/^\p{L}+$/u.test(text[w]!)) break;
    }
    return undefined;
  };

  /** Dialogue tag in the narration right after a quote ("…," said Jane / "…," she replied). */
  const tagAfter = (lo: number, hi: number): Tag | undefined => {
    let i = lo;
    while (i <= hi && SKIPPABLE.has(text[i]!)) i++;
    if (lower[i] === "was") {
      const owned = possessiveReply(i + 1, hi);
      if (owned) return owned;
    }
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
        if (PREPOSITIONS.has(prev ?? "")) continue;
        return { kind: "char", char: names[k]!.char, start: names[k]!.start, end: names[k]!.end };
      }
      const g = pronounGender(lower[i]!);
      if (g && inSentence[i]! <= 1) return { kind: "pronoun", gender: g, at: i };
    }
    return undefined;
  };

  /** The dialogue tag of quote qk, looked for up to the next quote and back to the narration from `from`. */
  const tagOf = (qk: number, from: number, nextStart: number): Tag | undefined => {
    const q = quotes[qk]!;
    return tagAfter(q.end + 1, Math.min(nextStart, q.end + MAX_TAG_DISTANCE)) ?? (q.start > from ? tagBefore(from, q.start - 1) : undefined);
  };
  return { tagOf, leadSubject };
}
