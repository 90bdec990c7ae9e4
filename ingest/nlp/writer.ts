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

import type { Analysis } from "./analysis.ts";
import type { EntityMention } from "./coref.ts";
import { SPEECH_VERBS } from "./lexicon.ts";
import { isVerbLike, tagToken, type Tagged } from "./pos.ts";
import { classifyWords } from "./tokenizer.ts";

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

// Every text cell is made of tokens joined by single spaces, and tokens never contain whitespace, so
// no cell can break a TSV row: nothing needs escaping.

/**
 * BookNLP reports Python string offsets (code points); JavaScript strings count UTF-16 units. Only
 * texts with characters outside the BMP need the conversion.
 */
function codePointOffsets(text: string, astral: boolean): Int32Array | undefined {
  if (!astral) return undefined;
  const map = new Int32Array(text.length + 1);
  let cp = 0;
  for (let i = 0; i < text.length; i++) {
    map[i] = cp;
    const c = text.charCodeAt(i);
    if (!(c >= 0xdc00 && c <= 0xdfff)) cp++;
  }
  map[text.length] = cp;
  return map;
}

/** Tags plus what a .tokens line needs of them, built once per word. */
export interface TaggedCell extends Tagged {
  /** "word\tlemma\t" as UTF-8: bytes [wordLemmaStart, wordLemmaEnd) of Tags.bytes. */
  wordLemmaStart: number;
  wordLemmaEnd: number;
  /** "\tPOS\ttag\t", UTF-8. */
  posTag: Uint8Array;
  verb: boolean;
  pronoun: boolean;
  /** The dependency label when the word is not its sentence's root (nor a subject pronoun). */
  relation: Uint8Array;
}

const encoder = new TextEncoder();
const REL_ROOT = encoder.encode("ROOT\t");
const REL_PUNCT = encoder.encode("punct\t");
const REL_SUBJECT = encoder.encode("nsubj\t");
const REL_OTHER = encoder.encode("dep\t");
const IN_QUOTE = encoder.encode("\tO\tTrue\n");
const NOT_IN_QUOTE = encoder.encode("\tO\tFalse\n");

// Few POS/tag pairs exist (a punctuation tag is the mark itself): their columns are encoded once per process.
const POS_TAG_COLUMNS = new Map<string, Uint8Array>();

function posTagColumns(pos: string, tag: string): Uint8Array {
  const key = pos + "\t" + tag;
  let bytes = POS_TAG_COLUMNS.get(key);
  if (bytes === undefined) POS_TAG_COLUMNS.set(key, (bytes = encoder.encode("\t" + key + "\t")));
  return bytes;
}

/**
 * A book's tags: cell(i) for token i (undefined past either end). A tag depends only on the word
 * and whether it opens a sentence, so each cell is built once, on first use; every cell's
 * "word\tlemma\t" goes into one shared buffer rather than a small array each.
 */
export class Tags {
  /** Grows as cells are made: read it after cell(). */
  bytes: Uint8Array;
  private used = 0;
  private readonly cells: (TaggedCell | undefined)[];

  constructor(private readonly a: Analysis) {
    this.cells = new Array(a.tok.vocab.length * 2);
    this.bytes = new Uint8Array(Math.max(256, a.tok.vocab.length * 24));
  }

  cell(i: number): TaggedCell | undefined {
    const { count, word, vocab, inSentence } = this.a.tok;
    if (i < 0 || i >= count) return undefined;
    const inQuote = this.a.scan.inQuote;
    const initial = inSentence[i] === 0 || (i > 0 && inQuote[i] === 1 && inQuote[i - 1] === 0);
    const key = word[i]! * 2 + (initial ? 1 : 0);
    return (this.cells[key] ??= this.make(vocab[word[i]!]!, initial));
  }

  private make(w: string, initial: boolean): TaggedCell {
    const tag = tagToken(w, initial);
    const wordLemmaStart = this.used;
    this.append(w + "\t" + tag.lemma + "\t");
    return {
      pos: tag.pos,
      tag: tag.tag,
      lemma: tag.lemma,
      wordLemmaStart,
      wordLemmaEnd: this.used,
      posTag: posTagColumns(tag.pos, tag.tag),
      verb: isVerbLike(tag.tag),
      pronoun: tag.pos === "PRON",
      relation: tag.pos === "PUNCT" ? REL_PUNCT : REL_OTHER,
    };
  }

  private append(s: string): void {
    if (this.used + 3 * s.length > this.bytes.length) {
      const bigger = new Uint8Array(Math.max(this.bytes.length * 2, this.used + 3 * s.length));
      bigger.set(this.bytes.subarray(0, this.used));
      this.bytes = bigger;
    }
    const bytes = this.bytes;
    for (let k = 0; k < s.length; k++) {
      const c = s.charCodeAt(k);
      if (c > 127) {
        this.used += encoder.encodeInto(s.slice(k), bytes.subarray(this.used)).written;
        return;
      }
      bytes[this.used++] = c;
    }
  }
}

const PAIRS = new Uint8Array(200);
for (let k = 0; k < 100; k++) {
  PAIRS[2 * k] = 48 + ((k / 10) | 0);
  PAIRS[2 * k + 1] = 48 + (k % 10);
}

/** Writes a non-negative integer in decimal at p; returns the position after it. */
function putInt(buf: Uint8Array, p: number, n: number): number {
  const digits = n < 10 ? 1 : n < 100 ? 2 : n < 1000 ? 3 : n < 10000 ? 4 : n < 100000 ? 5 : n < 1000000 ? 6 : n < 10000000 ? 7 : n < 100000000 ? 8 : n < 1000000000 ? 9 : 10;
  const after = p + digits;
  let q = after;
  while (n >= 100) {
    const hundreds = (n / 100) | 0;
    const r = (n - hundreds * 100) * 2;
    buf[--q] = PAIRS[r + 1]!;
    buf[--q] = PAIRS[r]!;
    n = hundreds;
  }
  if (n >= 10) {
    buf[--q] = PAIRS[n * 2 + 1]!;
    buf[--q] = PAIRS[n * 2]!;
  } else buf[--q] = 48 + n;
  return after;
}

function putBytes(buf: Uint8Array, p: number, b: Uint8Array): number {
  for (let k = 0; k < b.length; k++) buf[p++] = b[k]!;
  return p;
}

const TAB = 9;
// Longest line apart from the word and tag cells: seven integers, a relation and the fixed columns.
const LINE_RESERVE = 7 * 10 + 40;
/** .tokens is handed out in pieces of about this size, all built in one reused buffer. */
export const DEFAULT_TOKEN_PIECE_BYTES = 1 << 18;

/**
 * The .tokens file as UTF-8, passed to sink in pieces that end at line ends. The piece is only
 * valid during the call (its buffer is reused), so a 50 MB file never sits in memory at once
 * unless the sink keeps it.
 */
export function renderTokenPieces(
  a: Analysis,
  tags: Tags,
  sink: (piece: Uint8Array) => void,
  pieceBytes: number = DEFAULT_TOKEN_PIECE_BYTES,
): void {
  const { sentenceStarts, paragraph, start, end } = a.tok;
  const conv = codePointOffsets(a.text, a.tok.astral);
  const inQuote = a.scan.inQuote;
  let buf = new Uint8Array(Math.max(pieceBytes, TOKENS_HEADER.length + 1));
  let p = putBytes(buf, 0, encoder.encode(TOKENS_HEADER + "\n"));
  // "paragraph\tsentence\t" and the root's id are the same on every line of a sentence.
  const head = new Uint8Array(24);
  const rootId = new Uint8Array(12);
  for (let s = 0; s + 1 < sentenceStarts.length; s++) {
    const lo = sentenceStarts[s]!;
    const hi = sentenceStarts[s + 1]!;
    let root = lo;
    for (let i = lo; i < hi; i++) {
      if (tags.cell(i)!.verb) {
        root = i;
        break;
      }
    }
    let headLength = putInt(head, 0, paragraph[lo]!);
    head[headLength++] = TAB;
    headLength = putInt(head, headLength, s);
    head[headLength++] = TAB;
    const rootLength = putInt(rootId, 0, root);
    for (let i = lo; i < hi; i++) {
      const g = tags.cell(i)!;
      const need = LINE_RESERVE + g.wordLemmaEnd - g.wordLemmaStart + g.posTag.length;
      if (p + need > buf.length) {
        if (p > 0) sink(buf.subarray(0, p));
        p = 0;
        // A line longer than a whole piece (a token of a megabyte) gets a buffer of its own size.
        if (need > buf.length) buf = new Uint8Array(need);
      }
      for (let k = 0; k < headLength; k++) buf[p++] = head[k]!;
      p = putInt(buf, p, i - lo);
      buf[p++] = TAB;
      p = putInt(buf, p, i);
      buf[p++] = TAB;
      const cellBytes = tags.bytes;
      for (let k = g.wordLemmaStart; k < g.wordLemmaEnd; k++) buf[p++] = cellBytes[k]!;
      p = putInt(buf, p, conv ? conv[start[i]!]! : start[i]!);
      buf[p++] = TAB;
      p = putInt(buf, p, conv ? conv[end[i]!]! : end[i]!);
      p = putBytes(buf, p, g.posTag);
      p = putBytes(buf, p, i === root ? REL_ROOT : g.pronoun && i < root ? REL_SUBJECT : g.relation);
      for (let k = 0; k < rootLength; k++) buf[p++] = rootId[k]!;
      p = putBytes(buf, p, inQuote[i] ? IN_QUOTE : NOT_IN_QUOTE);
    }
  }
  sink(buf.subarray(0, p));
}

export function renderEntities(mentions: EntityMention[]): string {
  const lines = [ENTITIES_HEADER];
  for (const m of mentions) lines.push(`${m.coref}\t${m.start}\t${m.end}\t${m.prop}\t${m.cat}\t${m.text}`);
  return lines.join("\n") + "\n";
}

export function renderQuotes(a: Analysis): string {
  const words = a.tok.text;
  const rows = a.scan.quotes.map((q, k) => ({ start: q.start, end: q.end, speaker: a.attribution.speaker[k]!, mentionStart: a.attribution.mentionStart[k]!, mentionEnd: a.attribution.mentionEnd[k]! }));
  // A quotation inside another follows it, as its start is later.
  rows.push(...a.nested);
  rows.sort((x, y) => x.start - y.start || y.end - x.end);
  const lines = [QUOTES_HEADER];
  for (const r of rows) {
    const text = words.slice(r.start, r.end + 1).join(" ");
    const phrase = r.mentionStart >= 0 ? words.slice(r.mentionStart, r.mentionEnd + 1).join(" ") : "";
    lines.push(`${r.start}\t${r.end}\t${r.mentionStart}\t${r.mentionEnd}\t${phrase}\t${r.speaker}\t${text}`);
  }
  return lines.join("\n") + "\n";
}

export function renderSupersense(a: Analysis, mentions: EntityMention[]): string {
  const { count, text, word } = a.tok;
  const rows: [number, number, string, string][] = [];
  for (const m of mentions) if (m.cat === "PER" && m.prop !== "PRON") rows.push([m.start, m.end, "noun.person", m.text]);
  const speech = classifyWords(a.tok, (lc) => (SPEECH_VERBS.has(lc) ? 1 : 0));
  for (let i = 0; i < count; i++) if (speech[word[i]!]) rows.push([i, i, "verb.communication", text[i]!]);
  rows.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  return [SUPERSENSE_HEADER, ...rows.map((r) => `${r[0]}\t${r[1]}\t${r[2]}\t${r[3]}`)].join("\n") + "\n";
}

interface WordRef {
  w: string;
  i: number;
}

const POSSESSIVES = new Set(["his", "her", "my", "your", "their", "its", "our"]);
const OBJECTS = new Set(["him", "her", "me", "us", "them"]);
const COPULAS = new Set(["was", "is", "were", "are", "seemed", "looked", "became", "grew", "felt"]);

export function renderBook(a: Analysis, mentions: EntityMention[], tags: Tags): string {
  const { count, text, lower } = a.tok;
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
  const ref = (i: number): WordRef => ({ w: text[i]!, i });
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
    if (j < count && text[j]!.endsWith("ly")) j++;
    const isPossessive = POSSESSIVES.has(lc) || /^['\u2019]s$/.test(text[m.end + 1] ?? "");
    if (isPossessive) {
      let k = m.end + 1 + (POSSESSIVES.has(lc) ? 0 : 1);
      while (k < count && k <= m.end + 4 && tags.cell(k)!.pos === "ADJ") k++;
      const owned = tags.cell(k);
      if (owned && (owned.pos === "NOUN" || owned.tag === "NNS")) e.poss.push(ref(k));
    } else if (tags.cell(j)?.verb && !OBJECTS.has(lc)) {
      e.agent.push(ref(j));
      if (COPULAS.has(lower[j]!)) {
        let k = j + 1;
        if (k < count && text[k]!.endsWith("ly")) k++;
        if (tags.cell(k)?.pos === "ADJ") e.mod.push(ref(k));
      }
    }
    if (OBJECTS.has(lc) && m.start > 0 && tags.cell(m.start - 1)!.verb) e.patient.push(ref(m.start - 1));
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
