/**
 * A book file's bytes to text, or the reason they are not text.
 *
 * Readers have books in the encodings their tools wrote: UTF-8 with or without a byte order mark,
 * UTF-16 with one, and Windows-1252 (Project Gutenberg's older files, Latin-1 editors). A file
 * whose bytes are not valid UTF-8 is read as Windows-1252, which maps every byte to a character
 * (Latin-1's printable range is the same), so only the share of control characters tells such a
 * file from a binary one. Files readers mistake for text (a PDF, an EPUB or another ZIP, an image)
 * are named by their signature, so the refusal says what the file is.
 *
 * Pure: no I/O.
 */

export type TextEncoding = "utf-8" | "utf-16le" | "utf-16be" | "windows-1252";

export type DecodedText = { ok: true; text: string; encoding: TextEncoding } | { ok: false; reason: string };

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
  return code < 0x20 || (code >= 0x7f && code <= 0x9f) || code === 0xfffd;
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

function tryDecode(label: TextEncoding, bytes: Uint8Array, partial: boolean): string | undefined {
  try {
    return new TextDecoder(label, { fatal: true }).decode(bytes, { stream: partial });
  } catch {
    return undefined;
  }
}

function decoded(text: string, encoding: TextEncoding, maxControlShare: number): DecodedText {
  const share = controlShare(text);
  if (share > maxControlShare) {
    return { ok: false, reason: `file is not text: ${(share * 100).toFixed(1)}% of it is control characters` };
  }
  return { ok: true, text: normaliseLineEndings(text), encoding };
}

export function decodeBookBytes(bytes: Uint8Array, options: DecodeOptions = {}): DecodedText {
  const partial = options.partial ?? false;
  const maxControlShare = options.maxControlShare ?? DEFAULT_MAX_CONTROL_SHARE;
  const kind = binaryKind(bytes);
  if (kind) return { ok: false, reason: `file is ${kind}, not plain text` };
  const utf16 = startsWith(bytes, [0xff, 0xfe]) ? "utf-16le" : startsWith(bytes, [0xfe, 0xff]) ? "utf-16be" : undefined;
  if (utf16) {
    // The decoder drops the byte order mark.
    const text = tryDecode(utf16, bytes, partial);
    return text === undefined ? { ok: false, reason: `file is not valid ${utf16.toUpperCase()} text` } : decoded(text, utf16, maxControlShare);
  }
  // UTF-16 without a byte order mark cannot be told from binary: both are full of NUL bytes.
  if (bytes.includes(0)) return { ok: false, reason: "file is not text: it contains NUL bytes (UTF-16 text needs a byte order mark)" };
  const utf8 = tryDecode("utf-8", bytes, partial);
  if (utf8 !== undefined) return decoded(utf8, "utf-8", maxControlShare);
  const bom = startsWith(bytes, [0xef, 0xbb, 0xbf]) ? 3 : 0;
  return decoded(new TextDecoder("windows-1252").decode(bytes.subarray(bom)), "windows-1252", maxControlShare);
}
