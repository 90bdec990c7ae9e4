import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";

/**
 * 32-bit FNV-1a over UTF-16 code units: small, fast and identical on every runtime and machine,
 * which Math.random and Bun.hash seeds are not guaranteed to be. Used wherever a stable choice must
 * follow from a text alone (a character's color, the offline model's replies and embeddings).
 */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** Hex SHA-256 of a file's bytes: what identifies a book file ingested twice (book_sources). */
export async function sha256OfFile(path: string): Promise<string> {
  return createHash("sha256").update(await readFile(path)).digest("hex");
}
