import { NARRATOR_ID, type Attribution } from "./attribution.ts";
import type { Character } from "./character.ts";
import { surfaceOf } from "./name-clusters.ts";
import { FEMALE_PRONOUNS, FIRST_PERSON, MALE_PRONOUNS, SECOND_PERSON } from "./lexicon.ts";
import type { NameMention, PlaceMention } from "./names.ts";
import type { Quote } from "./quotes.ts";
import { classifyWords, type Tokenized } from "./tokenizer.ts";

export type MentionKind = "PROP" | "NOM" | "PRON";

const FIRST = 1;
const SECOND = 2;
const MALE = 3;
const FEMALE = 4;

/** One row of the .entities file. */
export interface EntityMention {
  coref: number;
  start: number;
  end: number;
  prop: MentionKind;
  cat: "PER" | "LOC" | "FAC" | "GPE";
  text: string;
}

export interface CorefInput {
  tok: Tokenized;
  names: NameMention[];
  places: PlaceMention[];
  chars: Character[];
  quotes: Quote[];
  inQuote: Uint8Array;
  attribution: Attribution;
  narrator: boolean;
}

/**
 * Links every mention to a character: names by their cluster, I/me/my inside a quote to its
 * speaker, you/your to its addressee, he/she in narration to the most recent character of that
 * gender, narration I/me to the narrator. Non-person names become place entities.
 */
export function resolveMentions(input: CorefInput): EntityMention[] {
  const { tok, names, places, chars, quotes, inQuote, attribution, narrator } = input;
  const out: EntityMention[] = [];
  const quoteAt = new Int32Array(tok.count).fill(-1);
  quotes.forEach((q, k) => quoteAt.fill(k, q.start, q.end + 1));
  // Speaker of the quote whose dialogue tag is the one-word mention at this token ("she said").
  const tagPronoun = new Int32Array(tok.count).fill(-1);
  quotes.forEach((_, k) => {
    const s = attribution.mentionStart[k]!;
    if (s >= 0 && s === attribution.mentionEnd[k] && attribution.speaker[k]! >= 0) tagPronoun[s] = attribution.speaker[k]!;
  });
  const pronoun = classifyWords(tok, (lc) =>
    FIRST_PERSON.has(lc) ? FIRST : SECOND_PERSON.has(lc) ? SECOND : MALE_PRONOUNS.has(lc) ? MALE : FEMALE_PRONOUNS.has(lc) ? FEMALE : 0,
  );
  const nameAt = new Int32Array(tok.count).fill(-1);
  names.forEach((m, k) => (nameAt[m.start] = k));
  const placeAt = new Int32Array(tok.count).fill(-1);
  places.forEach((p, k) => (placeAt[p.start] = k));
  let nextOtherId = chars.length;
  const otherIds = new Map<string, number>();
  const otherId = (key: string) => {
    let id = otherIds.get(key);
    if (id === undefined) otherIds.set(key, (id = nextOtherId++));
    return id;
  };
  const last = { m: -1, f: -1 };
  const seen = (c: number) => {
    const g = chars[c]?.gender;
    if (g) last[g] = c;
  };
  for (let i = 0; i < tok.count; i++) {
    // Whoever just spoke is the likeliest "he"/"she" of the narration that follows.
    const qEnding = i > 0 ? quoteAt[i - 1]! : -1;
    if (qEnding >= 0 && quotes[qEnding]!.end === i - 1 && attribution.speaker[qEnding]! >= 0) seen(attribution.speaker[qEnding]!);
    const k = nameAt[i]!;
    if (k >= 0) {
      const m = names[k]!;
      const text = surfaceOf(tok, m.start, m.end);
      if (m.char >= 0 && chars[m.char]!.person) {
        out.push({ coref: m.char, start: m.start, end: m.end, prop: "PROP", cat: "PER", text });
        if (!inQuote[i]) seen(m.char);
      } else {
        out.push({ coref: otherId(m.parts.join(" ").toLowerCase()), start: m.start, end: m.end, prop: "PROP", cat: "GPE", text });
      }
      i = m.end;
      continue;
    }
    const p = placeAt[i]!;
    if (p >= 0) {
      const pl = places[p]!;
      const text = surfaceOf(tok, pl.start, pl.end);
      out.push({ coref: otherId(text.toLowerCase()), start: pl.start, end: pl.end, prop: "PROP", cat: "FAC", text });
      i = pl.end;
      continue;
    }
    const kind = pronoun[tok.word[i]!]!;
    let c = -1;
    const tagged = tagPronoun[i]!;
    if (tagged >= 0) c = tagged;
    else if (kind === 0) continue;
    else if (inQuote[i]) {
      const q = quoteAt[i]!;
      if (kind === FIRST) c = attribution.speaker[q]!;
      else if (kind === SECOND) c = attribution.addressee[q]!;
      else if (kind === MALE) c = last.m;
      else c = last.f;
    } else if (kind === MALE) c = last.m;
    else if (kind === FEMALE) c = last.f;
    else if (narrator && kind === FIRST) c = NARRATOR_ID;
    if (c < 0) continue;
    out.push({ coref: c, start: i, end: i, prop: "PRON", cat: "PER", text: tok.text[i]! });
    if (tagged >= 0) seen(c);
  }
  return out;
}
