/**
 * The work itself out of a book file: Project Gutenberg's header, footer and licence, the "Produced
 * by" and transcriber's notes, the title page and the table of contents are not the story. Left in,
 * they are read as story: the NLP step finds "Michael Hart" and the author among the characters,
 * passages quote the licence, and reading positions count pages nobody reads.
 *
 * Only a file with a Project Gutenberg marker is trimmed; any other file is the work as it is. Only
 * the outermost header and footer are boilerplate, as Gutenberg's own tools read them: the first
 * START line within the head of the file, the footer within its tail (MAX_HEADER_CHARS,
 * MAX_FOOTER_CHARS). A marker line anywhere else (a quotation, a second volume's, a lone "End of the
 * Project Gutenberg …" in a file with no header) is kept as text and named in `warnings`, and so is a
 * "Contents" that would cut more than MAX_CONTENTS_CUT_SHARE of the work: nothing more than the
 * boilerplate is cut, and nothing silently. The offsets returned say what was cut, so the log can
 * tell an operator what the book was reduced to.
 *
 * A plain text has no header to name it: its title and author are read from its opening lines
 * (openingTitle), the way a reader finds them on a title page.
 *
 * Pure: no I/O.
 */
import { isWhitespace } from "../../common/whitespace.ts";
import { TITLE_SMALL_WORDS } from "./story-boundaries.ts";

export interface StrippedRange {
  /** UTF-16 offsets in the decoded file, end exclusive. */
  start: number;
  end: number;
  what: "gutenberg header" | "front matter" | "table of contents" | "gutenberg footer and licence" | "back matter";
}

export interface BookText {
  /** The work: what is chunked, analysed and indexed. */
  text: string;
  /** Where `text` is in the decoded file. */
  start: number;
  end: number;
  stripped: StrippedRange[];
  /** "Title:", "Author:" and "Language:" of the Gutenberg header, when present. */
  header: HeaderFields;
  /** What looked like boilerplate but was kept as text, and why: for the operator's log. */
  warnings: string[];
}

export interface HeaderFields {
  title?: string;
  author?: string;
  language?: string;
}

/** The end of the header: the START line, or in older files the end of "THE SMALL PRINT!". */
const HEADER_ENDS = [
  /^[ \t]*\*{3}[ \t]*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK.*$/gim,
  /^[ \t]*\*+[ \t]*END[ \t]*\*?[ \t]*THE SMALL PRINT!.*$/gim,
];
/** The first line after the work: the END line, or the "End of …" sentence above it, or the licence. */
const FOOTER_STARTS = [
  /^[ \t]*\*{3}[ \t]*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK.*$/gim,
  /^[ \t]*End of (?:the |this )?Project Gutenberg(?:'s|’s)? .*$/gim,
  /^[ \t]*\*{3}[ \t]*START: FULL LICENSE.*$/gim,
];
/** Paragraphs about the edition, not of the work, found next to the header or the footer. */
const EDITORIAL = /^(?:produced by\b|e-?text prepared by\b|transcriber['’]?s? notes?\b|\[?transcriber['’]?s? note|this e-?book was produced by\b|cover$|\[illustration)/i;
const CONTENTS = /^(?:table of )?contents[.:]?$/i;
/**
 * Gutenberg's header ends within the first 30,000 characters (about 600 today; the small print of
 * the nineties about 12,000) and its footer and licence take at most the last 30,000 (the licence is
 * 18,500). A marker further in is not the wrapping but the text's own: cutting at it would cut story.
 */
const MAX_HEADER_CHARS = 30_000;
const MAX_FOOTER_CHARS = 30_000;
/** A header or footer cut larger than this share of the file is named in the warnings unless it is visibly Gutenberg's. */
const MAX_QUIET_CUT_SHARE = 0.05;
/**
 * A table of contents starts and ends within the first fifth of the work, or its first 50,000
 * characters in a short one (War and Peace's is 6,600): a "Contents" line further on is the story's.
 */
const MAX_CONTENTS_SHARE = 0.2;
const MAX_CONTENTS_CHARS = 50_000;
/**
 * A table of contents is a small part of a book (War and Peace's 0.2%, a short story collection's
 * 1 or 2%): a "Contents" whose entries would run over more than this share of the work, or over
 * MIN_CONTENTS_ALLOWANCE characters in a very short one, is a look-alike in the story, kept as text.
 */
const MAX_CONTENTS_CUT_SHARE = 0.05;
const MIN_CONTENTS_ALLOWANCE = 5_000;
/** Entries of a table of contents are headings: short lines. */
const MAX_ENTRY_CHARS = 100;

interface Marker {
  start: number;
  end: number;
}

function markers(text: string, pattern: RegExp): Marker[] {
  return [...text.matchAll(pattern)].map((m) => ({ start: m.index!, end: m.index! + m[0].length }));
}

/** The header's last line: the first line of each kind within the head, the later of them. */
function headerLine(found: readonly Marker[][]): Marker | undefined {
  const firsts = found.map((kind) => kind.find((m) => m.start < MAX_HEADER_CHARS)).filter((m) => m !== undefined);
  return firsts.reduce<Marker | undefined>((a, m) => (a === undefined || m.end > a.end ? m : a), undefined);
}

/** The footer's first line: the last line of each kind within the tail, the earliest of them. */
function footerLine(found: readonly Marker[][], length: number, after: number): Marker | undefined {
  const tail = Math.max(after, length - MAX_FOOTER_CHARS);
  const lasts = found.map((kind) => kind.findLast((m) => m.start >= tail)).filter((m) => m !== undefined);
  return lasts.reduce<Marker | undefined>((a, m) => (a === undefined || m.start < a.start ? m : a), undefined);
}

const percentOf = (at: number, length: number) => `${Math.round((at / Math.max(1, length)) * 100)}%`;

const normalise = (line: string) => line.replace(/\s+/g, " ").trim().toLowerCase();

/** "Title:", "Author:" and "Language:" lines; an indented line below continues the field. */
export function readHeaderFields(header: string): HeaderFields {
  const fields: HeaderFields = {};
  const lines = header.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const m = /^(Title|Author|Language):[ \t]*(.*)$/.exec(lines[i]!);
    if (!m || m[2]!.trim() === "") continue;
    let value = m[2]!.trim();
    while (i + 1 < lines.length && /^[ \t]+\S/.test(lines[i + 1]!)) value += ` ${lines[++i]!.trim()}`;
    const key = m[1]!.toLowerCase() as keyof HeaderFields;
    fields[key] ??= value;
  }
  return fields;
}

interface Paragraph {
  start: number;
  end: number;
  text: string;
}

/**
 * The paragraphs of text[from, to): from a character that is not whitespace to just before a blank
 * line or the whitespace that ends the range. One pass: a pattern such as /\S[\s\S]*?(?=\n[ \t]*\n|\s*$)/
 * reads a long run of whitespace again from each of its characters (100,000 spaces took 22 s).
 */
function paragraphs(text: string, from: number, to: number): Paragraph[] {
  const found: Paragraph[] = [];
  let contentEnd = to;
  while (contentEnd > from && isWhitespace(text.charCodeAt(contentEnd - 1))) contentEnd--;
  let at = from;
  /** Where the search for the next blank line goes on: nothing before it starts one. */
  let searched = from;
  while (at < contentEnd) {
    while (isWhitespace(text.charCodeAt(at))) at++;
    let end = contentEnd;
    for (let line = text.indexOf("\n", Math.max(at + 1, searched)); line >= 0 && line < contentEnd; line = text.indexOf("\n", searched)) {
      let next = line + 1;
      while (next < to && (text.charCodeAt(next) === 0x20 || text.charCodeAt(next) === 0x09)) next++;
      searched = next;
      if (next < to && text.charCodeAt(next) === 0x0a) {
        end = line;
        break;
      }
    }
    found.push({ start: at, end, text: text.slice(at, end) });
    at = end;
  }
  return found;
}

/** A title page's paragraphs: the title, "by" the author, the author, an edition line, the editorial notes. */
function isFrontMatter(paragraph: string, header: HeaderFields): boolean {
  const line = normalise(paragraph);
  if (EDITORIAL.test(line)) return true;
  if (paragraph.includes("\n")) return false;
  const title = header.title ? normalise(header.title) : undefined;
  const author = header.author ? normalise(header.author) : undefined;
  if (title && line === title) return true;
  if (author && (line === author || line === `by ${author}` || line.startsWith(`by ${author}`))) return true;
  return line.length <= 60 && /\bedition\b/.test(line);
}

/**
 * A "Contents" line and the entries below it, up to where the first entry comes back as the work's
 * first heading. Everything from the header to that heading is the title page and the contents.
 */
function contentsEnd(text: string, from: number, to: number): { start: number; end: number } | undefined {
  const lines = paragraphs(text, from, to).flatMap((p) => {
    let at = p.start;
    return p.text.split("\n").map((line) => {
      const start = at;
      at += line.length + 1;
      return { start, line: normalise(line) };
    });
  });
  const limit = from + Math.max((to - from) * MAX_CONTENTS_SHARE, MAX_CONTENTS_CHARS);
  const heading = lines.findIndex((l) => CONTENTS.test(l.line));
  if (heading < 0 || lines[heading]!.start > limit) return undefined;
  const first = lines[heading + 1];
  if (!first) return undefined;
  for (let i = heading + 2; i < lines.length && lines[i]!.start < limit; i++) {
    const { line, start } = lines[i]!;
    if (line === first.line) return { start: lines[heading]!.start, end: start };
    if (line.length > MAX_ENTRY_CHARS) return undefined;
  }
  return undefined;
}

export function extractWork(file: string): BookText {
  const headerMarkers = HEADER_ENDS.map((p) => markers(file, p));
  const footerMarkers = FOOTER_STARTS.map((p) => markers(file, p));
  const headerMarker = headerLine(headerMarkers);
  const footerMarker = footerLine(footerMarkers, file.length, headerMarker?.end ?? 0);
  const headerAt = headerMarker?.end;
  const footerAt = footerMarker?.start;
  let start = headerAt ?? 0;
  let end = footerAt ?? file.length;
  const warnings: string[] = [];
  const inner = [...headerMarkers, ...footerMarkers]
    .flat()
    .filter((m) => m.start >= start && m.start < end)
    .sort((a, b) => a.start - b.start);
  if (inner.length > 0) {
    const where = inner.slice(0, 5).map((m) => percentOf(m.start, file.length));
    warnings.push(
      `${inner.length} Project Gutenberg marker line${inner.length > 1 ? "s" : ""} inside the file kept as text, at ${where.join(", ")}${inner.length > 5 ? ", …" : ""} ` +
        `("${file.slice(inner[0]!.start, inner[0]!.end).trim().slice(0, 80)}"): only a header within the first ${MAX_HEADER_CHARS} characters and a footer within the last ${MAX_FOOTER_CHARS} are cut`,
    );
  }
  // Gutenberg's own header names it above its marker line, and its licence below the footer's: a
  // marker line with a large cut and no such text beside it may be the story's own.
  const unconfirmed = (cut: string, what: string) => {
    if (cut.length > file.length * MAX_QUIET_CUT_SHARE && !/gutenberg/i.test(cut)) {
      warnings.push(`the ${what} cut ${percentOf(cut.length, file.length)} of the file, with no word of Project Gutenberg beside its marker line: check that it is not story`);
    }
  };
  if (headerMarker) unconfirmed(file.slice(0, headerMarker.start), "Project Gutenberg header");
  if (footerMarker) unconfirmed(file.slice(footerMarker.end), "Project Gutenberg footer");
  if (headerAt === undefined && footerAt === undefined) return { text: file, start: 0, end: file.length, stripped: [], header: {}, warnings };
  const stripped: StrippedRange[] = [];
  const header = headerAt === undefined ? {} : readHeaderFields(file.slice(0, headerAt));
  if (headerAt !== undefined) stripped.push({ start: 0, end: headerAt, what: "gutenberg header" });
  if (footerAt !== undefined) stripped.push({ start: footerAt, end: file.length, what: "gutenberg footer and licence" });

  let contents = contentsEnd(file, start, end);
  if (contents && contents.end - contents.start > Math.max((end - start) * MAX_CONTENTS_CUT_SHARE, MIN_CONTENTS_ALLOWANCE)) {
    warnings.push(
      `a "Contents" line at ${percentOf(contents.start, file.length)} of the file is kept as text: as a table of contents it would cut ` +
        `${percentOf(contents.end - contents.start, end - start)} of the work, more than the ${percentOf(MAX_CONTENTS_CUT_SHARE, 1)} a table of contents takes`,
    );
    contents = undefined;
  }
  const body = paragraphs(file, contents?.end ?? start, end);
  let first = 0;
  while (first < body.length && isFrontMatter(body[first]!.text, header)) first++;
  let last = body.length - 1;
  while (last > first && EDITORIAL.test(normalise(body[last]!.text))) last--;
  const workStart = body[first]?.start ?? end;
  const workEnd = body[last]?.end ?? workStart;
  if (contents) {
    if (file.slice(start, contents.start).trim() !== "") stripped.push({ start, end: contents.start, what: "front matter" });
    stripped.push({ ...contents, what: "table of contents" });
    if (workStart > contents.end) stripped.push({ start: contents.end, end: workStart, what: "front matter" });
  } else if (body[first] && workStart > start && file.slice(start, workStart).trim() !== "") {
    stripped.push({ start, end: workStart, what: "front matter" });
  }
  if (workEnd < end && file.slice(workEnd, end).trim() !== "") stripped.push({ start: workEnd, end, what: "back matter" });
  start = workStart;
  end = Math.max(workStart, workEnd);
  return { text: file.slice(start, end), start, end, stripped: stripped.sort((a, b) => a.start - b.start), header, warnings };
}

/** Whether anything of a story is left: words of two letters or more, not just numbers and marks. */
export function hasProse(text: string): boolean {
  return /\p{L}{2,}/u.test(text);
}

/** A plain text's title page is in its first lines: further on is story. */
const OPENING_LINES = 12;
const OPENING_CHARS = 1_500;
/** Longer is a sentence, not a title: the long titles people know run to nine or ten words. */
const MAX_TITLE_WORDS = 12;
/** A title may end in ".", "!" or "?" ("Emma.", "Westward Ho!", "Can You Forgive Her?"): a longer line that does is a sentence. */
const MAX_PUNCTUATED_TITLE_WORDS = 5;
const MAX_AUTHOR_WORDS = 6;
/** A subtitle, an edition line or "A NOVEL" is short: a longer paragraph is the story begun. */
const MAX_FRONT_PARAGRAPH_WORDS = 25;
/** At least one letter: the empty match of the pattern's optional parts is not a numeral. */
const ROMAN = "(?=[ivxlcdm])m{0,4}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})";
const NUMERAL = `(?:${ROMAN}|\\d{1,3})`;
const ORDINAL = `(?:${NUMERAL}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|the)`;
/** "CHAPTER I", "Chapter 1: …", "BOOK ONE", "Part the First", "I.", "IV", "Contents": where the story or its contents begin. */
const HEADING = new RegExp(
  `^(?:(?:chapter|book|part|volume|vol\\.|act|scene|letter|stave|canto|section)\\s+${ORDINAL}\\b|${NUMERAL}(?:\\.(?:\\s|$)|$)|(?:prologue|preface|foreword|introduction|epilogue|(?:table of )?contents)[.:]?$)`,
  "i",
);
/** Only I, V and X: a wider pattern would take names such as "LI" or "DI" for numerals. */
const ROMAN_WORD = /^(?=[ivx]{2})x{0,3}(?:ix|iv|v?i{0,3})$/i;

const wordCount = (text: string) => text.split(/\s+/).filter((w) => w !== "").length;

interface OpeningLine {
  text: string;
  paragraph: number;
}

/** The lines above the story: up to a chapter heading (`heading`), a paragraph of prose, or OPENING_LINES lines. */
function titlePage(file: string): { lines: OpeningLine[]; text: string; heading: boolean } {
  const to = file.length <= OPENING_CHARS ? file.length : Math.max(0, file.lastIndexOf("\n", OPENING_CHARS));
  const lines: OpeningLine[] = [];
  let end = 0;
  for (const [paragraph, p] of paragraphs(file, 0, to).entries()) {
    const raw = p.text.split("\n");
    const headingAt = raw.findIndex((line) => HEADING.test(line.trim()));
    const kept = headingAt < 0 ? raw : raw.slice(0, headingAt);
    if (wordCount(kept.join(" ")) > MAX_FRONT_PARAGRAPH_WORDS || lines.length + kept.length > OPENING_LINES) break;
    lines.push(...kept.map((line) => ({ text: line.trim(), paragraph })));
    if (kept.length > 0) end = p.start + kept.join("\n").length;
    if (headingAt >= 0) return { lines, text: file.slice(0, end), heading: true };
  }
  return { lines, text: file.slice(0, end), heading: false };
}

/** Short, not a sentence, not a line of dialogue: what a title line looks like. */
function isTitleLine(line: string): boolean {
  const words = wordCount(line);
  return (
    /^[\p{Lu}\p{Lt}\p{Lo}\p{N}]/u.test(line) &&
    words <= MAX_TITLE_WORDS &&
    !/[,;:(\-–—]$/u.test(line) &&
    (words <= MAX_PUNCTUATED_TITLE_WORDS || !/[.!?…۔]$/u.test(line))
  );
}

/** The name a "by" line gives: "by Wilkie Collins", or a lone "BY" with the name on the next line; not "By the author of …". */
function authorOf(line: string, next: string | undefined): string | undefined {
  const by = /^by\b[.:]?\s*(.*)$/i.exec(line);
  if (!by) return undefined;
  // What follows a comma is not the name: "by Charles Dickens, with illustrations by Phiz".
  const name = (by[1] || next)?.split(/[,;]/)[0]!.trim();
  const plausible = name && /^[\p{Lu}\p{Lt}\p{Lo}]/u.test(name) && wordCount(name) <= MAX_AUTHOR_WORDS && !/^the\b/i.test(name) && !HEADING.test(name);
  return plausible ? name : undefined;
}

/** A word in capitals as a title in lower case prints it: "Keeper's", "Night-Time", "O'Brien", "McGregor". */
function capitalise(word: string): string {
  return word
    .toLowerCase()
    .replace(/(^|-)(\P{L}*)(\p{L})/gu, (_, before: string, marks: string, letter: string) => `${before}${marks}${letter.toUpperCase()}`)
    .replace(/^(\P{L}*)(O['’]|Mc)(\p{L})(?=\p{L})/u, (_, marks: string, prefix: string, letter: string) => `${marks}${prefix}${letter.toUpperCase()}`);
}

/** A title or name printed in capitals, in the case a books list shows; one with any lower-case letter is kept as its author wrote it. */
function sensibleCase(text: string): string {
  if (/\p{Ll}/u.test(text) || !/\p{Lu}.*\p{Lu}/u.test(text)) return text;
  const words = text.split(" ");
  return words
    .map((word, i) => {
      if (ROMAN_WORD.test(word.replace(/\P{L}/gu, ""))) return word;
      const inside = i > 0 && i < words.length - 1 && !/[:.]$/.test(words[i - 1]!);
      return inside && TITLE_SMALL_WORDS.has(word.toLowerCase()) ? word.toLowerCase() : capitalise(word);
    })
    .join(" ");
}

const tidy = (text: string) => sensibleCase(text.replace(/\s+/g, " ").trim().replace(/[\s.,;:]+$/, ""));

function named(title: string | undefined, author: string | undefined): Pick<HeaderFields, "title" | "author"> {
  return { ...(title ? { title: tidy(title) } : {}), ...(author ? { author: tidy(author) } : {}) };
}

/**
 * The title and author a plain text (one without a Gutenberg header) prints above its story: "Title:"
 * and "Author:" lines, or a title and a "by" line. A title is taken only with a "by" line or a chapter
 * heading below it: a short line above prose may as well be the story's first. Nothing when unsure,
 * so that the caller falls back to the file name rather than name a book after a line of dialogue.
 */
export function openingTitle(file: string): Pick<HeaderFields, "title" | "author"> {
  const page = titlePage(file);
  const fields = readHeaderFields(page.text);
  if (fields.title !== undefined || fields.author !== undefined) return named(fields.title, fields.author);
  const { lines } = page;
  const authors = lines.map((line, i) => authorOf(line.text, lines[i + 1]?.text));
  const by = authors.findIndex((name) => name !== undefined);
  const author = authors[by];
  // The title is right above its "by" line; without one, it is the first paragraph not about the edition.
  const editorial = new Set(lines.filter((line) => EDITORIAL.test(normalise(line.text))).map((line) => line.paragraph));
  const paragraph = by >= 0 ? lines[by - 1]?.paragraph : lines.find((line) => !editorial.has(line.paragraph))?.paragraph;
  const titleLines = lines.slice(0, by >= 0 ? by : lines.length).filter((line) => line.paragraph === paragraph);
  const title = titleLines.map((line) => line.text).join(" ");
  const trusted = titleLines.length > 0 && titleLines.every((line) => isTitleLine(line.text)) && wordCount(title) <= MAX_TITLE_WORDS && (author !== undefined || page.heading);
  return named(trusted ? title : undefined, author);
}
