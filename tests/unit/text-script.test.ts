import { describe, expect, test } from "bun:test";
import { LANGUAGES } from "../../common/contract/rows.ts";
import { detectScript, fitLanguage, parseLanguage } from "../../ingest/book/text-script.ts";

const URDU = "زینب نے دروازہ کھولا اور گلی میں چراغ جلایا۔ احمد نے کہا کہ آندھی آنے والی ہے۔\n";
const ENGLISH = "Marta opened the door and lit the lamp in the lane. Jonas said a storm was coming.\n";

describe("the script of a text", () => {
  test.each([
    ["English prose", "latin", ENGLISH.repeat(20)],
    ["Urdu prose", "arabic", URDU.repeat(20)],
    ["Urdu with an English title page", "arabic", `THE LAMP LANE\n\n${URDU.repeat(40)}`],
    ["half and half", "mixed", (ENGLISH + URDU).repeat(10)],
    ["numbers and marks only", "unknown", "1 2 3 — 4, 5; 6!\n".repeat(20)],
    ["a very long English book sampled in windows", "latin", ENGLISH.repeat(20_000)],
  ])("%s is %s", (_, script, text) => {
    expect(detectScript(text).script).toBe(script as "latin");
  });
});

describe("the language a book is ingested as", () => {
  test.each([
    ["English", "latin", "English", false],
    ["English", "arabic", "Urdu", true],
    ["Urdu", "arabic", "Urdu", false],
    ["Urdu", "latin", "English", true],
    ["both", "latin", "both", false],
    ["both", "arabic", "both", false],
    ["English", "mixed", "English", false],
    ["Urdu", "unknown", "Urdu", false],
  ] as const)("registered %s, text in %s script: %s (mismatch said: %p)", (registered, script, language, mismatch) => {
    const fit = fitLanguage(registered, script);
    expect(fit.language).toBe(language);
    expect(fit.mismatch !== undefined).toBe(mismatch);
  });

  test.each([
    ["urdu", "Urdu"],
    ["ENGLISH", "English"],
    [" Both ", "both"],
    ["French", undefined],
  ])("--language %j is stored as %p", (value, stored) => {
    expect(parseLanguage(value, LANGUAGES)).toBe(stored as "Urdu");
  });
});
