import { describe, expect, test } from "bun:test";
import { ANGLE_BRACKETS, LOOK_ALIKES, wordsOf, skeleton, spelledKey, wordCase } from "../../common/text-normalise.ts";

describe("spelledKey: what a word spells", () => {
  test.each<[string, string, string]>([
    ["plain ASCII", "Ashby", "ashby"],
    ["capitals", "ASHBY", "ashby"],
    ["full-width", "Ａｓｈｂｙ", "ashby"],
    ["mathematical bold", "𝐀𝐬𝐡𝐛𝐲", "ashby"],
    ["circled", "Ⓐⓢⓗⓑⓨ", "ashby"],
    ["negative squared (no decomposition)", "🅰🆂🅷🅱🆈", "ashby"],
    ["precomposed accent", "Ashbý", "ashby"],
    ["combining accent", "Ashb\u0301y", "ashby"],
    ["zero-width space", "Ash\u200bby", "ashby"],
    ["zero-width non-joiner and joiner", "A\u200cs\u200dhby", "ashby"],
    ["soft hyphen", "Ash\u00adby", "ashby"],
    ["word joiner and invisible operators", "As\u2060h\u2061b\u2064y", "ashby"],
    ["left-to-right and right-to-left marks", "\u200eAsh\u200fby", "ashby"],
    ["Hangul fillers", "Ash\u3164b\u115fy\u1160", "ashby"],
    ["variation selectors", "A\ufe0fshb\ufe00y", "ashby"],
    ["byte order mark", "\ufeffAshby", "ashby"],
    ["Cyrillic look-alikes", "Аѕһbу", "ashby"],
    ["Cyrillic capitals", "АЅНВУ", "ashby"],
    ["Greek look-alikes", "Αshby", "ashby"],
    ["Armenian look-alikes", "Օscar", "oscar"],
    ["Cherokee capitals", "ᎪᏚᎻᏴᎩ", "ashby"],
    ["Cherokee small letters", "ꭺꮪꮋꮟꭹ", "ashby"],
    ["Lisu letters", "ꓮꓢꓧꓐꓬ", "ashby"],
    ["small capitals", "ᴀsʜʙʏ", "ashby"],
    ["dotless i and stroked letters", "Łıøđ", "liod"],
    ["sharp s folds to ss", "Straße", "strasse"],
    ["final sigma folds to sigma", "ΛΟΓΟΣ", spelledKey("λογος")],
    ["lunate sigma, which NFKC would make a sigma", "\u03f9rane \u03f2rane", "cranecrane"],
    ["modifier apostrophe is not a letter", "Ashbyʼs", "ashbys"],
    ["nothing but invisible characters", "\u200b\u200d", ""],
  ])("%s: %p is %p", (_, word, key) => {
    expect(spelledKey(word)).toBe(key);
  });

  test("a word in another script is kept in it, only accents and case folded", () => {
    expect(spelledKey("Пьер")).toBe(spelledKey("ПЬЕР"));
    expect(spelledKey("Ἀθῆναι")).toBe(spelledKey("αθηναι"));
  });
});

describe("the look-alike table", () => {
  test("maps only to ASCII letters or an apostrophe, and never an ASCII character", () => {
    for (const [from, to] of LOOK_ALIKES) {
      expect(from.codePointAt(0)!).toBeGreaterThan(0x7f);
      expect(to).toMatch(/^[A-Za-z']$/);
    }
  });

  test("every row is read whole: a look-alike keys as its letter alone and beside others", () => {
    for (const [from, to] of LOOK_ALIKES) {
      expect(spelledKey(from)).toBe(to === "'" ? "" : to.toLowerCase());
      expect(spelledKey(`x${from}x`)).toBe(to === "'" ? "xx" : `x${to.toLowerCase()}x`);
    }
  });

  test.each([
    ["Cyrillic", "\u0410\u0412\u0415\u041d\u041e\u0420\u0421\u0422\u0425\u0430\u0435\u043e\u0440\u0441", "ABEHOPCTXaeopc"],
    ["Greek", "\u0391\u0392\u0395\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7\u03bf", "ABEHIKMNOPTYXo"],
    ["Armenian", "\u054d\u054f\u0555\u0585\u0578\u057d", "USOonu"],
    ["Cherokee", "\u13aa\u13f4\u13df\u13a0\u13ac\u13c0\u13bb\u13ab\u13e6\u13de\u13b7\u13e2\u13da\u13a2\u13d9\u13b3", "ABCDEGHJKLMPSTVW"],
    ["Lisu", "\ua4ee\ua4d0\ua4da\ua4d3\ua4f0\ua4dd\ua4d6\ua4e7\ua4f2\ua4d9\ua4d7\ua4e1\ua4df\ua4e0\ua4f3\ua4d1\ua4e3\ua4e2\ua4d4\ua4f4\ua4e6\ua4ea\ua4eb\ua4ec\ua4dc", "ABCDEFGHIJKLMNOPRSTUVWXYZ"],
    ["small capitals", "\u1d00\u0299\u1d04\u1d05\u1d07\ua730\u0262\u029c\u026a\u1d0a\u1d0b\u029f\u1d0d\u0274\u1d0f\u1d18\ua7af\u0280\ua731\u1d1b\u1d1c\u1d20\u1d21\u028f\u1d22", "ABCDEFGHIJKLMNOPQRSTUVWYZ"],
    ["full-width (by NFKC)", "\uff21\uff22\uff23\uff41\uff42\uff43", "ABCabc"],
  ])("%s look-alikes read as the Latin letters they are drawn like", (_, from, to) => {
    expect(skeleton(from)).toBe(to);
  });
});

describe("the angle brackets", () => {
  test("every character that NFKC turns into angle brackets is one of them", () => {
    const brackets = new Set(ANGLE_BRACKETS);
    const missing: string[] = [];
    for (let cp = 0x80; cp < 0x30000; cp++) {
      if (cp >= 0xd800 && cp < 0xe000) continue;
      const c = String.fromCodePoint(cp);
      const n = c.normalize("NFKC");
      if (n !== c && [...n].every((x) => brackets.has(x)) && !brackets.has(c)) missing.push(`U+${cp.toString(16)}`);
    }
    expect(missing).toEqual([]);
  });
});

describe("wordCase: how a word is written", () => {
  test.each<[string, ReturnType<typeof wordCase>]>([
    ["crane", "lower"],
    ["Crane", "capitalised"],
    ["CRANE", "upper"],
    ["ᴄʀᴀɴᴇ", "upper"],
    ["Ｃｒａｎｅ", "capitalised"],
    ["\u200bCrane", "capitalised"],
    ["A", "capitalised"],
  ])("%p is %p", (word, kase) => {
    expect(wordCase(word)).toBe(kase);
  });
});

describe("the words of a text", () => {
  test.each(["crane", "Crane", "CRANE", "McDonald", "1984", "3D", "A", "a1", "Élise", "ÉLISE", "ᴄʀᴀɴᴇ", "Ｃｒａｎｅ"])("%p keys and cases as spelledKey and wordCase say", (word) => {
    expect(wordsOf(word)).toEqual([{ key: spelledKey(word), kase: wordCase(word), word }]);
  });


  test("invisible characters and combining marks stay inside a word; a word of them alone is none", () => {
    const words = wordsOf("The str\u200banger said, Ashb\u0301y\u00ad's \u200b ＷＯＲＤ.");
    expect(words.map((w) => w.key)).toEqual(["the", "stranger", "said", "ashby", "s", "word"]);
    expect(words[1]).toEqual({ key: "stranger", kase: "lower", word: "str\u200banger" });
    expect(words.at(-1)).toEqual({ key: "word", kase: "upper", word: "ＷＯＲＤ" });
  });
});
