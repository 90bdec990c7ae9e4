import { isWhitespace } from "./whitespace.ts";

/**
 * Where each chunk of `text` ends in it, as a position (a fraction of text.length), for chunks fed
 * in order. A chunk differs from its stretch of the book only in whitespace (paragraph breaks made
 * "\n\n", CRLF made LF, the ends trimmed), so its end is found exactly by counting the characters
 * that are not whitespace: the chunk's count of them, taken from the text after the previous chunk.
 */
export function chunkEndLocator(text: string): (chunk: string) => number {
  let cursor = 0;
  return (chunk) => {
    let wanted = 0;
    for (let i = 0; i < chunk.length; i++) if (!isWhitespace(chunk.charCodeAt(i))) wanted++;
    while (wanted > 0 && cursor < text.length) {
      if (!isWhitespace(text.charCodeAt(cursor))) wanted--;
      cursor++;
    }
    return text.length === 0 ? 1 : cursor / text.length;
  };
}
