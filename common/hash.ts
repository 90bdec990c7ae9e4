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

/**
 * Hex SHA-256 of bytes, or of a text's UTF-8. What identifies a book ingested twice (book_sources)
 * is its decoded text's: the same text in UTF-16, with CRLF lines or a byte order mark is one book.
 */
export function sha256(content: string | Uint8Array): string {
  return createHash("sha256").update(content).digest("hex");
}

/** Hex SHA-256 of a file's bytes: the sample book's source, a UTF-8 file with LF lines, whose bytes are its text. */
export async function sha256OfFile(path: string): Promise<string> {
  return sha256(await readFile(path));
}
