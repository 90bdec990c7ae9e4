import { createBookShelf, writeFileAtomic, type BookShelf } from "../embedded-store.ts";
import { DEFAULT_SEARCH_LIMIT, type ChunkHit, type SearchOptions } from "../search.ts";
import type { VectorIndex, VectorPoint } from "./index.ts";

/**
 * Embedded vector index: exact cosine search over one contiguous Float32Array per book.
 *
 * Vectors are normalised once at upsert so a search is one dot product per chunk, and a bounded
 * min-heap keeps the best `limit` hits without sorting every score.
 *
 * File `{dir}/{bookId}.vec`, little-endian, rewritten whole (temp file, fsync, rename) before each
 * upsert resolves, so a point the caller was told is stored survives a crash and a crash mid-write
 * leaves the previous version:
 *   u32 magic "BVX1" · u32 dimension · u32 count · u32 byte length of texts
 *   i32[count] chunk indexes · f32[count × dimension] unit vectors · UTF-8 JSON array of texts
 */

export const VECTOR_FILE_EXTENSION = ".vec";
const MAGIC = 0x31585642; // "BVX1" read as a little-endian u32
const HEADER_BYTES = 16;
const MAX_CHUNK_INDEX = 0x7fffffff;

export class VectorDimensionError extends Error {
  constructor(
    readonly bookId: string,
    readonly expected: number,
    readonly actual: number,
  ) {
    super(`book ${bookId} stores vectors of dimension ${expected}, got ${actual}`);
    this.name = "VectorDimensionError";
  }
}

export interface EmbeddedVectorIndexOptions {
  /** Folder holding one file per book; created on first write. */
  dir: string;
  /** Books kept in memory at once; the least recently used idle one is dropped beyond this. */
  maxOpenBooks?: number;
}

interface BookVectors {
  dimension: number;
  count: number;
  /** chunk_index per slot; capacity may exceed count. */
  chunkIndexes: Int32Array;
  /** Unit vectors, slot-major; capacity × dimension. */
  vectors: Float32Array;
  texts: string[];
  slotOf: Map<number, number>;
}

function decode(bytes: Buffer, bookId: string): BookVectors {
  const corrupt = (why: string) => new Error(`vector file of book ${bookId} is corrupt: ${why}`);
  if (bytes.byteLength < HEADER_BYTES) throw corrupt("too short");
  // A fresh copy gives 4-byte alignment for the typed-array views below.
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const header = new DataView(buffer, 0, HEADER_BYTES);
  if (header.getUint32(0, true) !== MAGIC) throw corrupt("bad magic");
  const dimension = header.getUint32(4, true);
  const count = header.getUint32(8, true);
  const textBytes = header.getUint32(12, true);
  const vectorsAt = HEADER_BYTES + count * 4;
  const textsAt = vectorsAt + count * dimension * 4;
  if (textsAt + textBytes !== bytes.byteLength) throw corrupt("length does not match its header");
  const chunkIndexes = new Int32Array(buffer, HEADER_BYTES, count);
  const vectors = new Float32Array(buffer, vectorsAt, count * dimension);
  const texts: unknown = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, textsAt, textBytes)));
  if (!Array.isArray(texts) || texts.length !== count) throw corrupt("text table does not match its header");
  const slotOf = new Map<number, number>();
  for (let slot = 0; slot < count; slot++) slotOf.set(chunkIndexes[slot]!, slot);
  return { dimension, count, chunkIndexes, vectors, texts: texts as string[], slotOf };
}

function encode(book: BookVectors): ArrayBufferView[] {
  const texts = new TextEncoder().encode(JSON.stringify(book.texts));
  const header = new DataView(new ArrayBuffer(HEADER_BYTES));
  header.setUint32(0, MAGIC, true);
  header.setUint32(4, book.dimension, true);
  header.setUint32(8, book.count, true);
  header.setUint32(12, texts.byteLength, true);
  return [header, book.chunkIndexes.subarray(0, book.count), book.vectors.subarray(0, book.count * book.dimension), texts];
}

function emptyBook(dimension: number): BookVectors {
  return { dimension, count: 0, chunkIndexes: new Int32Array(0), vectors: new Float32Array(0), texts: [], slotOf: new Map() };
}

function ensureCapacity(book: BookVectors, needed: number): void {
  const capacity = book.chunkIndexes.length;
  if (needed <= capacity) return;
  const grown = Math.max(needed, capacity * 2, 64);
  const chunkIndexes = new Int32Array(grown);
  chunkIndexes.set(book.chunkIndexes.subarray(0, book.count));
  const vectors = new Float32Array(grown * book.dimension);
  vectors.set(book.vectors.subarray(0, book.count * book.dimension));
  book.chunkIndexes = chunkIndexes;
  book.vectors = vectors;
}

function norm(vector: readonly number[]): number {
  let sum = 0;
  for (let i = 0; i < vector.length; i++) sum += vector[i]! * vector[i]!;
  return Math.sqrt(sum);
}

function validate(bookId: string, dimension: number, points: readonly VectorPoint[]): void {
  for (const point of points) {
    if (!Number.isInteger(point.chunkIndex) || point.chunkIndex < 0 || point.chunkIndex > MAX_CHUNK_INDEX) {
      throw new RangeError(`chunk index must be an integer 0..${MAX_CHUNK_INDEX}, got ${point.chunkIndex}`);
    }
    if (point.vector.length !== dimension) throw new VectorDimensionError(bookId, dimension, point.vector.length);
    if (!Number.isFinite(norm(point.vector))) throw new RangeError(`vector of chunk ${point.chunkIndex} has a non-finite value`);
  }
}

/** Writes `vector` scaled to unit length at `offset`; a zero vector stays zero and matches nothing. */
function writeUnit(target: Float32Array, offset: number, vector: readonly number[]): void {
  const length = norm(vector);
  const scale = length === 0 ? 0 : 1 / length;
  for (let i = 0; i < vector.length; i++) target[offset + i] = vector[i]! * scale;
}

function dot(vectors: Float32Array, offset: number, query: Float32Array, dimension: number): number {
  // Four independent sums let the CPU overlap the multiply-adds.
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  for (const end = dimension - 3; i < end; i += 4) {
    s0 += vectors[offset + i]! * query[i]!;
    s1 += vectors[offset + i + 1]! * query[i + 1]!;
    s2 += vectors[offset + i + 2]! * query[i + 2]!;
    s3 += vectors[offset + i + 3]! * query[i + 3]!;
  }
  for (; i < dimension; i++) s0 += vectors[offset + i]! * query[i]!;
  return s0 + s1 + s2 + s3;
}

/**
 * The best `k` slots by score (ties: lower chunk_index first), kept in a min-heap whose root is the
 * weakest hit so far; a new score only costs a comparison unless it beats that root.
 */
function topK(book: BookVectors, query: Float32Array, k: number, maxChunkIndex: number): { slot: number; score: number }[] {
  const { count, dimension, vectors, chunkIndexes } = book;
  const scores = new Float64Array(k);
  const slots = new Int32Array(k);
  let size = 0;
  // true when (a) ranks below (b)
  const worse = (scoreA: number, slotA: number, scoreB: number, slotB: number) =>
    scoreA < scoreB || (scoreA === scoreB && chunkIndexes[slotA]! > chunkIndexes[slotB]!);
  const siftDown = (from: number) => {
    let i = from;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= size) return;
      const right = left + 1;
      const child = right < size && worse(scores[right]!, slots[right]!, scores[left]!, slots[left]!) ? right : left;
      if (!worse(scores[child]!, slots[child]!, scores[i]!, slots[i]!)) return;
      [scores[i], scores[child]] = [scores[child]!, scores[i]!];
      [slots[i], slots[child]] = [slots[child]!, slots[i]!];
      i = child;
    }
  };
  for (let slot = 0; slot < count; slot++) {
    if (chunkIndexes[slot]! > maxChunkIndex) continue;
    const score = dot(vectors, slot * dimension, query, dimension);
    if (size < k) {
      let i = size++;
      scores[i] = score;
      slots[i] = slot;
      while (i > 0) {
        const parent = (i - 1) >> 1;
        if (!worse(scores[i]!, slots[i]!, scores[parent]!, slots[parent]!)) break;
        [scores[i], scores[parent]] = [scores[parent]!, scores[i]!];
        [slots[i], slots[parent]] = [slots[parent]!, slots[i]!];
        i = parent;
      }
    } else if (worse(scores[0]!, slots[0]!, score, slot)) {
      scores[0] = score;
      slots[0] = slot;
      siftDown(0);
    }
  }
  const hits = Array.from({ length: size }, (_, i) => ({ slot: slots[i]!, score: scores[i]! }));
  return hits.sort((a, b) => (worse(a.score, a.slot, b.score, b.slot) ? 1 : -1));
}

export function createEmbeddedVectorIndex(options: EmbeddedVectorIndexOptions): VectorIndex {
  const shelf: BookShelf<BookVectors> = createBookShelf({
    dir: options.dir,
    extension: VECTOR_FILE_EXTENSION,
    decode,
    maxOpenBooks: options.maxOpenBooks,
  });

  return {
    adapter: "embedded",

    async upsert(bookId, points) {
      if (points.length === 0) return;
      await shelf.exclusive(bookId, async (existing, path) => {
        const book = existing ?? emptyBook(points[0]!.vector.length);
        if (book.dimension === 0) throw new VectorDimensionError(bookId, 0, 0);
        validate(bookId, book.dimension, points);
        ensureCapacity(book, book.count + points.length);
        for (const point of points) {
          let slot = book.slotOf.get(point.chunkIndex);
          if (slot === undefined) {
            slot = book.count++;
            book.slotOf.set(point.chunkIndex, slot);
            book.chunkIndexes[slot] = point.chunkIndex;
          }
          writeUnit(book.vectors, slot * book.dimension, point.vector);
          book.texts[slot] = point.text;
        }
        await writeFileAtomic(path, encode(book));
        return { state: book, result: undefined };
      });
    },

    async search(bookId, vector, searchOptions: SearchOptions = {}): Promise<ChunkHit[]> {
      const book = await shelf.get(bookId);
      const limit = Math.floor(searchOptions.limit ?? DEFAULT_SEARCH_LIMIT);
      if (book === undefined || book.count === 0 || limit <= 0) return [];
      if (vector.length !== book.dimension) throw new VectorDimensionError(bookId, book.dimension, vector.length);
      const query = new Float32Array(book.dimension);
      writeUnit(query, 0, vector);
      const hits = topK(book, query, Math.min(limit, book.count), searchOptions.maxChunkIndex ?? Infinity);
      return hits.map(({ slot, score }) => ({ chunkIndex: book.chunkIndexes[slot]!, text: book.texts[slot]!, score }));
    },

    async count(bookId) {
      return (await shelf.get(bookId))?.count ?? 0;
    },

    deleteBook: (bookId) => shelf.remove(bookId),

    close: () => shelf.close(),
  };
}
