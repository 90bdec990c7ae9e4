import { describe, expect, test } from "bun:test";
import { checkCharacterName, cleanAliases, MAX_ALIASES, MAX_CHARACTER_NAME_CHARS } from "../../ingest/characters/character-names.ts";

describe("character names", () => {
  test.each([
    { raw: "Elizabeth Bennet", expected: { ok: true, name: "Elizabeth Bennet" } },
    { raw: "  Mr.\tDarcy \n", expected: { ok: true, name: "Mr. Darcy" } },
    { raw: "Ze\u0000no\u200b", expected: { ok: true, name: "Zeno" } },
    { raw: "Cafe\u0301", expected: { ok: true, name: "Café" } },
    { raw: "رحیم چاچا", expected: { ok: true, name: "رحیم چاچا" } },
    { raw: "../../etc/x", expected: { ok: true, name: "../../etc/x" } },
    { raw: "x".repeat(MAX_CHARACTER_NAME_CHARS), expected: { ok: true, name: "x".repeat(MAX_CHARACTER_NAME_CHARS) } },
    { raw: "😀".repeat(MAX_CHARACTER_NAME_CHARS), expected: { ok: true, name: "😀".repeat(MAX_CHARACTER_NAME_CHARS) } },
    { raw: "x".repeat(MAX_CHARACTER_NAME_CHARS + 1), expected: { ok: false, reason: `the name is 101 characters long (at most ${MAX_CHARACTER_NAME_CHARS})` } },
    { raw: "A".repeat(10_000), expected: { ok: false, reason: `the name is 10000 characters long (at most ${MAX_CHARACTER_NAME_CHARS})` } },
    { raw: " \u0007\u2028 ", expected: { ok: false, reason: "the name is empty" } },
  ])("$raw", ({ raw, expected }) => {
    expect(checkCharacterName(raw)).toEqual(expected as ReturnType<typeof checkCharacterName>);
  });

  test("aliases are cleaned, refused ones dropped, the name itself and repeats left out, and bounded", () => {
    expect(cleanAliases("Lizzy", ["Eliza ", "Lizzy", "Eliza", "y".repeat(500), "", "Miss\u0000 Bennet"])).toEqual(["Eliza", "Miss Bennet"]);
    expect(cleanAliases("Pip", Array.from({ length: 50 }, (_, i) => `Pip ${i}`))).toHaveLength(MAX_ALIASES);
  });
});
