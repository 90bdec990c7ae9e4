import { describe, expect, test } from "bun:test";
import { decodeBookBytes } from "../../common/text-decoding.ts";
import { languageEvidence, MIN_EVIDENCE_CHARS, notLanguage } from "../../ingest/book/text-language.ts";

/** The bytes of a text in a single-byte code page, by inverting the code page's decoder. */
function encodeIn(label: string, text: string): Uint8Array {
  const decoder = new TextDecoder(label);
  const byChar = new Map(Array.from({ length: 256 }, (_, b) => [decoder.decode(new Uint8Array([b])), b]));
  return new Uint8Array([...text].map((c) => byChar.get(c) ?? 0x3f));
}

/** Deterministic "random" bytes in [from, to). */
function noise(length: number, from: number, to: number): Uint8Array {
  let seed = 12345;
  return Uint8Array.from({ length }, () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return from + (seed % (to - from));
  });
}

/** What the worker reads: the file decoded as the evidence says, then judged. */
function judge(bytes: Uint8Array): string | undefined {
  const decoded = decodeBookBytes(bytes);
  if (!decoded.ok) throw new Error(decoded.reason);
  return notLanguage(languageEvidence(decoded.text));
}

const utf8 = (text: string) => new TextEncoder().encode(text);
const russian =
  "Все счастливые семьи похожи друг на друга, каждая несчастливая семья несчастлива по-своему. Всё смешалось в доме Облонских. " +
  "Жена узнала, что муж был в связи с бывшею в их доме француженкою-гувернанткой, и объявила мужу, что не может жить с ним в одном доме.\n\n";
const greek = "Ο Οδυσσέας ήταν βασιλιάς της Ιθάκης και ήρωας του Τρωικού πολέμου, γνωστός για την πονηριά του και τα ταξίδια του.\n\n";
const english =
  "\u201cMy dear Mr. Bennet,\u201d said his lady to him one day, \u201chave you heard that Netherfield Park is let at last?\u201d " +
  "Mr. Bennet replied that he had not. \u201cBut it is,\u201d returned she; \u201cfor Mrs. Long has just been here.\u201d\n\n";
const urdu = "یہ ایک کہانی ہے۔ ایک دفعہ کا ذکر ہے کہ ایک بادشاہ تھا، جس کی تین بیٹیاں تھیں۔ \u201cتم کہاں جا رہی ہو؟\u201d اس نے پوچھا۔\n\n";
const french = "\u00ab Vous \u00eates bien aimable \u00bb, r\u00e9pondit-elle, et l\u2019\u00e9t\u00e9 d\u00e9j\u00e0 s\u2019achevait sur la for\u00eat o\u00f9 nous \u00e9tions r\u00e9unis, pr\u00e8s du ch\u00e2teau.\n\n";
const icelandic = "\u00de\u00e1 var \u00fea\u00f0 a\u00f0 Gu\u00f0r\u00fan \u00d3sv\u00edfursd\u00f3ttir \u00e1tti heima \u00e1 Laugum \u00ed S\u00e6lingsdal; h\u00fan var kvenna v\u00e6nst er upp \u00f3xu \u00e1 \u00cdslandi.\n\n";
const irish = "Bh\u00ed s\u00e9 ina ch\u00f3na\u00ed i mBaile \u00c1tha Cliath le fada, agus n\u00ed raibh aon duine ag caint faoi na h\u00c9ireannaigh a chuaigh go Meiric\u00e1.\n\n";

describe("a decoded book that is not language", () => {
  test.each([
    ["Russian in KOI8-R", encodeIn("koi8-r", russian.repeat(40)), /100% of its Latin letters are accented.*KOI8-R/],
    ["Russian in Windows-1251", encodeIn("windows-1251", russian.repeat(40)), /100% of its Latin letters are accented/],
    ["Greek in ISO-8859-7", encodeIn("iso-8859-7", greek.repeat(40)), /100% of its Latin letters are accented/],
    ["random printable ASCII", noise(200_000, 0x20, 0x7f), /only 5\d% of its characters are letters/],
    ["random printable bytes above ASCII too", noise(200_000, 0xa0, 0x100), /of its Latin letters are accented/],
  ])("%s is refused with the reason", (_, bytes, reason) => {
    expect(judge(bytes)).toMatch(reason);
  });

  test("letters that change case inside most words are refused", () => {
    const letters = [...noise(60_000, 0, 53)].map((n) => (n === 52 ? " " : String.fromCharCode(n < 26 ? 0x61 + n : 0x41 + n - 26))).join("");
    expect(judge(utf8(letters))).toMatch(/of its words change from small letters to capitals inside the word/);
  });
});

describe("a decoded book that is language", () => {
  test.each([
    ["English in UTF-8", utf8(english.repeat(40))],
    ["English in Windows-1252", encodeIn("windows-1252", english.repeat(40))],
    ["Urdu in UTF-8", utf8(urdu.repeat(40))],
    ["Russian in UTF-8", utf8(russian.repeat(40))],
    ["Greek in UTF-8", utf8(greek.repeat(40))],
    ["French in Windows-1252", encodeIn("windows-1252", french.repeat(40))],
    ["Icelandic, among the most accented, in Windows-1252", encodeIn("windows-1252", icelandic.repeat(40))],
    ["Irish, whose words change case after a mutation", utf8(irish.repeat(40))],
    ["Vietnamese", utf8("Ng\u00e0y x\u1eeda ng\u00e0y x\u01b0a, \u1edf m\u1ed9t l\u00e0ng n\u1ecd c\u00f3 hai anh em m\u1ed3 c\u00f4i cha m\u1eb9.\n\n".repeat(60))],
  ])("%s is read", (_, bytes) => {
    expect(judge(bytes)).toBeUndefined();
  });

  test("a text too short to judge is not refused by these measures", () => {
    const short = "x7#Q!".repeat(Math.floor(MIN_EVIDENCE_CHARS / 5) - 1);
    expect(notLanguage(languageEvidence(short))).toBeUndefined();
    expect(notLanguage(languageEvidence(short + "x7#Q!"))).toMatch(/letters/);
  });
});
