import { describe, expect, test } from "bun:test";
import { selectCharacters } from "../ingest/characters.ts";
import { parseBookNlp, toCharacterList } from "../ingest/nlp/booknlp-files.ts";
import { runBookNlp } from "../ingest/nlp/engine.ts";

// Every passage here is written for these tests.

/** The characters the pipeline keeps for a text, as the native engine's thread selects them. */
function select(text: string, maxCharacters?: number) {
  const { files, analysis } = runBookNlp(text);
  const { tok } = analysis;
  const tokens = { paragraph: tok.paragraph, word: tok.text, start: tok.start, end: tok.end, offsets: "utf16" as const };
  return selectCharacters(parseBookNlp(files), { minMentions: 1, minQuotes: 0, ...(maxCharacters === undefined ? {} : { maxCharacters }) }, { text, tokens });
}

describe("people who share a name", () => {
  test("two women who share only a given name stay two characters, each called by her full name", () => {
    const text = [
      'Miss Mary Tobin came in with a letter. "I am so worried," said Mary. Mary sat down, and Mary cried. Miss Mary Tobin was a typist.',
      '"Tell me everything," said Mr. Quill. "It is my father," said Mary, and she wept. Mary left at noon.',
      "Weeks later, in another town, Miss Mary Ashdown ran into the bank. Miss Mary Ashdown was the banker's niece.",
      '"Uncle!" cried Mary. Mary was pale, and Mary trembled. "The jewels are gone," said Mary. Mr. Quill looked at her.',
    ].join("\n\n");
    const names = select(text).map((c) => c.name);
    expect(names).toContain("Mary Tobin");
    expect(names).toContain("Mary Ashdown");
    expect(names).not.toContain("Mary");
  });

  test("a bare surname the family shares is not an alias of the one it was once used for, but stays the name of the one it usually means", () => {
    const text = [
      'Mr. Tobin read his paper. "Well," said Mr. Tobin. Mrs. Tobin sighed. "You never listen," said Mrs. Tobin.',
      'Clara Tobin laughed at them both. Clara would not long bear the name of Tobin, her mother said. "Nonsense," said Clara.',
      'Mr. Wren came to dinner. Wren was tall, and Wren was proud. "Good evening," said Wren. Wren bowed to Clara, and Wren sat down. Miss Wren, his sister, smiled. "Hello," said Miss Wren.',
    ].join("\n\n");
    const list = toCharacterList(parseBookNlp(runBookNlp(text).files), { minMentions: 0 });
    const called = (name: string) => list.find((c) => c.name === name || c.aliases.includes(name))!;
    expect([called("Clara Tobin").name, ...called("Clara Tobin").aliases]).not.toContain("Tobin");
    expect(list.flatMap((c) => [c.name, ...c.aliases])).not.toContain("Tobin");
    expect([called("Mr. Wren").name, ...called("Mr. Wren").aliases]).toContain("Wren");
    expect(called("Miss Wren").aliases).not.toContain("Wren");
  });
});
