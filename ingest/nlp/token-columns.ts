import type { ParsedBookNlp } from "./booknlp-files.ts";

/**
 * A book's tokens as columns indexed by token id: the .tokens file's rows, or the native engine's
 * own arrays (which saves rendering and re-parsing a file of a row per token).
 */
export interface TokenColumns {
  paragraph: ArrayLike<number>;
  word: ArrayLike<string>;
  start: ArrayLike<number>;
  end: ArrayLike<number>;
  /** BookNLP counts offsets in code points, the native engine in UTF-16 units (JavaScript's). */
  offsets: "codepoints" | "utf16";
}

/** Columns from .tokens rows, each row at its token id. */
export function tokenColumns(parsed: ParsedBookNlp): TokenColumns {
  const size = parsed.tokens.reduce((max, t) => Math.max(max, t.token + 1), 0);
  const columns = {
    paragraph: new Int32Array(size).fill(-1),
    word: new Array<string>(size).fill(""),
    start: new Int32Array(size).fill(-1),
    end: new Int32Array(size).fill(-1),
    offsets: "codepoints" as const,
  };
  for (const t of parsed.tokens) {
    if (t.token < 0) continue;
    columns.paragraph[t.token] = t.paragraph;
    columns.word[t.token] = t.word;
    columns.start[t.token] = t.start;
    columns.end[t.token] = t.end;
  }
  return columns;
}
