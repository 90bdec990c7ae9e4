/**
 * A book file's bytes to text, or the reason they are not text.
 *
 * Readers have books in the encodings their tools wrote: UTF-8 with or without a byte order mark,
 * UTF-16 with or without one, and Windows-1252 (Project Gutenberg's older files, Latin-1 editors).
 * The encoding is decided by the evidence of the whole file, not by its first fault: UTF-8 when its
 * valid multi-byte sequences outnumber its invalid ones (a stray bad byte in a UTF-8 book is
 * replaced by U+FFFD, it does not turn every accent and curly quote into "â€"), Windows-1252 when
 * most of its high bytes are not UTF-8. Windows-1252 maps every byte to a character (Latin-1's
 * printable range is the same), so only the share of control characters tells such a file from a
 * binary one. Files readers mistake for text (a PDF, an EPUB or another ZIP, an image) are named by
 * their signature, so the refusal says what the file is.
 *
 * Whether the decoded text is language at all (a KOI8-R book read as Windows-1252 is valid
 * Windows-1252) is the ingest's question: see ingest/book/text-language.ts.
 *
 * Pure: no I/O.
 */

export type TextEncoding = "utf-8" | "utf-16le" | "utf-16be" | "windows-1252";

export type DecodedText =
  | { ok: true; text: string; encoding: TextEncoding; /** Invalid sequences replaced by U+FFFD. */ replaced: number }
  | { ok: false; reason: string };

export interface DecodeOptions {
  /** The bytes are the beginning of a longer file: a character cut at their end is not an error. */
  partial?: boolean;
  /** Refuse text with more than this share of control characters (DEFAULT_MAX_CONTROL_SHARE). */
  maxControlShare?: number;
}

/**
 * Tabs, line and page breaks aside, prose has next to no control characters; a binary file read as
 * Windows-1252 has about one in eight (a PDF's compressed streams, a JPEG's data).
 */
export const DEFAULT_MAX_CONTROL_SHARE = 0.01;
/**
 * A stray bad byte is one character in hundreds of thousands; when one character in a hundred cannot
 * be decoded in the encoding the evidence chose, the file is damaged or in none of these encodings.
 */
export const MAX_REPLACED_SHARE = 0.01;
/**
 * UTF-16 without a byte order mark: text has NUL bytes on one side of its byte pairs only (the high
 * byte of ASCII, of spaces and punctuation in any script), a binary file on both. At least this share
 * of the pairs has a NUL on that side, and at most UTF16_OTHER_SIDE_SHARE of them on the other.
 */
const UTF16_NUL_SIDE_SHARE = 0.05;
const UTF16_OTHER_SIDE_SHARE = 0.001;
/** Fewer byte pairs than this are too few to tell UTF-16 by. */
const UTF16_MIN_PAIRS = 64;

/** File types readers rename to .txt, by the bytes they start with. */
const SIGNATURES: readonly { kind: string; bytes: readonly number[]; at?: number }[] = [
  { kind: "a PDF document", bytes: [0x25, 0x50, 0x44, 0x46, 0x2d] }, // %PDF-
  { kind: "a ZIP archive (an EPUB, DOCX or ZIP)", bytes: [0x50, 0x4b, 0x03, 0x04] },
  { kind: "a PNG image", bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { kind: "a JPEG image", bytes: [0xff, 0xd8, 0xff] },
  { kind: "a GIF image", bytes: [0x47, 0x49, 0x46, 0x38] }, // GIF8
  { kind: "a WebP image", bytes: [0x57, 0x45, 0x42, 0x50], at: 8 }, // RIFF....WEBP
  { kind: "a gzip archive", bytes: [0x1f, 0x8b] },
];

function startsWith(bytes: Uint8Array, prefix: readonly number[], at = 0): boolean {
  return bytes.length >= at + prefix.length && prefix.every((b, i) => bytes[at + i] === b);
}

/** What the file is when its signature says it is not text, else undefined. */
export function binaryKind(bytes: Uint8Array): string | undefined {
  return SIGNATURES.find((s) => startsWith(bytes, s.bytes, s.at))?.kind;
}

function isControl(code: number): boolean {
  // Tab, line feed, form feed and carriage return are layout; DEL, C0 and C1 are not prose.
  if (code === 0x09 || code === 0x0a || code === 0x0c || code === 0x0d) return false;
  return code < 0x20 || (code >= 0x7f && code <= 0x9f);
}

function controlShare(text: string): number {
  if (text.length === 0) return 0;
  let controls = 0;
  for (let i = 0; i < text.length; i++) if (isControl(text.charCodeAt(i))) controls++;
  return controls / text.length;
}

/** CRLF and lone CR become LF: the chunker, the NLP engine and the positions count LF paragraphs. */
export function normaliseLineEndings(text: string): string {
  return text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text;
}

/** U+FFFD the file itself spells (EF BF BD in UTF-8), which are not decoding faults. */
function spelledReplacements(bytes: Uint8Array): number {
  let n = 0;
  for (let i = bytes.indexOf(0xef); i >= 0 && i + 2 < bytes.length; i = bytes.indexOf(0xef, i + 1)) {
    if (bytes[i + 1] === 0xbf && bytes[i + 2] === 0xbd) n++;
  }
  return n;
}

/** Characters above ASCII that the decoder produced, and how many of them are U+FFFD. */
function highCharacters(text: string): { high: number; replacements: number } {
  let high = 0;
  let replacements = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80 || (c >= 0xdc00 && c <= 0xdfff)) continue;
    if (c === 0xfffd) replacements++;
    else high++;
  }
  return { high, replacements };
}

function decoded(text: string, encoding: TextEncoding, replaced: number, maxControlShare: number): DecodedText {
  const share = controlShare(text);
  if (share > maxControlShare) {
    return { ok: false, reason: `file is not text: ${(share * 100).toFixed(1)}% of it is control characters` };
  }
  if (text.length > 0 && replaced / text.length > MAX_REPLACED_SHARE) {
    const label = encoding.toUpperCase();
    return { ok: false, reason: `file is not valid ${label} text: ${replaced} byte sequences (${((replaced / text.length) * 100).toFixed(1)}% of its characters) are not ${label}` };
  }
  return { ok: true, text: normaliseLineEndings(text), encoding, replaced };
}

/** Which side of the byte pairs holds the NUL bytes of UTF-16 text, or undefined when the NULs do not look like UTF-16. */
function utf16WithoutMark(bytes: Uint8Array): "utf-16le" | "utf-16be" | undefined {
  const pairs = Math.floor(bytes.length / 2);
  if (pairs < UTF16_MIN_PAIRS) return undefined;
  let even = 0;
  let odd = 0;
  for (let i = 0; i + 1 < bytes.length; i += 2) {
    if (bytes[i] === 0) even++;
    if (bytes[i + 1] === 0) odd++;
  }
  const fits = (side: number, other: number) => side >= pairs * UTF16_NUL_SIDE_SHARE && other <= pairs * UTF16_OTHER_SIDE_SHARE;
  return fits(odd, even) ? "utf-16le" : fits(even, odd) ? "utf-16be" : undefined;
}

function decodeUtf16(label: "utf-16le" | "utf-16be", bytes: Uint8Array, partial: boolean, maxControlShare: number): DecodedText {
  // The decoder drops the byte order mark.
  const text = new TextDecoder(label).decode(bytes, { stream: partial });
  return decoded(text, label, highCharacters(text).replacements, maxControlShare);
}

export function decodeBookBytes(bytes: Uint8Array, options: DecodeOptions = {}): DecodedText {
  const partial = options.partial ?? false;
  const maxControlShare = options.maxControlShare ?? DEFAULT_MAX_CONTROL_SHARE;
  const kind = binaryKind(bytes);
  if (kind) return { ok: false, reason: `file is ${kind}, not plain text` };
  const marked = startsWith(bytes, [0xff, 0xfe]) ? "utf-16le" : startsWith(bytes, [0xfe, 0xff]) ? "utf-16be" : undefined;
  if (marked) return decodeUtf16(marked, bytes, partial, maxControlShare);
  if (bytes.includes(0)) {
    const unmarked = utf16WithoutMark(bytes);
    if (!unmarked) return { ok: false, reason: "file is not text: it contains NUL bytes, and not in the pattern of UTF-16 text" };
    return decodeUtf16(unmarked, bytes, partial, maxControlShare);
  }
  // Every byte above ASCII is either part of a valid UTF-8 sequence or replaced: whichever is more
  // common says the encoding. Windows-1252 text almost never forms a valid UTF-8 sequence by chance
  // (an accented capital followed by a curly quote), so its high bytes are nearly all invalid.
  const utf8 = new TextDecoder("utf-8").decode(bytes, { stream: partial });
  const { high, replacements } = highCharacters(utf8);
  const invalid = replacements - spelledReplacements(bytes);
  if (invalid <= 0 || high + (replacements - invalid) > invalid) return decoded(utf8, "utf-8", Math.max(0, invalid), maxControlShare);
  const bom = startsWith(bytes, [0xef, 0xbb, 0xbf]) ? 3 : 0;
  return decoded(new TextDecoder("windows-1252").decode(bytes.subarray(bom)), "windows-1252", 0, maxControlShare);
}
