import { describe, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { NLP_MAX_BYTES, readForNlp } from "../../ingest/phases/book-nlp/windows.ts";
import { tempDirs } from "../support/temp-dirs.ts";

const freshDir = tempDirs("nlp-windows-");

/** Paragraphs "Paragraph n. …" of about 300 bytes with two-byte characters, numbered so a window's place in the book shows. */
function book(paragraphs: number): string {
  return Array.from({ length: paragraphs }, (_, n) => `Paragraph ${n}. ${"Natásha walked along the harbour wall — and looked at the sea. ".repeat(5)}`.trim()).join("\n\n");
}

async function bookFile(text: string): Promise<string> {
  const path = join(await freshDir(), "book.txt");
  await writeFile(path, text);
  return path;
}

describe("what the NLP engine reads of a book", () => {
  test("a book within the bound is read whole", async () => {
    const text = book(100);
    expect(await readForNlp(await bookFile(text), Buffer.byteLength(text))).toBe(text);
    expect(NLP_MAX_BYTES).toBeGreaterThan(3_300_000);
  });

  test("a larger book is read in windows of whole paragraphs from its beginning to its end, within the bound", async () => {
    const path = await bookFile(book(20_000));
    const maxBytes = 200_000;
    const read = await readForNlp(path, maxBytes);
    // The last window may run up to 2,000 bytes on to reach the end of the book.
    expect(Buffer.byteLength(read)).toBeLessThanOrEqual(maxBytes + 2_000 + 16 * 2);
    expect(read).not.toContain("\uFFFD");
    const paragraphs = read.split("\n\n");
    expect(paragraphs.every((p) => /^Paragraph \d+\. Natásha walked/.test(p) && p.endsWith("the sea."))).toBe(true);
    const numbers = paragraphs.map((p) => Number(/^Paragraph (\d+)/.exec(p)![1]));
    expect(numbers[0]).toBe(0);
    expect(numbers.at(-1)).toBe(19_999);
    expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    // Spread over the book, not its first pages.
    expect(numbers.filter((n) => n >= 10_000).length).toBeGreaterThan(paragraphs.length / 3);
    expect(await readForNlp(path, maxBytes)).toBe(read);
  });

  test("a book without blank lines is cut between characters, never inside one", async () => {
    const read = await readForNlp(await bookFile("Natásha — ".repeat(100_000)), 50_000);
    expect(read).not.toContain("\uFFFD");
    expect(read.length).toBeGreaterThan(10_000);
  });
});
