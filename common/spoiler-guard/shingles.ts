/**
 * The book's long word sequences as the ingestion stores them (ingest/spoiler-guard/shingles.ts) and the
 * spoiler guard on the chat's way out reads them (api/chat/spoiler-filter.ts): runs of SHINGLE_WORDS words of the book ("shingles"), each with
 * where its first occurrence ends, so a reply can be told to be quoting text the reader has not reached.
 *
 * Words are runs of letters and digits keyed by what they spell (common/text-normalise.ts: case,
 * accents, invisible characters and look-alike letters folded): punctuation, line breaks, quotes and
 * apostrophes ("Darcy's" is "darcy" "s") never tell a quotation apart from the book, and neither do
 * "ｓｔｒａｎｇｅｒ", "str\u200banger" or "strаnger" with a Cyrillic а. A shingle is keyed by two
 * independent 32-bit hashes of its words, of which 48 bits are kept: at the bound of MAX_FINGERPRINTS
 * keys a reply of 1 000 words meets a false key about once in 250 000 replies.
 *
 * The index is bounded whatever the book's size. A book of up to MAX_FINGERPRINTS shingles keeps every
 * one (a late passage is recognised on its SHINGLE_WORDS-th word). A longer book keeps a sample chosen
 * by winnowing (Schleimer, Wilkerson and Aiken, 2003): of every `window` consecutive shingles, the one
 * with the least key, with `window` the least that keeps the sample within the bound. Any run of
 * SHINGLE_WORDS + window - 1 words copied from the book holds a whole window, so holds a kept shingle:
 * a copied passage is still recognised, at most window - 1 words later. The sample depends on the
 * book's order, but the position kept for a key is the end of its first occurrence anywhere in the
 * book, kept or not, so a reply quoting what the reader has read is never taken for a late one.
 *
 * In memory: three sorted columns, the keys' high 32 bits, their next 16 bits, and the first end
 * quantised to 1/65535 of the book, rounded down, so a shingle that ends at most that far past the
 * reader's position counts as read (the guard errs towards forwarding, never towards stopping a reply
 * that quotes what the reader has read). 8 bytes per key, at most 8 MiB per book; stored as base64
 * text, which every database driver passes through unchanged.
 *
 * Pure: no I/O.
 */

import { Buffer } from "node:buffer";

export const SHINGLE_WORDS = 8;
/** The most keys a book's index holds (8 MiB in memory, 11 MB stored). */
export const MAX_FINGERPRINTS = 1 << 20;
/** Positions are stored as steps of the book's length. */
export const POSITION_STEPS = 65535;
/** 1: every shingle, a 32-bit second hash (rows written before the bound; read, never written). 2: the bounded form. */
const FORMAT_VERSION = 2;
const HEADER_BYTES = 8;
const ENTRY_BYTES: Record<number, number> = { 1: 10, 2: 8 };

/** Two independent 32-bit hashes of words joined by single spaces. */
export function shingleKey(words: readonly string[]): [number, number] {
  return keyOf(words, 0, words.length);
}

/** shingleKey of words[from] to words[from + n - 1], without copying them out. */
export function keyOf(words: readonly string[], from: number, n: number): [number, number] {
  let fnv = 0x811c9dc5;
  let mix = 0x9e3779b9;
  for (let w = from; w < from + n; w++) {
    const word = words[w]!;
    for (let i = -1; i < word.length; i++) {
      const c = i < 0 ? (w === from ? 0 : 32) : word.charCodeAt(i);
      fnv = Math.imul(fnv ^ c, 0x01000193);
      mix = Math.imul(mix ^ c, 0x5bd1e995);
      mix ^= mix >>> 15;
    }
  }
  return [fnv >>> 0, mix >>> 0];
}

export interface ShingleIndex {
  /** Keys held. */
  size: number;
  /** Of how many consecutive shingles of the book one at least is held (1: all of them). */
  window: number;
  /** Where the shingle's first occurrence in the book ends (0–1), or null when the index does not hold it. */
  firstEnd(key: readonly [number, number]): number | null;
  /** The index as stored. */
  encode(): string;
  /** Bytes held in memory. */
  bytes: number;
}

/** The index over sorted keys (hi, lo) with the end of each one's first occurrence (at). */
export function indexOf(hi: Uint32Array, lo: Uint16Array, at: Uint16Array, window: number): ShingleIndex {
  return {
    size: hi.length,
    window,
    bytes: hi.byteLength + lo.byteLength + at.byteLength,
    firstEnd([h, fullLow]) {
      const l = fullLow >>> 16;
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
      const out = new Uint8Array(HEADER_BYTES + hi.length * ENTRY_BYTES[FORMAT_VERSION]!);
      const view = new DataView(out.buffer);
      view.setUint32(0, FORMAT_VERSION, true);
      view.setUint32(4, hi.length, true);
      let offset = HEADER_BYTES;
      for (let i = 0; i < hi.length; i++, offset += 4) view.setUint32(offset, hi[i]!, true);
      for (let i = 0; i < lo.length; i++, offset += 2) view.setUint16(offset, lo[i]!, true);
      for (let i = 0; i < at.length; i++, offset += 2) view.setUint16(offset, at[i]!, true);
      // The window is not stored: reading an index needs only its keys.
      return Buffer.from(out).toString("base64");
    },
  };
}

/** The stored index's format and number of keys; throws on one of another format. */
function header(bytes: Uint8Array): { version: number; count: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = bytes.byteLength >= HEADER_BYTES ? view.getUint32(0, true) : 0;
  if (!ENTRY_BYTES[version]) throw new Error("not a shingle index of a known format");
  return { version, count: view.getUint32(4, true) };
}

/** The most characters a stored index within MAX_FINGERPRINTS can have, in either format. */
export const MAX_STORED_CHARS = Math.ceil((HEADER_BYTES + MAX_FINGERPRINTS * Math.max(...Object.values(ENTRY_BYTES))) / 3) * 4;

/** The index from its stored form; throws on one of another format or size, or beyond MAX_FINGERPRINTS. */
export function decodeShingleIndex(encoded: string): ShingleIndex {
  const bytes = Buffer.from(encoded, "base64");
  const { version, count: n } = header(bytes);
  if (n > MAX_FINGERPRINTS) throw new Error(`shingle index of ${n} keys, beyond the bound of ${MAX_FINGERPRINTS}: ingest the book again`);
  const entry = ENTRY_BYTES[version]!;
  if (bytes.byteLength !== HEADER_BYTES + n * entry) throw new Error("shingle index of the wrong size");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const hi = new Uint32Array(n);
  const lo = new Uint16Array(n);
  const at = new Uint16Array(n);
  let offset = HEADER_BYTES;
  for (let i = 0; i < n; i++, offset += 4) hi[i] = view.getUint32(offset, true);
  // Format 1 kept the whole second hash: its high 16 bits are the key's, and its order is theirs.
  for (let i = 0; i < n; i++, offset += entry - 6) lo[i] = version === 1 ? view.getUint32(offset, true) >>> 16 : view.getUint16(offset, true);
  for (let i = 0; i < n; i++, offset += 2) at[i] = view.getUint16(offset, true);
  return indexOf(hi, lo, at, 1);
}
