import { seededRandom } from "./seeded-random.ts";

/**
 * Hostile book texts whose size is chosen: long runs of whitespace and single "words" with no space
 * in them, each inside a little prose, so every step of ingestion (which refuses a file with no prose)
 * reads them. Shared by the tests that count each text step's work and by the bench (bench/hostile-text.ts).
 */

export type HostileKind = "spaces" | "tabs" | "nbsp" | "whitespace mix" | "letters" | "one letter" | "punctuation" | "han";

function randomRun(n: number, seed: number, alphabet: (r: number) => string): string {
  const random = seededRandom(seed);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(alphabet(random()));
  return parts.join("");
}

/** The run alone, `n` characters of it. */
export function hostileRun(kind: HostileKind, n: number): string {
  switch (kind) {
    case "spaces":
      return " ".repeat(n);
    case "tabs":
      return "\t".repeat(n);
    case "nbsp":
      return "\u00a0".repeat(n);
    case "whitespace mix":
      return randomRun(n, 1, (r) => (r < 0.4 ? " " : r < 0.7 ? "\t" : "\u00a0"));
    case "letters":
      return randomRun(n, 2, (r) => String.fromCharCode(97 + Math.floor(r * 26)));
    case "one letter":
      return "a".repeat(n);
    case "punctuation":
      return randomRun(n, 3, (r) => "!?.-*="[Math.floor(r * 6)]!);
    case "han":
      return randomRun(n, 4, (r) => String.fromCharCode(0x4e00 + Math.floor(r * 20_000)));
  }
}

export const HOSTILE_KINDS: readonly HostileKind[] = ["spaces", "tabs", "nbsp", "whitespace mix", "letters", "one letter", "punctuation", "han"];

const PROSE = "“You are late,” said Margaret Hale to Mr. Thornton. Margaret Hale looked at the clock.\n\n";

/** A short story with the run in the middle of one of its sentences. */
export function hostileBook(kind: HostileKind, n: number): string {
  return `${PROSE.repeat(4)}He said${hostileRun(kind, n)}nothing more.\n\n${PROSE.repeat(4)}`;
}

/** The same, wrapped as a Project Gutenberg file, so that stripping has a header and a footer to find. */
export function hostileGutenbergFile(kind: HostileKind, n: number): string {
  return [
    "The Project Gutenberg eBook of North and South",
    "",
    "Title: North and South",
    "Author: Elizabeth Gaskell",
    "",
    "*** START OF THE PROJECT GUTENBERG EBOOK NORTH AND SOUTH ***",
    "",
    hostileBook(kind, n),
    "*** END OF THE PROJECT GUTENBERG EBOOK NORTH AND SOUTH ***",
    "",
    "The licence.",
    "",
  ].join("\n");
}
