import { describe, expect, test } from "bun:test";
import { selectCharacters } from "../../ingest/characters/character-selection.ts";
import { speechPieces } from "../../ingest/characters/character-lines.ts";
import { parseBookNlp } from "../../ingest/nlp/booknlp-files.ts";
import { surnamesOf, toCharacterList, withoutTitle } from "../../ingest/nlp/character-list.ts";
import { runBookNlp } from "../../ingest/nlp/engine.ts";

// Every passage here is written for these tests.

/** The characters the pipeline keeps for a text, as the native engine's thread selects them. */
function select(text: string, maxCharacters?: number) {
  const { files, analysis } = runBookNlp(text);
  const { tok } = analysis;
  const tokens = { paragraph: tok.paragraph, word: tok.text, start: tok.start, end: tok.end, offsets: "utf16" as const };
  return selectCharacters(parseBookNlp(files), { minMentions: 1, minQuotes: 0, ...(maxCharacters === undefined ? {} : { maxCharacters }) }, { text, tokens });
}

describe("surnames a character's names show", () => {
  test.each([
    [["Mary Tobin"], ["tobin"]],
    [["Mr. Tobin"], ["tobin"]],
    [["Miss Tobin"], []],
    [["Mary"], []],
    [["Princess Mary"], []],
    [["Princess Mary Tobin", "Count Ilya"], ["tobin"]],
    [["Captain Prince Andrew"], []],
  ])("%p show %p", (names, surnames) => {
    expect([...surnamesOf(names)]).toEqual(surnames);
  });

  test("a title is taken off a full name, stacked titles too", () => {
    expect(withoutTitle("Miss Mary Tobin")).toBe("Mary Tobin");
    expect(withoutTitle("Captain Prince Andrew Tobin")).toBe("Andrew Tobin");
    expect(withoutTitle("Mary Tobin")).toBe("Mary Tobin");
  });
});

describe("people who share a name", () => {
  test("two women who share only a given name stay two characters, each called by her full name, and neither by the name they share", () => {
    const text = [
      'Miss Mary Tobin came in with a letter. "I am so worried," said Mary. Mary sat down, and Mary cried. Miss Mary Tobin was a typist.',
      '"Tell me everything," said Mr. Quill. "It is my father," said Mary, and she wept. Mary left at noon.',
      "Weeks later, in another town, Miss Mary Ashdown ran into the bank. Miss Mary Ashdown was the banker's niece.",
      '"Uncle!" cried Mary. Mary was pale, and Mary trembled. "The jewels are gone," said Mary. Mr. Quill looked at her.',
    ].join("\n\n");
    const selected = select(text);
    const names = selected.map((c) => c.name);
    expect(names).toContain("Mary Tobin");
    expect(names).toContain("Mary Ashdown");
    expect(names).not.toContain("Mary");
    expect(selected.filter((c) => c.aliases.includes("Mary"))).toEqual([]);
  });

  test("two men who share only a surname stay two characters, each called by his full name", () => {
    const text = [
      'Michael Kestrel commanded the army. Kestrel was old. "We wait," said Kestrel. Kestrel slept, and Kestrel woke late.',
      '"Retreat," said Michael Kestrel. Kestrel rode on, and Kestrel frowned.',
      "Years before, a poem had been written by Paul Kestrel, the general's cousin. Kestrel wrote verses. \"A rhyme,\" said Kestrel. Kestrel smiled.",
      "Paul Kestrel died young. Kestrel was mourned.",
      "Kestrel marched. Kestrel halted. Kestrel ate. Kestrel rested. Kestrel read the map, and Kestrel slept.",
    ].join("\n\n");
    const names = select(text).map((c) => c.name);
    expect(names).toContain("Michael Kestrel");
    expect(names).toContain("Paul Kestrel");
  });

  test("two men the book mostly calls by the surname they share stay two characters when their given names differ", () => {
    const text = [
      'Michael Kestrel commanded the army. Kestrel was old. "We wait," said Kestrel. Kestrel slept, and Kestrel woke late. Michael was his name, and Michael he signed.',
      '"Retreat," said Kestrel. Kestrel rode on, and Kestrel frowned.',
      "Years before, a poem had been written by Paul Kestrel, the general's cousin. Kestrel wrote verses. \"A rhyme,\" said Kestrel. Kestrel smiled. Paul was a poet; Paul died young.",
      "Kestrel marched. Kestrel halted. Kestrel ate. Kestrel rested. Kestrel read the map, and Kestrel slept.",
    ].join("\n\n");
    const names = select(text).map((c) => c.name);
    expect(names).toContain("Michael Kestrel");
    expect(names).toContain("Paul Kestrel");
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

describe("aliases two characters share", () => {
  const listOf = (text: string) => toCharacterList(parseBookNlp(runBookNlp(text).files), { minMentions: 0 });
  const namesOf = (list: ReturnType<typeof listOf>, name: string) => {
    const c = list.find((x) => x.name === name || x.aliases.includes(name))!;
    return [c.name, ...c.aliases];
  };

  test("a bare surname is nobody's alias when a wife known only as 'Mrs. <Surname>' shares it", () => {
    const text = [
      'Mordred Smythe owned the launch. Smythe was a boatman. "Fine weather," said Smythe. Smythe rowed out, and Smythe whistled. Mr. Mordred Smythe was gone a week.',
      '"He has not come back," said Mrs. Smythe. Mrs. Smythe wrung her hands. "Where is he?" said Mrs. Smythe.',
      '"I shall find him," said Mordred Smythe, when at last he came. Smythe laughed.',
    ].join("\n\n");
    const list = listOf(text);
    expect(list.flatMap((c) => [c.name, ...c.aliases])).not.toContain("Smythe");
    expect(namesOf(list, "Mrs. Smythe")).not.toContain("Mordred Smythe");
  });

  test("an alias both of two listed characters carry stays with the one called so twice as often, or with neither", () => {
    const text = [
      'Nicholas Varga came in. "Hello," said Nicholas Varga. Nicholas sat down. Nicholas laughed, and Nicholas ate. "More," said Nicholas.',
      'Nicholas Brandt came in. "Good day," said Nicholas Brandt. Nicholas Brandt sat by the fire.',
      'Then Nicholas Brandt rose. "I go," said Nicholas. Nicholas went out. "Wait," said Nicholas Varga.',
    ].join("\n\n");
    const list = listOf(text);
    const carriers = list.filter((c) => c.aliases.includes("Nicholas"));
    expect(carriers.length).toBeLessThanOrEqual(1);
  });
  test("a given name is nobody's alias when another character goes by its familiar form more often: Kitty is a Catherine too", () => {
    const text = [
      'Lady Catherine Vane came to dinner. "Sit," said Lady Catherine. Catherine, her friends said, was proud. Lady Catherine ate little.',
      'Kitty laughed. "Oh, Kitty," said her sister. Kitty coughed, and Kitty ran out. "I am Kitty," said Kitty.',
      'Later Lady Catherine left, and Kitty came back. "Gone?" said Kitty. Kitty sat down.',
    ].join("\n\n");
    const list = listOf(text);
    expect(namesOf(list, "Lady Catherine")).not.toContain("Catherine");
  });
});

describe("a collection of stories", () => {
  /** A story in which the detective, his friend and the story's own people speak; `guests` are [name, lines]. */
  const story = (heading: string, guests: [string, number][]) => [
    heading,
    '"Come in," said Tobias. "Sit down," said Mr. Quill. Tobias lit his pipe, and Mr. Quill waited.',
    ...guests.flatMap(([name, lines]) =>
      Array.from({ length: lines }, (_, k) => `"It was the ${k + 1}th night," said ${name}. Tobias looked at ${name}, and ${name} went on.`),
    ),
    '"Thank you," said Tobias. "Good night," said Mr. Quill. Tobias smiled at Mr. Quill.',
    "The rain fell on the roofs of the town all that night.",
    "In the morning the streets were wet and grey.",
    "Nobody came to the door after that.",
  ];
  const text = [
    "THE CASES OF TOBIAS",
    ...story("I. THE MILL", [["Clara", 9], ["Ashdown", 8], ["Marsh", 7]]),
    ...story("II. THE LANTERN", [["Fenwick", 4]]),
    ...story("III. THE DOOR", [["Harrow", 4]]),
  ].join("\n\n");

  test("the cap keeps each story's leading speakers ahead of a third person from a longer story", () => {
    const names = select(text, 6).map((c) => c.name);
    expect(names).toHaveLength(6);
    expect(names).toEqual(expect.arrayContaining(["Tobias", "Mr. Quill", "Clara", "Ashdown", "Fenwick", "Harrow"]));
  });

  test("the default cap grows to hold a collection's recurring cast and every story's leads", () => {
    const guests = ["Abbot", "Brandon", "Corwin", "Dunstan", "Ellery", "Farrow", "Garland", "Hollis", "Ingram", "Jessop", "Kendal", "Lowther"];
    const numerals = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"];
    const collection = guests.flatMap((g, k) => story(`${numerals[k]}. THE CASE OF ${g.toUpperCase()}`, [[g, 3 + (k % 3)], [`${g}ley`, 2]])).join("\n\n");
    const names = select(collection).map((c) => c.name);
    expect(names).toEqual(expect.arrayContaining(["Tobias", "Mr. Quill", ...guests, ...guests.map((g) => `${g}ley`)]));
  });

  test("a speaker known only by a description is no story's lead: the cap keeps the story's named people", () => {
    const withSalesman = [
      "THE CASES OF TOBIAS",
      ...story("I. THE MILL", [["Clara", 9], ["Ashdown", 8], ["Marsh", 7]]),
      ...story("II. THE LANTERN", [["Fenwick", 4], ["the salesman", 6], ["Pardoe", 3]]),
      ...story("III. THE DOOR", [["Harrow", 4]]),
    ].join("\n\n");
    const names = select(withSalesman, 7).map((c) => c.name.toLowerCase());
    expect(names).toEqual(expect.arrayContaining(["fenwick", "pardoe", "harrow"]));
    expect(names).not.toContain("the salesman");
  });

  test("a story's leads are ranked by the times it names them, not by the pronouns resolved to them", () => {
    const dora = 'Dora came to the door. "Is he in?" said Dora. She took off her hat. She sat by the fire. She looked at the clock. She warmed her hands. She sighed. She stood up. She looked out. She sat down again. She waited. She slept.';
    const withDora = [
      "THE CASES OF TOBIAS",
      ...story("I. THE MILL", [["Clara", 9], ["Ashdown", 8], ["Marsh", 7]]),
      ...story("II. THE LANTERN", [["Fenwick", 4], ["Pardoe", 2]]).flatMap((p, k) => (k === 2 ? [dora, p] : [p])),
      ...story("III. THE DOOR", [["Harrow", 4]]),
    ].join("\n\n");
    const names = select(withDora, 7).map((c) => c.name);
    expect(names).toContain("Pardoe");
    expect(names).not.toContain("Dora");
  });

  test("the same text without story headings is ranked by importance alone", () => {
    const novel = text.replace(/^[IV]+\. .*$/gm, "");
    const names = select(novel, 6).map((c) => c.name);
    expect(names).toContain("Marsh");
  });
});

/** The sample of lines (`quotes`) or every line (`lines`) selection gives the character whose name holds `name`. */
const linesIn = (text: string, name: string, field: "quotes" | "lines") => select(text).find((c) => c.name.includes(name))?.[field] ?? [];

describe("the lines a character is given", () => {
  const text = [
    "Mrs. Quill came into the shop. Mrs. Quill was cross, and Mrs. Quill was wet. Tilda Brann looked up from the clock.",
    "“What does Mrs. Quill mean,” said Tilda to the boy, “by bringing a wet clock to a dry shop?”",
    "“It has stopped again,” said Mrs. Quill. “It stops at four. Every day at four.”",
    "“Then it wants oil,” Tilda said. “Leave it with me.”",
    "Tilda turned the key. “My love, you must not fret so,” replied her aunt from the door.",
    "Tilda smiled at Mrs. Quill and at her aunt. Tilda was patient. Tilda Brann wound the clock.",
  ].join("\n\n");
  const lines = (name: string) => linesIn(text, name, "quotes");

  test("joins the pieces of a line split by its dialogue tag, without the tag", () => {
    expect(lines("Tilda")).toContain("What does Mrs. Quill mean, by bringing a wet clock to a dry shop?");
    expect(lines("Quill")).toContain("It has stopped again. It stops at four. Every day at four.");
    expect(lines("Tilda").join(" ")).not.toMatch(/\bsaid\b/);
  });

  test("gives a line whose tag names no one (“replied her aunt”) to nobody", () => {
    expect(select(text).flatMap((c) => c.quotes)).not.toContain("My love, you must not fret so,");
  });
  test("keeps the lines of a character the book calls by a description (“said the stranger”)", () => {
    const story = [
      "The stranger came in from the rain. The stranger sat by the stove, and the stranger said nothing for an hour.",
      "“Where am I?” asked the stranger.",
      "“On Gull Rock,” said Mara. Mara lit the lamp.",
      "“Every sailor has stood in a lamp room,” said the stranger.",
    ].join("\n\n");
    expect(select(story).find((c) => /stranger/i.test(c.name))?.quotes).toEqual(["Where am I?", "Every sailor has stood in a lamp room,"]);
  });

  const scene = [
    "Mr. Vance came to the gate. Mr. Vance was tired. Nora Hale was at the window, and Nora saw him.",
    "At length Mr. Vance, drawing near Nora, spoke, and in a low voice said to her:",
    "“The river is rising, and the bridge will not hold till morning.”",
    "“Then we must cross tonight,” said Nora.",
    "Nora nodded. Mr. Vance went first, and Nora went after him.",
  ].join("\n\n");

  test("takes a name leading the sentence that introduces the line, from the paragraph before, as its tag: those named between after a preposition aside", () => {
    expect(linesIn(scene, "Vance", "lines")).toContain("The river is rising, and the bridge will not hold till morning.");
  });
});

test("a word the narration quotes after a line in the same paragraph is not the line going on", () => {
  const text = [
    "Mr. Vance came to the gate. Mr. Vance was tired. Nora Hale was at the window, and Nora saw him.",
    "To every question Mr. Vance replied: “Yes, yes, I agree,” and with a tired smile he went in, while the others led him along the passages and through the hall and up the stairs to the room where the lodge sat, and as they went he was spoken of now as the “Seeker,” now as the “Pilgrim.”",
    "“Then we must cross tonight,” said Nora. Nora took her shawl.",
  ].join("\n\n");
  expect(linesIn(text, "Vance", "lines").join(" ")).not.toMatch(/Seeker|Pilgrim/);
});

describe("a long speech as lines", () => {
  test.each([
    ["a short line stays whole", "Yes, almost every day.", 300, ["Yes, almost every day."]],
    ["sentences are packed up to the bound", "One. Two. Three.", 10, ["One. Two.", "Three."]],
    ["a full stop after a title ends no sentence", "I saw Mr. Hale. He was out.", 16, ["I saw Mr. Hale.", "He was out."]],
    ["a sentence longer than the bound is clipped at a word", "The river rose and rose and rose.", 20, ["The river rose and…"]],
  ])("%s", (_, text, max, expected) => {
    expect(speechPieces(text, max)).toEqual(expected);
  });
});

test("a long speech is never cut inside a quotation it holds", () => {
  const speech = "He said to me: ‘I showed them the path. They did not follow it.’ I do not know how far he was right.";
  expect(speechPieces(speech, 70)).toEqual(["He said to me: ‘I showed them the path. They did not follow it.’", "I do not know how far he was right."]);
});
