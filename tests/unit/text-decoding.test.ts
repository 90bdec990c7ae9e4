import { describe, expect, test } from "bun:test";
import { binaryKind, decodeBookBytes, normaliseLineEndings } from "../../common/text-decoding.ts";

const bytes = (...parts: (number[] | string)[]) =>
  new Uint8Array(parts.flatMap((p) => (typeof p === "string" ? [...new TextEncoder().encode(p)] : p)));
const utf16le = (s: string) => [...s].flatMap((c) => [c.charCodeAt(0) & 0xff, c.charCodeAt(0) >> 8]);
const utf16be = (s: string) => [...s].flatMap((c) => [c.charCodeAt(0) >> 8, c.charCodeAt(0) & 0xff]);
const repeat = (n: number, b: number[]) => Array.from({ length: n }, () => b).flat();

describe("decoding a book file", () => {
  test.each([
    ["UTF-8 without a byte order mark", bytes("Caf\u00e9 \u201cnoir\u201d\n"), "utf-8", "Caf\u00e9 \u201cnoir\u201d\n"],
    ["UTF-8 with a byte order mark, which is dropped", bytes([0xef, 0xbb, 0xbf], "It was.\n"), "utf-8", "It was.\n"],
    ["UTF-16 LE with its byte order mark", bytes([0xff, 0xfe], utf16le("\u201cAy,\u201d said she.\n")), "utf-16le", "\u201cAy,\u201d said she.\n"],
    ["UTF-16 BE with its byte order mark", bytes([0xfe, 0xff], utf16be("Stop.\n")), "utf-16be", "Stop.\n"],
    ["Windows-1252 curly quotes and an accent", bytes([0x93], "Voil", [0xe0, 0x94], " said he\n"), "windows-1252", "\u201cVoil\u00e0\u201d said he\n"],
    ["Latin-1 text that is not valid UTF-8", bytes("na", [0xef], "ve ", [0xe9], "t", [0xe9], "\n"), "windows-1252", "na\u00efve \u00e9t\u00e9\n"],
    ["CRLF line endings", bytes("one\r\ntwo\r\n"), "utf-8", "one\ntwo\n"],
    ["old Mac CR line endings", bytes("one\rtwo\r"), "utf-8", "one\ntwo\n"],
    ["CRLF in Windows-1252", bytes("caf", [0xe9], "\r\nend\r\n"), "windows-1252", "caf\u00e9\nend\n"],
  ])("%s", (_, input, encoding, text) => {
    expect(decodeBookBytes(input)).toEqual({ ok: true, text, encoding: encoding as "utf-8", replaced: 0 });
  });

  // A page of Pride and Prejudice as its UTF-8 file spells it: curly quotes, an accent, a dash.
  const page = "\u201cMy dear Mr. Bennet,\u201d said his lady to him one day, \u201chave you heard that Netherfield Park is let at last?\u201d\n\nMr. Bennet replied that he had not\u2014nor the na\u00efve prot\u00e9g\u00e9 either.\n\n";
  const book = page.repeat(400);
  const withStrayByte = (at: number) => {
    const text = new TextEncoder().encode(book);
    const cut = text.indexOf(0x20, Math.floor(text.length * at));
    // A Windows-1252 "é" pasted into the UTF-8 file: one byte that is not UTF-8.
    return bytes([...text.subarray(0, cut)], [0xe9], [...text.subarray(cut)]);
  };

  test.each([0.01, 0.5, 0.99])("one invalid byte at %p of a UTF-8 book is replaced; the book stays UTF-8", (at) => {
    const result = decodeBookBytes(withStrayByte(at));
    expect(result).toMatchObject({ ok: true, encoding: "utf-8", replaced: 1 });
    const text = result.ok ? result.text : "";
    expect(text.length).toBe(book.length + 1);
    expect(text.match(/\ufffd/g)).toHaveLength(1);
    expect(text).not.toContain("\u00e2\u20ac");
  });

  test("a Windows-1252 book with one sequence that happens to be valid UTF-8 stays Windows-1252", () => {
    // "É" then a closing curly quote is C9 94: a valid two-byte UTF-8 sequence, among many invalid ones.
    const cp1252 = bytes(repeat(50, [...new TextEncoder().encode("caf"), 0xe9, 0x20, 0x93, 0x41, 0x94, 0x20]), [0xc9, 0x94]);
    expect(decodeBookBytes(cp1252)).toMatchObject({ ok: true, encoding: "windows-1252", replaced: 0 });
  });

  test("a file that spells U+FFFD itself is UTF-8 with nothing replaced", () => {
    expect(decodeBookBytes(bytes("It read \ufffd, and nothing else.\n"))).toEqual({ ok: true, encoding: "utf-8", replaced: 0, text: "It read \ufffd, and nothing else.\n" });
  });

  test.each([
    ["UTF-16 LE without a byte order mark", bytes(utf16le(page)), "utf-16le", page],
    ["UTF-16 BE without a byte order mark", bytes(utf16be(page)), "utf-16be", page],
    ["Urdu in UTF-16 LE without a byte order mark", bytes(utf16le("\u06cc\u06c1 \u0627\u06cc\u06a9 \u06a9\u06c1\u0627\u0646\u06cc \u06c1\u06d2\u06d4\n".repeat(20))), "utf-16le", "\u06cc\u06c1 \u0627\u06cc\u06a9 \u06a9\u06c1\u0627\u0646\u06cc \u06c1\u06d2\u06d4\n".repeat(20)],
  ])("%s is read by where its NUL bytes are", (_, input, encoding, text) => {
    expect(decodeBookBytes(input)).toEqual({ ok: true, text, encoding: encoding as "utf-8", replaced: 0 });
  });

  test("a UTF-8 file with more than one character in a hundred unreadable is refused, not guessed at", () => {
    const damaged = bytes(repeat(100, [...new TextEncoder().encode("na\u00efve caf\u00e9 \u201cyes\u201d "), 0xff]));
    expect(decodeBookBytes(damaged)).toMatchObject({ ok: false, reason: expect.stringMatching(/^file is not valid UTF-8 text: 100 byte sequences/) });
  });

  test.each([
    ["a PDF", bytes("%PDF-1.7\n%\u00e2\u00e3\n1 0 obj\n"), /^file is a PDF document, not plain text$/],
    ["an EPUB (a ZIP)", bytes([0x50, 0x4b, 0x03, 0x04], "mimetypeapplication/epub+zip"), /^file is a ZIP archive/],
    ["a PNG", bytes([0x89], "PNG\r\n", [0x1a, 0x0a, 0, 0, 0, 13], "IHDR"), /^file is a PNG image/],
    ["a JPEG", bytes([0xff, 0xd8, 0xff, 0xe0, 0, 16], "JFIF"), /^file is a JPEG image/],
    ["a GIF", bytes("GIF89a", [1, 0, 1, 0]), /^file is a GIF image/],
    ["a WebP", bytes("RIFF", [0x24, 0, 0, 0], "WEBPVP8 "), /^file is a WebP image/],
    ["NUL bytes past a plain beginning", bytes("A plain beginning.\n".repeat(100), [0xff, 0xfe, 0x00, 0x01]), /contains NUL bytes/],
    ["NUL bytes on both sides of the byte pairs", bytes(repeat(200, [0x41, 0x00, 0x00, 0x42, 0x10, 0x00])), /contains NUL bytes, and not in the pattern of UTF-16/],
    ["control characters read as Windows-1252", bytes(repeat(200, [0x41, 0x01, 0x81, 0x42, 0x07, 0x9d])), /control characters$/],
    ["UTF-16 cut in the middle of a character", bytes([0xff, 0xfe, 0x41, 0x00, 0x42]), /not valid UTF-16LE/],
  ])("%s is refused with a reason", (_, input, reason) => {
    const result = decodeBookBytes(input);
    expect(result.ok).toBe(false);
    expect(result.ok ? "" : result.reason).toMatch(reason);
  });

  test("the beginning of a file may end inside a character when it is only the beginning", () => {
    const cut = bytes("caf", [0xc3]);
    expect(decodeBookBytes(cut, { partial: true })).toMatchObject({ ok: true, encoding: "utf-8" });
    expect(decodeBookBytes(cut)).toMatchObject({ ok: true, encoding: "windows-1252", text: "caf\u00c3" });
  });

  test("a plain text is not taken for a binary signature", () => {
    expect(binaryKind(bytes("PK is what we called him.\n"))).toBeUndefined();
    expect(binaryKind(bytes("GIF, he said."))).toBeUndefined();
  });

  test.each([
    ["a\r\nb", "a\nb"],
    ["a\rb\r\n\r\nc", "a\nb\n\nc"],
    ["no breaks", "no breaks"],
  ])("line endings of %j become %j", (input, output) => {
    expect(normaliseLineEndings(input)).toBe(output);
  });
});
