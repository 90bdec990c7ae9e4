import { open, readFile } from "node:fs/promises";

/**
 * What the native NLP engine reads of a very large book. Its analysis holds about 45 bytes per
 * character of the text it reads (2.5 GB for a 50 MB book), far more than the rest of an ingestion,
 * so past NLP_MAX_BYTES it reads evenly spaced windows of the book totalling about that many bytes
 * instead of the whole, straight from the file (the book is never decoded whole a second time): a
 * novel's characters recur throughout, so windows from its beginning to its end find the same cast.
 * Every novel of ordinary length (War and Peace is 3.3 MB) is read whole.
 */

export const NLP_MAX_BYTES = 4_000_000;
const WINDOWS = 16;
/** How far past its even position a window looks for a paragraph break to start and end on. */
const PARAGRAPH_SEARCH_BYTES = 2_000;
const NEWLINE = 0x0a;

export async function readForNlp(path: string, maxBytes: number = NLP_MAX_BYTES): Promise<string> {
  const file = await open(path, "r");
  try {
    const { size } = await file.stat();
    if (size <= maxBytes) return await readFile(file, "utf8");
    const windowBytes = Math.floor(maxBytes / WINDOWS);
    const slack = Math.min(PARAGRAPH_SEARCH_BYTES, windowBytes);
    const decoder = new TextDecoder();
    const windows: string[] = [];
    for (let i = 0; i < WINDOWS; i++) {
      // Each window but the first may move up to `slack` bytes on to start on a paragraph.
      const at = Math.floor((i * (size - windowBytes - slack)) / (WINDOWS - 1));
      const bytes = new Uint8Array(windowBytes + slack);
      const { bytesRead } = await file.read(bytes, 0, bytes.length, at);
      const read = bytes.subarray(0, bytesRead);
      const start = i === 0 ? 0 : paragraphStart(read, slack);
      // The last window runs to the end of the book.
      const end = at + read.length >= size ? read.length : paragraphEnd(read, start, start + windowBytes);
      windows.push(decoder.decode(read.subarray(start, end)));
    }
    return windows.join("\n\n");
  } finally {
    await file.close();
  }
}

/** Just after the first blank line within `slack` bytes, else the first character boundary. */
function paragraphStart(bytes: Uint8Array, slack: number): number {
  for (let i = 1; i < slack; i++) if (bytes[i - 1] === NEWLINE && bytes[i] === NEWLINE) return i + 1;
  let at = 0;
  while (at < bytes.length && isContinuation(bytes[at]!)) at++;
  return at;
}

/** At the last blank line before `end` within PARAGRAPH_SEARCH_BYTES, else a character boundary. */
function paragraphEnd(bytes: Uint8Array, start: number, end: number): number {
  for (let i = end - 1; i > start && end - i < PARAGRAPH_SEARCH_BYTES; i--) if (bytes[i - 1] === NEWLINE && bytes[i] === NEWLINE) return i - 1;
  let at = end;
  while (at > start && isContinuation(bytes[at]!)) at--;
  return at;
}

/** A UTF-8 byte that continues a character: cutting before it would split the character. */
function isContinuation(byte: number): boolean {
  return (byte & 0xc0) === 0x80;
}
