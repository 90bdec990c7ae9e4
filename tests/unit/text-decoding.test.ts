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
    expect(decodeBookBytes(input)).toEqual({ ok: true, text, encoding: encoding as "utf-8" });
  });

  test.each([
    ["a PDF", bytes("%PDF-1.7\n%\u00e2\u00e3\n1 0 obj\n"), /^file is a PDF document, not plain text$/],
    ["an EPUB (a ZIP)", bytes([0x50, 0x4b, 0x03, 0x04], "mimetypeapplication/epub+zip"), /^file is a ZIP archive/],
    ["a PNG", bytes([0x89], "PNG\r\n", [0x1a, 0x0a, 0, 0, 0, 13], "IHDR"), /^file is a PNG image/],
    ["a JPEG", bytes([0xff, 0xd8, 0xff, 0xe0, 0, 16], "JFIF"), /^file is a JPEG image/],
    ["a GIF", bytes("GIF89a", [1, 0, 1, 0]), /^file is a GIF image/],
    ["a WebP", bytes("RIFF", [0x24, 0, 0, 0], "WEBPVP8 "), /^file is a WebP image/],
    ["NUL bytes past a plain beginning", bytes("A plain beginning.\n".repeat(100), [0xff, 0xfe, 0x00, 0x01]), /contains NUL bytes/],
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
