/**
 * The book's long word sequences, for the spoiler guard on the chat's way out
 * (common/prompt/spoiler-guard.ts): for every run of SHINGLE_WORDS words of the book, where its first
 * occurrence ends, so a reply can be told to be quoting text the reader has not reached.
 *
 * Words are runs of letters and digits keyed by what they spell (common/text-normalise.ts: case,
 * accents, invisible characters and look-alike letters folded): punctuation, line breaks, quotes and
 * apostrophes ("Darcy's" is "darcy" "s") never tell a quotation apart from the book, and neither do
 * "ｓｔｒａｎｇｅｒ", "str\u200banger" or "strаnger" with a Cyrillic а. A shingle is keyed by two
 * independent 32-bit hashes of its words (64 bits: at 500 000 shingles a reply of 1 000 words meets a
 * false key about once in 10^10 replies; one 32-bit hash would meet one in about 10).
 *
 * The index is three sorted columns: hash high words, low words, and the first end position
 * quantised to 1/65535 of the book, rounded down, so a shingle that ends at most that far past the
 * reader's position counts as read (the guard errs towards forwarding, never towards stopping a reply
 * that quotes what the reader has read). 10 bytes per distinct shingle; stored as base64 text, which
 * every database driver passes through unchanged.
 *
 * Pure: no I/O.
 */

import { Buffer } from "node:buffer";
import { eachWord } from "../text-normalise.ts";

export const SHINGLE_WORDS = 8;
const POSITION_STEPS = 65535;
const FORMAT_VERSION = 1;
const HEADER_BYTES = 8;

/** Two independent 32-bit hashes of words joined by single spaces. */
export function shingleKey(words: readonly string[]): [number, number] {
  let fnv = 0x811c9dc5;
  let mix = 0x9e3779b9;
  for (let w = 0; w < words.length; w++) {
    const word = words[w]!;
    for (let i = -1; i < word.length; i++) {
      const c = i < 0 ? (w === 0 ? 0 : 32) : word.charCodeAt(i);
      fnv = Math.imul(fnv ^ c, 0x01000193);
      mix = Math.imul(mix ^ c, 0x5bd1e995);
      mix ^= mix >>> 15;
    }
  }
  return [fnv >>> 0, mix >>> 0];
}

export interface ShingleIndex {
  /** Distinct shingles. */
  size: number;
  /** Where the shingle's first occurrence in the book ends (0–1), or null when the book does not hold it. */
  firstEnd(key: readonly [number, number]): number | null;
  /** The index as stored. */
  encode(): string;
  /** Bytes held in memory. */
  bytes: number;
}

function indexOf(hi: Uint32Array, lo: Uint32Array, at: Uint16Array): ShingleIndex {
  return {
    size: hi.length,
    bytes: hi.byteLength + lo.byteLength + at.byteLength,
    firstEnd([h, l]) {
      let low = 0;
      let high = hi.length - 1;
      while (low <= high) {
        const mid = (low + high) >>> 1;
        const v = hi[mid]!;
        if (v < h || (v === h && lo[mid]! < l)) low = mid + 1;
        else if (v > h || lo[mid]! > l) high = mid - 1;
        else return at[mid]! / POSITION_STEPS;
      }
      return null;
    },
    encode() {
      const out = new Uint8Array(HEADER_BYTES + hi.byteLength + lo.byteLength + at.byteLength);
      const view = new DataView(out.buffer);
      view.setUint32(0, FORMAT_VERSION, true);
      view.setUint32(4, hi.length, true);
      let offset = HEADER_BYTES;
      for (let i = 0; i < hi.length; i++, offset += 4) view.setUint32(offset, hi[i]!, true);
      for (let i = 0; i < lo.length; i++, offset += 4) view.setUint32(offset, lo[i]!, true);
      for (let i = 0; i < at.length; i++, offset += 2) view.setUint16(offset, at[i]!, true);
      return Buffer.from(out).toString("base64");
    },
  };
}

/** Every shingle of the text with the end of its first occurrence. */
export function buildShingleIndex(text: string, words = SHINGLE_WORDS): ShingleIndex {
  const found: string[] = [];
  const ends: number[] = [];
  eachWord(text, (key, _, __, end) => {
    found.push(key);
    ends.push(end);
  });
  const count = Math.max(0, found.length - words + 1);
  const hiAll = new Uint32Array(count);
  const loAll = new Uint32Array(count);
  for (let i = 0; i < count; i++) [hiAll[i], loAll[i]] = shingleKey(found.slice(i, i + words));
  // Sorted by key, then by position, so the first of equal keys is the earliest occurrence.
  const order = Array.from({ length: count }, (_, i) => i).sort((a, b) => hiAll[a]! - hiAll[b]! || loAll[a]! - loAll[b]! || a - b);
  const hi: number[] = [];
  const lo: number[] = [];
  const at: number[] = [];
  for (const i of order) {
    if (hi.length > 0 && hi.at(-1) === hiAll[i] && lo.at(-1) === loAll[i]) continue;
    hi.push(hiAll[i]!);
    lo.push(loAll[i]!);
    at.push(Math.floor((ends[i + words - 1]! / text.length) * POSITION_STEPS));
  }
  return indexOf(Uint32Array.from(hi), Uint32Array.from(lo), Uint16Array.from(at));
}

/** The index from its stored form; throws on one of another format or size. */
export function decodeShingleIndex(encoded: string): ShingleIndex {
  const bytes = Buffer.from(encoded, "base64");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength < HEADER_BYTES || view.getUint32(0, true) !== FORMAT_VERSION) throw new Error("not a shingle index of this format");
  const n = view.getUint32(4, true);
  if (bytes.byteLength !== HEADER_BYTES + n * 10) throw new Error("shingle index of the wrong size");
  const hi = new Uint32Array(n);
  const lo = new Uint32Array(n);
  const at = new Uint16Array(n);
  let offset = HEADER_BYTES;
  for (let i = 0; i < n; i++, offset += 4) hi[i] = view.getUint32(offset, true);
  for (let i = 0; i < n; i++, offset += 4) lo[i] = view.getUint32(offset, true);
  for (let i = 0; i < n; i++, offset += 2) at[i] = view.getUint16(offset, true);
  return indexOf(hi, lo, at);
}
