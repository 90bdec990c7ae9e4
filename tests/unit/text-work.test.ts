import { describe, expect, mock, test } from "bun:test";
import * as o200k from "gpt-tokenizer/encoding/o200k_base";
import { O200K_TOKEN_SPLIT_REGEX } from "gpt-tokenizer/encodingParams/constants";
import { HOSTILE_KINDS, hostileBook } from "../support/hostile-text.ts";

/**
 * The chunker's work on hostile text, counted rather than timed. The tokeniser's byte-pair merge
 * costs the square of each piece it cannot split (a run of letters, punctuation or whitespace), so
 * its work is counted here as the sum of the squared lengths of the pieces of every text it is given,
 * cut by its own split pattern; the real tokeniser still answers.
 */
let work = 0;
const countTokens = o200k.countTokens;
mock.module("gpt-tokenizer/encoding/o200k_base", () => ({
  ...o200k,
  countTokens: (text: string, options: Parameters<typeof countTokens>[1]) => {
    for (const [piece] of text.matchAll(O200K_TOKEN_SPLIT_REGEX)) work += piece.length ** 2;
    return countTokens(text, options);
  },
}));
const { chunkTextToArray } = await import("../../common/chunking.ts");

function chunkingWork(text: string): number {
  work = 0;
  chunkTextToArray(text);
  return work;
}

/** Work per character of the book, at most: a few counts of pieces of at most 1,024 characters (MAX_RUN_CHARS). */
const MAX_WORK_PER_CHAR = 8 * 1024;
const N = 20_000;

describe("chunking hostile text", () => {
  test.each(HOSTILE_KINDS)("a run of %s costs the tokeniser work linear in its length, a bounded amount per character", (kind) => {
    const small = chunkingWork(hostileBook(kind, N));
    const large = chunkingWork(hostileBook(kind, 2 * N));
    // Before: 40,000 spaces went to the tokeniser as one piece, counted some twenty times (9.5 s).
    expect(large / (2 * N)).toBeLessThanOrEqual(MAX_WORK_PER_CHAR);
    expect(large).toBeLessThanOrEqual(2.2 * Math.max(small, N));
  });
});
