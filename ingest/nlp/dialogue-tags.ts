import { GENDERED_NOUNS, NOT_NAMES, PHRASAL_SPEECH_VERBS, PREPOSITIONS, REPLY_NOUNS, SPEECH_VERBS, type Gender } from "./lexicon.ts";
import type { NameMention } from "./names.ts";
import type { Quote } from "./quotes.ts";
import type { Tokenized } from "./tokenizer.ts";

export type Tag =
  | { kind: "char"; char: number; start: number; end: number }
  /** goesOn: the verb carries on a speech ("she added", "he continued"). */
  | { kind: "pronoun"; gender: Gender | "i"; at: number; goesOn?: boolean }
  /** "said the other": whichever of the two people talking did not speak last. */
  | { kind: "other"; at: number }
  /** "his wife": the wife of whoever "his" is, found through a shared surname. */
  | { kind: "relation"; gender: Gender; possessor: Gender; title: string; at: number }
  /** "said the detective": someone the narration describes, so not a first-person narrator. */
  | { kind: "described"; at: number };

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
// How far back from a tag's verb its clause's subject is looked for ("Fanny, averting her face, said,").
const CLAUSE_REACH = 40;
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
    // "…," said the other: the one of the two talking who did not speak last.
    if (det === "the" && lower[j + 1] === "other" && !/^\p{L}+$/u.test(text[j + 2] ?? "")) return { kind: "other", at: j + 1 };
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
    // "said the detective": no gender, but someone described, which the one telling the story is not.
    if (det === "the" && /^\p{Ll}+$/u.test(text[j + 1] ?? "") && !PREPOSITIONS.has(lower[j + 1]!)) return { kind: "described", at: j + 1 };
    return undefined;
  };

  const subject = (v: number, lo: number, hi: number): Tag | undefined => {
    const tag = subjectOf(v, lo, hi);
    if (tag?.kind === "pronoun" && CONTINUING.has(lower[v]!)) tag.goesOn = true;
    return tag;
  };
  // Subject of a speech verb next to the verb at v: "said Jane", "Jane said", "she replied".
  // "put in Fielding", "broke out the Nawab": a verb with its particle is a speech verb.
  const isSpeechVerb = (v: number): boolean => SPEECH_VERBS.has(lower[v]!) || (PHRASAL_SPEECH_VERBS.get(lower[v]!)?.has(lower[v + 1] ?? "") === true);
  const subjectOf = (v: number, lo: number, hi: number): Tag | undefined => {
    let j = v + 1;
    if (PHRASAL_SPEECH_VERBS.get(lower[v]!)?.has(lower[j] ?? "")) j++;
    if (j <= hi && isAdverb(lower[j]!)) j++;
    // "What is his sorrow?" she asked the Gryphon: a he/she right before the verb is who speaks,
    // and the name or description after it whom they speak to.
    const heShe = pronounBefore(v, lo);
    if (j <= hi) {
      const k = nameAt[j]!;
      if (k >= 0) return heShe ?? charTag(k);
      const g = pronounGender(lower[j]!);
      if (g) return { kind: "pronoun", gender: g, at: j };
      const named = describedName(j, hi);
      if (named) return heShe ?? named;
      const d = describedGender(j, hi);
      if (d) return heShe ?? d;
    }
    for (let i = v - 1, skipped = 0; i >= lo && skipped <= 2; i--) {
      const lc = lower[i]!;
      const g = pronounGender(lc);
      if (g) return { kind: "pronoun", gender: g, at: i };
      const k = nameEndingAt[i]!;
      if (k >= 0 && isPerson(names[k]!.char)) return charTag(k);
      // "…," the other answered.
      if (lc === "other" && lower[i - 1] === "the") return { kind: "other", at: i };
      // "the lady replied", "her mother said", "the old man answered": a description before the verb.
      if (GENDERED_NOUNS.has(lc)) {
        for (let d = i - 1; d >= Math.max(lo, i - 3); d--) {
          const described = describedGender(d, i);
          if (described) return described;
          if (!/^\p{Ll}+$/u.test(text[d]!)) break;
        }
      }
      if (!isAdverb(lc)) break;
      skipped++;
    }
    return undefined;
  };
  const charTag = (k: number): Tag => ({ kind: "char", char: names[k]!.char, start: names[k]!.start, end: names[k]!.end });
  const pronounBefore = (v: number, lo: number): Tag | undefined => {
    for (let i = v - 1; i >= Math.max(lo, v - 3); i--) {
      const g = pronounGender(lower[i]!);
      if (g) return { kind: "pronoun", gender: g, at: i };
      if (!isAdverb(lower[i]!)) return undefined;
    }
    return undefined;
  };

  // "said dour Major Callendar", "responded the ingenious Giovanelli", "cried the voice of Kemp": a
  // name after a few lower-case words that describe it (no word that is itself a gendered
  // description, no preposition but the "of" of "voice of"), or capitalised words that are never
  // names ("said the Old Hare"; a month there is part of the name itself, "the March Hare").
  const describedName = (j: number, hi: number): Tag | undefined => {
    for (let k = j; k <= Math.min(hi, j + 3); k++) {
      if (nameAt[k]! >= 0) return k > j ? charTag(nameAt[k]!) : undefined;
      const w = lower[k]!;
      // "she declared that Daisy was …": the name after "that" is the subject of what is reported.
      if (w === "that" || (text[k] !== w && !NOT_NAMES.has(w)) || !/^\p{L}+$/u.test(w) || GENDERED_NOUNS.has(w)) return undefined;
      if (PREPOSITIONS.has(w) && !(w === "of" && lower[k - 1] === "voice")) return undefined;
    }
    return undefined;
  };

  // The person a clause is about, from its start up to `end`: the first named (not after a
  // preposition, not a possessive), or whoever a "who" right after a name refers to; when a he/she
  // comes first, only the latter.
  const firstSubject = (lo: number, end: number): Tag | undefined => {
    let found: Tag | undefined;
    let pronounFirst = false;
    for (let i = lo; i < end; i++) {
      const k = nameAt[i]!;
      if (k >= 0) {
        const m = names[k]!;
        if (!found && !pronounFirst && !PREPOSITIONS.has(lower[i - 1] ?? "") && !POSSESSIVE.has(lower[m.end + 1] ?? "") && isPerson(m.char)) found = charTag(k);
        const after = lower[m.end + 1] === "," ? m.end + 2 : m.end + 1;
        if (lower[after] === "who" && isPerson(m.char)) found = charTag(k);
        i = m.end;
        continue;
      }
      // A clause about he/she is left to the paragraph's own reading of it, unless a "who" names
      // the one who speaks ("She was met by Kate, who, running to her, cried").
      if (!found && pronounGender(lower[i]!)) pronounFirst = true;
    }
    return found;
  };
  // "Fanny, averting her face, said," / "Aziz took his leave saying": the subject of the clause the
  // speech verb ends, when it does not stand next to the verb. The clause starts at the sentence's
  // start or at its last semicolon or colon; a clause without anyone named falls back to the sentence.
  const clauseSubject = (v: number, lo: number): Tag | undefined => {
    const sentLo = Math.max(lo, v - CLAUSE_REACH, tok.sentenceStarts[tok.sentence[v]!]!);
    let clauseLo = sentLo;
    for (let i = v - 1; i > sentLo; i--) {
      if (text[i] === ";" || text[i] === ":") {
        clauseLo = i + 1;
        break;
      }
    }
    return firstSubject(clauseLo, v) ?? (clauseLo > sentLo ? firstSubject(sentLo, v) : undefined);
  };

  // "He subsided, nudged in the ribs, but added": a sentence that opens on he/she and names no one
  // else before its speech verb, which follows "and", "but" or a comma.
  const pronounClause = (v: number, lo: number): Tag | undefined => {
    const prev = lower[v - 1];
    if (prev !== "and" && prev !== "but" && prev !== ",") return undefined;
    const start = tok.sentenceStarts[tok.sentence[v]!]!;
    if (start < lo || v - start > CLAUSE_REACH) return undefined;
    const g = pronounGender(lower[start]!);
    if (g === undefined || g === "i") return undefined;
    for (let i = start + 1; i < v; i++) {
      if (nameAt[i]! >= 0 || pronounGender(lower[i]!) !== undefined || lower[i] === "they" || lower[i] === "we") return undefined;
    }
    return { kind: "pronoun", gender: g, at: start };
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
    let broken = false;
    while (i <= hi && SKIPPABLE.has(text[i]!)) {
      if (text[i] === ";" || text[i] === ".") broken = true;
      i++;
    }
    if (lower[i] === "and" || lower[i] === "but") broken = true;
    if (lower[i] === "was") {
      const owned = possessiveReply(i + 1, hi);
      if (owned) return owned;
    }
    const limit = Math.min(hi, i + 5);
    for (let v = i; v <= limit; v++) {
      if (!isSpeechVerb(v)) continue;
      // "Is it true?" Elizabeth replied that it was.: speech reported, not a tag of the quote before.
      if (lower[v + 1] === "that") return undefined;
      const tag = subject(v, i, Math.min(hi, v + 5));
      // "…"; Das thought, "…" / "…," and Mrs. Moore said, "…": after a break, a subject before its
      // verb opens the next quote's tag, not this one's.
      if (broken && tag && (tag.kind === "char" ? tag.end < v : tag.at < v)) return undefined;
      return tag;
    }
    // "…," hooted Aziz: a verb in -ed between a quote and a name is a tag, whatever the verb.
    if (!broken && /^\p{Ll}+ed$/u.test(text[i] ?? "") && nameAt[i + 1]! >= 0) return charTag(nameAt[i + 1]!);
    return undefined;
  };

  /** "Elizabeth's reply was, "…"", "Mary's reproach of "…"": whose words the narration says come next. */
  const possessiveBefore = (lo: number, hi: number): Tag | undefined => {
    let k = hi;
    while (k >= lo && (SKIPPABLE.has(text[k]!) || lower[k] === "was" || lower[k] === "of")) k--;
    if (k < lo || !REPLY_NOUNS.has(lower[k]!)) return undefined;
    for (let j = k - 1; j >= Math.max(lo, k - 5); j--) {
      const owned = possessiveReply(j, k);
      if (owned) return owned;
    }
    return undefined;
  };

  /** Dialogue tag in the narration just before a quote ("Jane said:" / "Then said he,"). */
  const tagBefore = (lo: number, hi: number): Tag | undefined => {
    const owned = possessiveBefore(lo, hi);
    if (owned) return owned;
    for (let v = hi; v >= Math.max(lo, hi - MAX_TAG_DISTANCE); v--) {
      if (isSpeechVerb(v)) return subject(v, Math.max(lo, v - 6), hi) ?? clauseSubject(v, lo) ?? pronounClause(v, lo);
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
