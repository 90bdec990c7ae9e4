import { eachWord } from "../../common/text-normalise.ts";
import { indexOf, keyOf, MAX_FINGERPRINTS, POSITION_STEPS, SHINGLE_WORDS, type ShingleIndex } from "../../common/spoiler-guard/shingles.ts";

/**
 * Builds a book's shingle index at ingestion (the format, its bound and why: common/spoiler-guard/shingles.ts):
 * every shingle of the book with where its first occurrence ends, thinned by winnowing when the book
 * has more than MAX_FINGERPRINTS.
 */

/** The column with twice the room, its values kept. */
function grown<T extends Uint32Array | Uint16Array>(column: T, make: (n: number) => T): T {
  const bigger = make(column.length * 2);
  bigger.set(column);
  return bigger;
}

/**
 * The shingles that winnowing with `window` keeps, marked 1: in every window of consecutive shingles,
 * the rightmost of the least keys.
 */
function winnow(hi: Uint32Array, lo: Uint16Array, window: number): Uint8Array {
  const count = hi.length;
  const kept = new Uint8Array(count);
  if (window <= 1) return kept.fill(1);
  const less = (a: number, b: number) => hi[a]! < hi[b]! || (hi[a] === hi[b] && lo[a]! <= lo[b]!);
  let min = -1;
  for (let end = Math.min(window, count) - 1; end < count; end++) {
    const start = Math.max(0, end - window + 1);
    if (min < start) {
      // The least key left the window: look through the whole window again (expected once in `window` steps).
      min = start;
      for (let i = start + 1; i <= end; i++) if (less(i, min)) min = i;
    } else if (less(end, min)) min = end;
    kept[min] = 1;
  }
  return kept;
}

export interface ShingleIndexOptions {
  words?: number;
  /** The most keys to hold (MAX_FINGERPRINTS). */
  maxFingerprints?: number;
}

/** The book's shingles with the end of their first occurrence, within the bound (see the file's comment). */
export function buildShingleIndex(text: string, options: ShingleIndexOptions = {}): ShingleIndex {
  const n = options.words ?? SHINGLE_WORDS;
  const cap = options.maxFingerprints ?? MAX_FINGERPRINTS;
  // Every shingle of the book in order: its key and where it ends (8 bytes each).
  let hi = new Uint32Array(1024);
  let lo = new Uint16Array(1024);
  let at = new Uint16Array(1024);
  let count = 0;
  // The last words, kept in a buffer moved down only once in a while.
  const recent: string[] = [];
  let from = 0;
  const scale = POSITION_STEPS / Math.max(1, text.length);
  eachWord(text, (key, _, __, end) => {
    recent.push(key);
    if (recent.length - from < n) return;
    if (recent.length - from > n) from++;
    if (from > 1024) {
      recent.splice(0, from);
      from = 0;
    }
    const [h, l] = keyOf(recent, from, n);
    if (count === hi.length) {
      hi = grown(hi, (size) => new Uint32Array(size));
      lo = grown(lo, (size) => new Uint16Array(size));
      at = grown(at, (size) => new Uint16Array(size));
    }
    hi[count] = h;
    lo[count] = l >>> 16;
    at[count] = Math.floor(end * scale);
    count++;
  });
  hi = hi.subarray(0, count);
  lo = lo.subarray(0, count);
  at = at.subarray(0, count);

  // Winnowing keeps about 2 / (window + 1) of the shingles; the window grows until the distinct keys kept fit.
  let window = count <= cap ? 1 : Math.ceil((2 * count) / cap) - 1;
  for (;;) {
    const kept = distinctFirst(hi, lo, at, winnow(hi, lo, window));
    if (kept.hi.length <= cap) return indexOf(kept.hi, kept.lo, kept.at, window);
    window = Math.max(window + 1, Math.ceil(window * 1.25));
  }
}

/** One pass of a stable radix sort: `order` by the 16-bit digit of `source` at `shift`, into `next`. */
function radixPass(order: Uint32Array, next: Uint32Array, source: Uint32Array | Uint16Array, shift: number, starts: Uint32Array): void {
  starts.fill(0);
  for (let i = 0; i < order.length; i++) starts[((source[i]! >>> shift) & 0xffff) + 1]!++;
  for (let d = 1; d < starts.length; d++) starts[d]! += starts[d - 1]!;
  for (let k = 0; k < order.length; k++) {
    const i = order[k]!;
    next[starts[(source[i]! >>> shift) & 0xffff]!++] = i;
  }
}

/** The shingles' indexes ordered by key, those of equal keys in book order (least significant 16-bit digit first). */
function byKey(hi: Uint32Array, lo: Uint16Array): Uint32Array {
  const order = new Uint32Array(hi.length);
  const next = new Uint32Array(hi.length);
  for (let i = 0; i < order.length; i++) order[i] = i;
  const starts = new Uint32Array(65537);
  radixPass(order, next, lo, 0, starts);
  radixPass(next, order, hi, 0, starts);
  radixPass(order, next, hi, 16, starts);
  return next;
}

/**
 * The distinct keys of the shingles marked in `kept`, sorted, each with the end of its first
 * occurrence among ALL the book's shingles (an early occurrence may have been left out by winnowing).
 */
function distinctFirst(hi: Uint32Array, lo: Uint16Array, at: Uint16Array, kept: Uint8Array) {
  const order = byKey(hi, lo);
  let most = 0;
  for (let i = 0; i < kept.length; i++) most += kept[i]!;
  const outHi = new Uint32Array(most);
  const outLo = new Uint16Array(most);
  const outAt = new Uint16Array(most);
  let k = 0;
  for (let start = 0; start < order.length; ) {
    const first = order[start]!;
    let end = start;
    let held = false;
    for (; end < order.length && hi[order[end]!] === hi[first] && lo[order[end]!] === lo[first]; end++) if (kept[order[end]!] === 1) held = true;
    if (held) {
      outHi[k] = hi[first]!;
      outLo[k] = lo[first]!;
      outAt[k] = at[first]!;
      k++;
    }
    start = end;
  }
  return { hi: outHi.slice(0, k), lo: outLo.slice(0, k), at: outAt.slice(0, k) };
}

