// Parser for BookNLP's output files (real BookNLP 1.0.x and this project's engine alike); the
// character list made from them is in character-list.ts. Pure functions: strings in, records out.
//
// Tolerant by design: columns are found by header name (so 13- and 14-column .tokens both work),
// CRLF line ends, blank lines, "None"/-1 ids, short rows and unknown JSON keys are all accepted.

import { z } from "zod";

export interface TokenRow {
  paragraph: number;
  sentence: number;
  tokenInSentence: number;
  token: number;
  word: string;
  lemma: string;
  start: number;
  end: number;
  pos: string;
  finePos: string;
  dependency: string;
  head: number;
  event: string;
  inQuote: boolean | undefined;
}

export interface EntityRow {
  coref: number;
  start: number;
  end: number;
  prop: string;
  cat: string;
  text: string;
}

export interface QuoteRow {
  quoteStart: number;
  quoteEnd: number;
  mentionStart: number;
  mentionEnd: number;
  mentionPhrase: string;
  /** null when BookNLP found no speaker. */
  charId: number | null;
  quote: string;
}

export interface SupersenseRow {
  start: number;
  end: number;
  category: string;
  text: string;
}

export interface MentionCount {
  c: number;
  n: string;
}

export interface BookCharacter {
  id: number;
  count: number;
  /** BookNLP's pronoun-based gender label ("he/him/his", "she/her", …), or null when unknown. */
  genderLabel: string | null;
  genderConfidence: number | null;
  mentions: { proper: MentionCount[]; common: MentionCount[]; pronoun: MentionCount[] };
}

export interface ParsedBookNlp {
  tokens: TokenRow[];
  entities: EntityRow[];
  quotes: QuoteRow[];
  supersense: SupersenseRow[];
  characters: BookCharacter[];
}

export interface BookNlpFileTexts {
  tokens?: string;
  entities?: string;
  quotes?: string;
  supersense?: string;
  book?: string;
}

type Row = (name: string) => string;

/** Splits a TSV file into rows addressed by header name. */
function table(text: string): Row[] {
  const lines = text.split(/\r?\n/);
  const header = (lines[0] ?? "").split("\t").map((h) => h.trim());
  const index = new Map(header.map((h, i) => [h, i]));
  const rows: Row[] = [];
  for (let k = 1; k < lines.length; k++) {
    const line = lines[k]!;
    if (line.trim() === "") continue;
    const cells = line.split("\t");
    rows.push((name) => {
      const i = index.get(name);
      return i === undefined ? "" : (cells[i] ?? "");
    });
  }
  return rows;
}

const int = (s: string, fallback = -1): number => {
  const n = Number.parseInt(s, 10);
  return Number.isFinite(n) ? n : fallback;
};

export function parseTokens(text: string): TokenRow[] {
  return table(text).map((r) => ({
    paragraph: int(r("paragraph_ID")),
    sentence: int(r("sentence_ID")),
    tokenInSentence: int(r("token_ID_within_sentence")),
    token: int(r("token_ID_within_document")),
    word: r("word"),
    lemma: r("lemma"),
    start: int(r("byte_onset")),
    end: int(r("byte_offset")),
    pos: r("POS_tag"),
    finePos: r("fine_POS_tag"),
    dependency: r("dependency_relation"),
    head: int(r("syntactic_head_ID")),
    event: r("event"),
    inQuote: r("inQuote") === "" ? undefined : r("inQuote") === "True",
  }));
}

export function parseEntities(text: string): EntityRow[] {
  return table(text).map((r) => ({
    coref: int(r("COREF")),
    start: int(r("start_token")),
    end: int(r("end_token")),
    prop: r("prop"),
    cat: r("cat"),
    text: r("text"),
  }));
}

export function parseQuotes(text: string): QuoteRow[] {
  return table(text).map((r) => {
    const id = r("char_id").trim();
    const charId = id === "" || id === "None" || id === "-1" ? null : int(id, -1);
    return {
      quoteStart: int(r("quote_start")),
      quoteEnd: int(r("quote_end")),
      mentionStart: int(r("mention_start")),
      mentionEnd: int(r("mention_end")),
      mentionPhrase: r("mention_phrase"),
      charId: charId === -1 ? null : charId,
      quote: r("quote"),
    };
  });
}

export function parseSupersense(text: string): SupersenseRow[] {
  return table(text).map((r) => ({
    start: int(r("start_token")),
    end: int(r("end_token")),
    category: r("supersense_category"),
    text: r("text"),
  }));
}

const MentionList = z.array(z.object({ c: z.number(), n: z.string() })).catch([]);
const BookSchema = z.object({
  characters: z
    .array(
      z.object({
        id: z.number(),
        count: z.number().catch(0),
        g: z
          .object({ argmax: z.string(), max: z.number() })
          .nullable()
          .catch(null)
          .optional(),
        mentions: z
          .object({ proper: MentionList, common: MentionList, pronoun: MentionList })
          .catch({ proper: [], common: [], pronoun: [] }),
      }),
    )
    .catch([]),
});

export function parseBook(text: string): BookCharacter[] {
  if (text.trim() === "") return [];
  const book = BookSchema.parse(JSON.parse(text));
  return book.characters.map((c) => ({
    id: c.id,
    count: c.count,
    genderLabel: c.g?.argmax ?? null,
    genderConfidence: c.g?.max ?? null,
    mentions: c.mentions,
  }));
}

export function parseBookNlp(files: BookNlpFileTexts): ParsedBookNlp {
  return {
    tokens: files.tokens ? parseTokens(files.tokens) : [],
    entities: files.entities ? parseEntities(files.entities) : [],
    quotes: files.quotes ? parseQuotes(files.quotes) : [],
    supersense: files.supersense ? parseSupersense(files.supersense) : [],
    characters: files.book ? parseBook(files.book) : [],
  };
}

// BookNLP writes "Mr. Darcy 's" style token text; this puts the spacing back the way prose has it.
export function detokenize(s: string): string {
  return s
    .replace(/\s+/g, " ")
    .replace(/ ([,.;:!?%)\]}]|n't|'(?:s|m|re|ve|ll|d)\b|[\u2019'](?=\s|$))/g, "$1")
    .replace(/([(\[{]) /g, "$1")
    .replace(/ ?(--|\u2014) ?/g, "$1")
    .replace(/ - /g, "-")
    .trim();
}

const QUOTE_MARKS = /^["\u201c\u201d\u2018\u2019'\u00ab\u00bb\u2014\u2015-]+\s*|\s*["\u201c\u201d\u2018\u2019'\u00ab\u00bb]+$/g;

export function stripQuoteMarks(q: string): string {
  return detokenize(q).replace(QUOTE_MARKS, "").trim();
}
