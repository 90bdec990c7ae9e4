/**
 * What String.prototype.trim and `\s` count as whitespace: all the chunker ever drops or rewrites, so
 * the other characters are what a chunk and its stretch of the book share (chunk-ends.ts). Pure.
 */
export function isWhitespace(code: number): boolean {
  return (
    (code >= 0x09 && code <= 0x0d) ||
    code === 0x20 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
  );
}
