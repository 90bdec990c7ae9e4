// Renders an analysis as BookNLP 1.0.7's output files, with the same names, headers and columns.
// .tokens has the 14 columns real 1.0.7 output has (the 13 documented ones plus inQuote); byte_onset
// and byte_offset are character offsets, as in BookNLP.
//
// Approximated columns (BookNLP fills them from neural models we do not run):
//   .tokens      lemma, POS_tag, fine_POS_tag (rule-based), dependency_relation and
//                syntactic_head_ID (each sentence hangs off its first verb; subjects, punctuation and
//                the rest are labelled nsubj / punct / dep), event (always "O").
//   .supersense  only noun.person (character mentions) and verb.communication (speech verbs).
//   .book        g.inference from pronoun and title counts; agent/patient/poss/mod from adjacency.
//   .entities    PER mentions only for characters (names, resolved pronouns); other proper names as GPE/FAC.

import type { Analysis } from "./engine.ts";
import type { EntityMention } from "./coref.ts";
import { SPEECH_VERBS } from "./lexicon.ts";
import { isVerbLike, tagToken, type Tagged } from "./pos.ts";

export const TOKENS_HEADER = [
  "paragraph_ID", "sentence_ID", "token_ID_within_sentence", "token_ID_within_document", "word", "lemma",
  "byte_onset", "byte_offset", "POS_tag", "fine_POS_tag", "dependency_relation", "syntactic_head_ID", "event", "inQuote",
].join("\t");
export const ENTITIES_HEADER = "COREF\tstart_token\tend_token\tprop\tcat\ttext";
export const QUOTES_HEADER = "quote_start\tquote_end\tmention_start\tmention_end\tmention_phrase\tchar_id\tquote";
export const SUPERSENSE_HEADER = "start_token\tend_token\tsupersense_category\ttext";

export interface BookNlpFiles {
  tokens: string;
  entities: string;
  quotes: string;
  supersense: string;
  book: string;
}

const clean = (s: string) => s.replace(/[\t\r\n]+/g, " ");

/**
 * BookNLP reports Python string offsets (code points); JavaScript strings count UTF-16 units. Only
 * texts with characters outside the BMP need the conversion.
 */
function codePointOffsets(text: string): ((utf16: number) => number) | undefined {
  if (!/[\uD800-\uDBFF]/.test(text)) return undefined;
  const map = new Int32Array(text.length + 1);
  let cp = 0;
  for (let i = 0; i < text.length; i++) {
    map[i] = cp;
    const c = text.charCodeAt(i);
    if (!(c >= 0xdc00 && c <= 0xdfff)) cp++;
  }
  map[text.length] = cp;
  return (u) => map[u]!;
}

/** Tags plus the pieces of a .tokens line that depend only on the word, built once per word. */
interface TaggedCell extends Tagged {
  wordLemma: string;
  posTag: string;
}

export function tagAll(a: Analysis): TaggedCell[] {
  // The tag depends only on the word and whether it opens a sentence: cache both cases.
  const cache = [new Map<string, TaggedCell>(), new Map<string, TaggedCell>()];
  return a.tok.tokens.map((t, i) => {
    const initial = t.inSentence === 0 || (i > 0 && a.scan.inQuote[i] === 1 && a.scan.inQuote[i - 1] === 0) ? 1 : 0;
    const map = cache[initial]!;
    let g = map.get(t.text);
    if (!g) {
      const tag = tagToken(t.text, initial === 1);
      // Tokens never contain whitespace, so no escaping is needed.
      g = { ...tag, wordLemma: t.text + "\t" + tag.lemma + "\t", posTag: "\t" + tag.pos + "\t" + tag.tag + "\t" };
      map.set(t.text, g);
    }
    return g;
  });
}

export function renderTokens(a: Analysis, tags: TaggedCell[]): string {
  const { tokens, sentenceStarts } = a.tok;
  const conv = codePointOffsets(a.text);
  const inQuote = a.scan.inQuote;
  // Lines are joined per sentence, sentences once at the end: short ropes, one flattening.
  const parts: string[] = [TOKENS_HEADER + "\n"];
  for (let s = 0; s + 1 < sentenceStarts.length; s++) {
    const lo = sentenceStarts[s]!;
    const hi = sentenceStarts[s + 1]!;
    let root = lo;
    for (let i = lo; i < hi; i++) {
      if (isVerbLike(tags[i]!.tag)) {
        root = i;
        break;
      }
    }
    const head = tokens[lo]!.paragraph + "\t" + s + "\t";
    const tail = "\t" + root + "\tO\t";
    let chunk = "";
    for (let i = lo; i < hi; i++) {
      const t = tokens[i]!;
      const g = tags[i]!;
      const rel = i === root ? "ROOT" : g.pos === "PUNCT" ? "punct" : g.pos === "PRON" && i < root ? "nsubj" : "dep";
      const start = conv ? conv(t.start) : t.start;
      const end = conv ? conv(t.end) : t.end;
      chunk += head + (i - lo) + "\t" + i + "\t" + g.wordLemma + start + "\t" + end + g.posTag + rel + tail + (inQuote[i] ? "True\n" : "False\n");
    }
    parts.push(chunk);
  }
  return parts.join("");
}

export function renderEntities(mentions: EntityMention[]): string {
  const lines = [ENTITIES_HEADER];
  for (const m of mentions) lines.push(`${m.coref}\t${m.start}\t${m.end}\t${m.prop}\t${m.cat}\t${clean(m.text)}`);
  return lines.join("\n") + "\n";
}

export function renderQuotes(a: Analysis): string {
  const { tokens } = a.tok;
  const lines = [QUOTES_HEADER];
  a.scan.quotes.forEach((q, k) => {
    const text = tokens.slice(q.start, q.end + 1).map((t) => t.text).join(" ");
    const ms = a.attribution.mentionStart[k]!;
    const me = a.attribution.mentionEnd[k]!;
    const phrase = ms >= 0 ? tokens.slice(ms, me + 1).map((t) => t.text).join(" ") : "";
    lines.push(`${q.start}\t${q.end}\t${ms}\t${me}\t${clean(phrase)}\t${a.attribution.speaker[k]!}\t${clean(text)}`);
  });
  return lines.join("\n") + "\n";
}

export function renderSupersense(a: Analysis, mentions: EntityMention[]): string {
  const { tokens } = a.tok;
  const rows: [number, number, string, string][] = [];
  for (const m of mentions) if (m.cat === "PER" && m.prop !== "PRON") rows.push([m.start, m.end, "noun.person", m.text]);
  tokens.forEach((t, i) => {
    if (SPEECH_VERBS.has(t.lower)) rows.push([i, i, "verb.communication", t.text]);
  });
  rows.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  return [SUPERSENSE_HEADER, ...rows.map((r) => `${r[0]}\t${r[1]}\t${r[2]}\t${clean(r[3])}`)].join("\n") + "\n";
}

interface WordRef {
  w: string;
  i: number;
}

const POSSESSIVES = new Set(["his", "her", "my", "your", "their", "its", "our"]);
const OBJECTS = new Set(["him", "her", "me", "us", "them"]);
const COPULAS = new Set(["was", "is", "were", "are", "seemed", "looked", "became", "grew", "felt"]);

export function renderBook(a: Analysis, mentions: EntityMention[], tags: Tagged[]): string {
  const { tokens } = a.tok;
  type Entry = {
    count: number;
    proper: Map<string, number>;
    common: Map<string, number>;
    pronoun: Map<string, number>;
    agent: WordRef[];
    patient: WordRef[];
    poss: WordRef[];
    mod: WordRef[];
    he: number;
    she: number;
    they: number;
  };
  const byId = new Map<number, Entry>();
  const ref = (i: number): WordRef => ({ w: tokens[i]!.text, i });
  for (const m of mentions) {
    if (m.cat !== "PER") continue;
    let e = byId.get(m.coref);
    if (!e) {
      e = { count: 0, proper: new Map(), common: new Map(), pronoun: new Map(), agent: [], patient: [], poss: [], mod: [], he: 0, she: 0, they: 0 };
      byId.set(m.coref, e);
    }
    e.count++;
    const bucket = m.prop === "PROP" ? e.proper : m.prop === "NOM" ? e.common : e.pronoun;
    bucket.set(m.text, (bucket.get(m.text) ?? 0) + 1);
    const lc = m.text.toLowerCase();
    if (m.prop === "PRON") {
      if (lc === "he" || lc === "him" || lc === "his" || lc === "himself") e.he++;
      else if (lc === "she" || lc === "her" || lc === "hers" || lc === "herself") e.she++;
    }
    let j = m.end + 1;
    if (tokens[j] && tokens[j]!.text.endsWith("ly")) j++;
    const isPossessive = POSSESSIVES.has(lc) || /^['\u2019]s$/.test(tokens[m.end + 1]?.text ?? "");
    if (isPossessive) {
      let k = m.end + 1 + (POSSESSIVES.has(lc) ? 0 : 1);
      while (k < tokens.length && k <= m.end + 4 && tags[k]!.pos === "ADJ") k++;
      if (tags[k] && (tags[k]!.pos === "NOUN" || tags[k]!.tag === "NNS")) e.poss.push(ref(k));
    } else if (tags[j] && isVerbLike(tags[j]!.tag) && !OBJECTS.has(lc)) {
      e.agent.push(ref(j));
      if (COPULAS.has(tokens[j]!.lower)) {
        let k = j + 1;
        if (tokens[k] && tokens[k]!.text.endsWith("ly")) k++;
        if (tags[k]?.pos === "ADJ") e.mod.push(ref(k));
      }
    }
    if (OBJECTS.has(lc) && m.start > 0 && isVerbLike(tags[m.start - 1]!.tag)) e.patient.push(ref(m.start - 1));
  }
  for (const c of a.chars) {
    const e = byId.get(c.id);
    if (!e) continue;
    for (const t of c.titles) {
      if (t === "mr" || t === "sir" || t === "lord") e.he += 3;
      if (t === "mrs" || t === "miss" || t === "lady") e.she += 3;
    }
  }
  const list = (m: Map<string, number>) =>
    [...m.entries()].sort((x, y) => y[1] - x[1]).map(([n, c]) => ({ c, n }));
  const round = (x: number) => Math.round(x * 1000) / 1000;
  const characters = [...byId.entries()]
    .sort((x, y) => y[1].count - x[1].count)
    .map(([id, e]) => {
      const total = e.he + e.she + e.they;
      const g =
        total === 0
          ? null
          : (() => {
              // Smoothed like BookNLP's: a little mass always stays on they/them.
              const he = (e.he + 0.1) / (total + 0.3);
              const she = (e.she + 0.1) / (total + 0.3);
              const they = 1 - he - she;
              const inference = { "he/him/his": round(he), "she/her": round(she), "they/them/their": round(they), "xe/xem/xir": 0, "ze/zem/zir/hir": 0 };
              const [argmax, max] = Object.entries(inference).sort((x, y) => y[1] - x[1])[0]!;
              return { inference, argmax, max, total: round(total) };
            })();
      return {
        agent: e.agent,
        patient: e.patient,
        mod: e.mod,
        poss: e.poss,
        id,
        g,
        count: e.count,
        mentions: { proper: list(e.proper), common: list(e.common), pronoun: list(e.pronoun) },
      };
    });
  return JSON.stringify({ characters });
}
