import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseBookNlp } from "../../ingest/nlp/booknlp-files.ts";
import { toCharacterList, type CharacterSummary } from "../../ingest/nlp/character-list.ts";
import { analyze, runBookNlp, writeBookNlp } from "../../ingest/nlp/engine.ts";
import { isVocative } from "../../ingest/nlp/character-scores.ts";
import { detectConvention, findQuotes } from "../../ingest/nlp/quotes.ts";
import { tokenize } from "../../ingest/nlp/tokenizer.ts";
import { ENTITIES_HEADER, QUOTES_HEADER, renderTokenPieces, SUPERSENSE_HEADER, Tags, TOKENS_HEADER } from "../../ingest/nlp/writer.ts";

// Every passage here is written for these tests.

/** Runs the engine and reads its files back the way the pipeline does. */
function read(text: string) {
  const { files, analysis } = runBookNlp(text);
  const parsed = parseBookNlp(files);
  const characters = toCharacterList(parsed, { minMentions: 0 });
  const quotes = parsed.quotes.map((q) => ({ text: q.quote, speaker: q.charId }));
  /** Character ids of the given names, to compare with quote speakers. */
  const ids = (...names: string[]) => names.map((n) => character(characters, n).id);
  return { files, analysis, parsed, characters, quotes, speakers: quotes.map((q) => q.speaker), ids };
}

function character(list: CharacterSummary[], name: string): CharacterSummary {
  const c = list.find((x) => x.name === name || x.aliases.includes(name));
  if (!c) throw new Error(`no character named ${name} in ${list.map((x) => x.name).join(", ")}`);
  return c;
}

/** The characters the engine gives the mentions written exactly as `surface` (one for a name it settles). */
function clustersOf(text: string): (surface: string) => number[] {
  const { tok, names } = analyze(text);
  return (surface) => [...new Set(names.filter((m) => tok.text.slice(m.start, m.end + 1).join(" ") === surface).map((m) => m.char))];
}

const quoted = (text: string) => findQuotes(tokenize(text));
const quoteTexts = (text: string) => {
  const tok = tokenize(text);
  return findQuotes(tok).quotes.map((q) => text.slice(tok.start[q.start], tok.end[q.end]));
};

describe("name clustering", () => {
  const text = [
    "Clara Whitcombe walked into the orchard before dawn. The grass was wet, and Clara had not slept.",
    "Later that morning Miss Clara Whitcombe wrote a letter to her cousin, and Clara sealed it herself.",
    "Mr. Ashdown arrived at noon, and Mrs. Ashdown came soon after him. Mr. Ashdown sat down by the window while Mrs. Ashdown poured the tea, and he thanked her.",
    "Then Mrs. Ashdown asked for Clara, and Mr. Ashdown said that he had seen Miss Whitcombe in the orchard.",
  ].join("\n\n");

  test("a first name, a full name and a titled full name are one character", () => {
    const { characters } = read(text);
    const clara = character(characters, "Clara Whitcombe");
    expect([clara.name, ...clara.aliases]).toEqual(expect.arrayContaining(["Clara", "Clara Whitcombe", "Miss Clara Whitcombe"]));
    expect(clara.gender).toBe("female");
  });

  test("Mr. and Mrs. with one surname are two characters of different genders", () => {
    const { characters } = read(text);
    const mr = character(characters, "Mr. Ashdown");
    const mrs = character(characters, "Mrs. Ashdown");
    expect(mr.id).not.toBe(mrs.id);
    expect(mr.gender).toBe("male");
    expect(mrs.gender).toBe("female");
  });

  test("a familiar form joins the given name it comes from, unless that person is rarely called by it", () => {
    const t = [
      "Elizabeth Marsh came down early. Elizabeth was always early, and she liked the quiet; Elizabeth read by the window until Elizabeth heard the bell.",
      '"Good morning, Lizzy," said Mr. Marsh. Lizzy smiled at him.',
      "Lady Catherine Vane arrived at noon, and Lady Catherine was never early. Kitty, the maid, took her cloak, and Kitty curtsied. Kitty was shy, and she blushed.",
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Lizzy").id).toBe(character(characters, "Elizabeth Marsh").id);
    expect(character(characters, "Kitty").id).not.toBe(character(characters, "Lady Catherine").id);
  });

  test.each([
    [
      "a familiar full name is the man the book names plainly in full, not his son of the bare familiar name",
      [
        "Thomas Gradley was a man of facts. Thomas Gradley kept a school, and his son Tom hated it. Tom sulked by the fire.",
        '"Now, Tom Gradley," said Mr. Marsh to the father, "you are too hard on the boy." Tom Gradley frowned. Tom ran out, and Tom did not come back.',
      ].join("\n\n"),
      [["Tom Gradley", "Thomas Gradley"]],
      [["Tom", "Thomas Gradley"]],
    ],
    [
      "a familiar full name is not the man the book names only with a title",
      [
        "Sir Thomas Vane came home from the colonies. Sir Thomas was stern, and Sir Thomas spoke little.",
        "His son Tom Vane was idle. Tom laughed at everything, and Tom rode out every morning. Tom Vane owed money.",
      ].join("\n\n"),
      [["Tom Vane", "Tom"]],
      [["Tom Vane", "Sir Thomas"]],
    ],
  ])("%s", (_name, t, same, apart) => {
    const { characters } = read(t);
    for (const [a, b] of same) expect(character(characters, a!).id).toBe(character(characters, b!).id);
    for (const [a, b] of apart) expect(character(characters, a!).id).not.toBe(character(characters, b!).id);
  });

  test("'Miss' with a given name joins the one person of that given name", () => {
    const t = "Lydia Marsh laughed. Miss Lydia Marsh was the youngest, and she laughed at everything. Lydia ran out. Later Miss Lydia came back, and Lydia sat down.";
    const { characters } = read(t);
    expect(character(characters, "Miss Lydia").id).toBe(character(characters, "Lydia Marsh").id);
    expect(character(characters, "Lydia").id).toBe(character(characters, "Lydia Marsh").id);
  });

  test("places after 'in' and before 'Street' are not characters", () => {
    const t = 'Tobias Fenwick lived in Harrowgate, where he kept a shop. Tobias walked down Marlow Street every day, and he was well liked in Harrowgate. "Good morning," said Tobias to everyone.';
    const { characters } = read(t);
    expect(characters.map((c) => c.aliases.concat(c.name)).flat().sort()).toEqual(["Tobias", "Tobias Fenwick"]);
  });

  test("an exclamation used as a name in dialogue tags is a name", () => {
    const t = '"Oh, bother," said Bah. Bah sat down on the log. "Bother," said Bah again, and Bah sighed. "Hullo, Bah," said Tobias. Bah looked up.';
    const { characters } = read(t);
    expect(characters.map((c) => c.name)).toContain("Bah");
  });

  test("a hyphenated name with lower-case words inside is one name", () => {
    const t = 'Later Tobias-the-Brave came home, and he sat down. "Home at last," said Tobias-the-Brave. At dawn Brave woke up, and so Brave ate his supper.';
    const { characters } = read(t);
    expect(character(characters, "Tobias-the-Brave").id).toBe(character(characters, "Brave").id);
  });

  test("an exclamation that never tags a quote stays an exclamation", () => {
    const t = '"Bah!" said Tobias. Tobias frowned. "Bah, I say. Bah!" he said. Clara laughed at Tobias.';
    const { characters } = read(t);
    expect(characters.map((c) => c.name)).not.toContain("Bah");
  });

  test("a bare name far more common than the fuller names it fits takes them all in", () => {
    const t = [
      "Wren walked to the mill. Wren was small, and he hurried. Wren looked back twice. Wren whistled.",
      "The miller called him Brave Wren, as Wren came in. Wren sat down, and Wren ate.",
      "The others called him Clever Wren. Wren did not mind, and Wren laughed. Wren went home.",
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Brave Wren").id).toBe(character(characters, "Wren").id);
    expect(character(characters, "Clever Wren").id).toBe(character(characters, "Wren").id);
  });

  test.each([
    [
      "a description written as a proper name is a character, even with a gendered head",
      'The invisible ink had faded, and the invisible thread was gone. "Who is there?" said the Invisible Man. Walter Ashdown turned. "Only me," said Walter. "Stay where you are," said the Invisible Man. "I cannot see you," said Walter. "Nobody can," said the Invisible Man, and the Invisible Man laughed.',
      [["the Invisible Man"], ["Walter Ashdown"]],
    ],
    [
      "'Lady' before a surname is not the untitled daughter who shares it",
      'Lady Ashdown came down to dinner, and Maria Ashdown followed her mother. Lady Ashdown sat at the head of the table. "The soup is cold," said Lady Ashdown. "It is always cold," said Maria. Maria laughed, and Maria ate it anyway.',
      [["Lady Ashdown"], ["Maria Ashdown"]],
    ],
    [
      "'the Major' is the one major the book has named",
      'Major Pell rode in at noon, and Major Pell was tired. "Water," said Major Pell. Clara brought him a cup. The Major drank it, and the Major thanked her. "Another," said the Major.',
      [["Major Pell", "the Major"], ["Clara"]],
    ],
    [
      "a surname used bare far more often than with any title is one person under every title",
      'Dr. Kemp was at his desk. Kemp looked up when Mr. Kemp was announced by the maid, for Kemp had no visitors. Kemp sighed. Kemp rose. Kemp opened the door, and Kemp saw nobody. Kemp sat down again, and Kemp wrote. "Strange," said Kemp.',
      [["Kemp", "Dr. Kemp", "Mr. Kemp"]],
    ],
  ])("%s", (_label, t, groups) => {
    const { characters } = read(t);
    const ids = groups.map((names) => new Set(names.map((n) => character(characters, n).id)));
    for (const g of ids) expect(g.size).toBe(1);
    expect(new Set(ids.map((g) => [...g][0])).size).toBe(groups.length);
  });

  test("a pronoun two sentences on votes for whoever that sentence is about, not for an earlier name", () => {
    const t = [
      'Clara followed the White Rabbit down the hall. It was dark, and she was afraid. Clara called to the White Rabbit across the hall. Nobody answered, and she waited.',
      'The White Rabbit ran, and he vanished. "Oh dear," said the White Rabbit.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "the White Rabbit").gender).toBe("male");
  });

  test("'M.' after an initial is an initial, not Monsieur", () => {
    const t = 'A Winter Tale, by E. M. Forster\n\n"Good morning," said Tobias. Tobias smiled, and he sat down. "Good morning," said Clara, and she laughed.';
    const { characters } = read(t);
    expect(characters.map((c) => c.name).sort()).toEqual(["Clara", "Tobias"]);
  });

  test("a name that begins with a compass point, or a place word alone after 'the', is a place", () => {
    const t = [
      'Tobias sailed for the North Pole in May, and Tobias never came back from the North Pole. "Cold," said Tobias. Tobias wrote home from the North Pole, and he said the North Pole was white.',
      'The College had sent him, and the College paid. The East called him, said the College. Tobias loved the East, and the East was kind to him.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(characters.map((c) => c.name)).toEqual(["Tobias"]);
  });

  test("a fuller name whose given name is another person's stops a bare name from taking in its fuller names", () => {
    const t = [
      'The miller called him Clever Wren. Wren walked to the mill. Wren was small, and he hurried. Wren looked back twice. "Hello," said Wren. Wren sat down, and Wren ate. Wren slept. Wren woke, and Wren went out.',
      "Kate laughed. Kate sang, and Kate danced, and she was happy. At last Kate Wren went home.",
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Kate").id).not.toBe(character(characters, "Wren").id);
  });

  test("two given names side by side are two people, and a place before a given name is no part of it", () => {
    const t = [
      'Clara Whitcombe came in. "Good evening," said Clara. Clara sat down. Tobias Finch bowed. "Evening," said Tobias. Tobias Finch smiled, and Tobias Finch poured the wine.',
      "On seeing Clara Tobias grew animated. In Dover Tobias had missed her. Dover was cold that year, said Clara, and Dover was far.",
      'Tobias laughed. "Stay," said Tobias. Tobias looked at Clara, and Clara looked at Tobias.',
    ].join("\n\n");
    const { characters } = read(t);
    const everyName = characters.flatMap((c) => [c.name, ...c.aliases]);
    expect(everyName).not.toContain("Clara Tobias");
    expect(everyName).not.toContain("Dover Tobias");
    expect(characters.filter((c) => [c.name, ...c.aliases].includes("Tobias"))).toHaveLength(1);
    expect(character(characters, "Tobias").id).toBe(character(characters, "Tobias Finch").id);
  });

  test("a given name two families' full names share does not make them one person", () => {
    const t = [
      'Nicholas Whitcombe rode in. Nicholas Ashdown rode after him. "Wait," said Nicholas Whitcombe. "I am waiting," said Nicholas Ashdown.',
      ...Array.from({ length: 5 }, () => 'Nicholas laughed. "Again," said Nicholas. Nicholas sat down, and Nicholas slept.'),
      'Whitcombe woke. Whitcombe rose. Whitcombe went out. Ashdown woke. Ashdown rose. Ashdown went out.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Nicholas Whitcombe").id).not.toBe(character(characters, "Nicholas Ashdown").id);
  });

  test("'Miss <Surname>' is the one woman of that surname the book already calls Miss, not her mother", () => {
    const t = [
      "Miss Rosa Pell came down to the lake with her mother, Mrs. Pell. Rosa laughed at everything. Annie Pell, her mother's name, was written on the card.",
      '"You are very bold, Miss Pell," said Mr. Vance. "I am always bold," said Miss Pell. Rosa ran on ahead, and Mrs. Pell sighed.',
      '"Miss Pell will catch cold," said Mrs. Pell. Rosa did not hear. Miss Pell was already on the boat.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Miss Pell").id).toBe(character(characters, "Rosa").id);
    expect(character(characters, "Mrs. Pell").id).not.toBe(character(characters, "Rosa").id);
  });

  test("'Miss <Surname>' with no Miss of that name yet is the woman of that surname the book names far more than any other", () => {
    const t = [
      "Catherine Morland was plain as a child. Catherine loved cricket. Catherine ran, and Catherine climbed. Catherine grew up.",
      "Her sister Sarah Morland stayed at home. Catherine went to Bath. Catherine danced, and Catherine laughed.",
      '"You dance well, Miss Morland," said Henry. Miss Morland blushed. "Thank you," said Miss Morland. Catherine smiled.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Miss Morland").id).toBe(character(characters, "Catherine Morland").id);
  });

  test("a family's bare surname is the member the book names far more than the others, not whichever was named last", () => {
    const t = [
      "Count Edmund Harlow gave a dinner at his house in town. Count Harlow was fond of dinners.",
      "His son Tom Harlow was going to the war. Tom was eighteen. Tom loved his horse, and Tom loved his sister. Tom kissed his mother. Tom rode away.",
      "His little brother Ben Harlow cried at the gate. Ben was ten.",
      "Count Harlow wrote to him every week.",
      "At the front Harlow slept in a hut with the other officers. Harlow was cold. The colonel called for Harlow, and Harlow saddled his horse.",
    ].join("\n\n");
    const charOf = clustersOf(t);
    expect(charOf("Harlow")).toEqual(charOf("Tom Harlow"));
    expect(charOf("Count Harlow")).not.toEqual(charOf("Tom Harlow"));
  });

  test("'Miss de <Surname>' is a woman of her own, not the Lady of that surname", () => {
    const t = [
      "Lady Margaret de Vere lived at the castle. Lady Margaret was proud, and Lady Margaret was rich.",
      "Miss de Vere was her only child. Miss de Vere was pale, and Miss de Vere never spoke.",
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Miss de Vere").id).not.toBe(character(characters, "Lady Margaret de Vere").id);
  });

  test("a given name two people share, used pages after the first one was named, is the one named next", () => {
    const filler = Array.from({ length: 400 }, () => "The rain fell on the roofs of the town.").join(" ");
    const t = [
      "Mary Dunn came to see us in the spring. Mary wept, and Mary laughed. Miss Mary Dunn left at noon.",
      filler,
      "A new case began. Mary had gone out early. Mary came back at dusk, and Mary was pale. That was Miss Mary Ross, the banker's niece. Mary sat down.",
    ].join("\n\n");
    const { tok, names } = analyze(t);
    const ross = names.find((m) => tok.text.slice(m.start, m.end + 1).join(" ") === "Miss Mary Ross")!.char;
    const lastStory = names.filter((m) => m.start > tok.text.indexOf("case") && tok.text[m.start] === "Mary" && m.start === m.end);
    expect(lastStory.map((m) => m.char)).toEqual(lastStory.map(() => ross));
  });

  test("a given name the book writes in full only with a title is shown in full without it", () => {
    const t = [
      "Miss Ann Cole kept the shop. Ann sold bread, and Ann sold milk. Ann counted the money.",
      '"Good day," said Ann. Ann smiled at the baker, and Ann went home.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Ann").name).toBe("Ann Cole");
  });

  test("a bare surname is not the wife the book calls 'Mrs. <Surname>'", () => {
    const t = [
      "Mrs. Pike kept the house. Mrs. Pike was a silent woman, and Mrs. Pike baked.",
      "Pike was the groom. Pike drank, and Pike slept in the loft. Pike cursed the horses.",
    ].join("\n\n");
    const charOf = clustersOf(t);
    expect(charOf("Pike")).toHaveLength(1);
    expect(charOf("Pike")).not.toEqual(charOf("Mrs. Pike"));
  });

  test("an officer's rank and surname are not the man of that surname the book never gives a rank", () => {
    const t = [
      "John Pell came to see us. John Pell was a young man, and Pell was frightened.",
      "His uncle had been in the army. Colonel Pell had come home rich. Colonel Pell drank, and Colonel Pell died.",
      "Pell sat down. Pell told us the whole story, and Pell wept.",
    ].join("\n\n");
    const charOf = clustersOf(t);
    expect(charOf("Colonel Pell")).not.toEqual(charOf("John Pell"));
  });

  test("'Miss <Surname>' among sisters is the one the book never styles 'Miss' with her given name: by custom, the eldest", () => {
    const t = [
      "Maria Vane and Julia Vane were the daughters of the house. Maria was tall, and Maria was proud. Julia was merry, and Julia sang.",
      '"Good morning, Miss Julia," said the curate. Miss Julia Vane laughed at him. Maria walked on. Julia followed her.',
      '"You are early, Miss Vane," said the curate. Miss Vane bowed, and Maria did not smile. Julia waved. Miss Vane was to be married.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Miss Vane").id).toBe(character(characters, "Maria Vane").id);
    expect(character(characters, "Julia Vane").id).not.toBe(character(characters, "Maria Vane").id);
  });

  test("the narrator's 'Mr. <Surname>' is the father of a son the book calls by his given name", () => {
    const t = [
      "Ned Dorling came home on leave. Ned ran up the steps, and Ned kissed his sister. Ned was tall now, and Ned was brown.",
      "Mr. Dorling was out. Mr. Dorling came in late, smelling of the docks.",
      '"Ned is grown," said his sister. Ned laughed. Ned sat by the fire, and Ned told of the sea. Ned slept at last.',
      "In the morning Ned walked to the harbour. Ned looked at the ships, and Ned chose one. Ned went aboard.",
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Mr. Dorling").id).not.toBe(character(characters, "Ned Dorling").id);
  });

  test("'Mr. <Surname>' said to a man's face is that man, though the narrator calls him by his given name", () => {
    const t = [
      "Philip Corran walked to the station. Philip was late. Philip ran, and Philip caught the train.",
      '"Good morning, Mr. Corran," said Miss Abel. "Please, Mr. Corran, sit here." Philip sat. Philip smiled at her.',
      '"You are kind, Miss Abel," said Philip. "Not at all, Mr. Corran." Philip looked out of the window, and Philip slept.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Mr. Corran").id).toBe(character(characters, "Philip Corran").id);
  });

  test("two brothers who are both 'Mr. <Surname>' share its uses by who was just named, and no third man is made", () => {
    const t = [
      "Mr. Thaddeus Crane received us. Thaddeus Crane was a small man. \"Sit down,\" said Mr. Crane, and Mr. Crane poured the wine.",
      "Mr. Bartholomew Crane lived at the big house. Bartholomew Crane was his twin. Mr. Crane of the big house was a hard man.",
      "We went back to Thaddeus Crane. Mr. Crane was nervous. \"Come,\" said Mr. Crane, and we drove away.",
    ].join("\n\n");
    const { analysis } = read(t);
    const mrCrane = (full: string) => analysis.chars.find((c) => c.forms.has(full))?.forms.get("Mr. Crane");
    expect({ thaddeus: mrCrane("Thaddeus Crane"), bartholomew: mrCrane("Bartholomew Crane") }).toEqual({ thaddeus: 4, bartholomew: 1 });
    expect(analysis.chars.filter((c) => c.forms.size === 1 && c.forms.has("Mr. Crane"))).toEqual([]);
  });

  test("a given name two men share goes to the one whose family was just named, a woman's name by its bearer alone", () => {
    const t = [
      "Charles Hayward came to dinner. Charles Hayward was a curate, and Charles Hayward was shy. Charles talked of his parish.",
      "Charles Musgrave came in from shooting. Mrs. Musgrave, his mother, asked about the birds. Charles said there were none.",
      "Charles Hayward left early. The next morning Mrs. Musgrave wanted her son. Charles came at once, and Charles laughed.",
      "Louisa Musgrave had married young. Louisa Hayward visited her. Mrs. Musgrave spoke of the wedding. Louisa smiled.",
    ].join("\n\n");
    const { analysis } = read(t);
    const bare = (full: string) => analysis.chars.find((c) => c.forms.has(full))?.forms.get(full.split(" ")[0]!) ?? 0;
    expect({ hayward: bare("Charles Hayward"), musgrave: bare("Charles Musgrave") }).toEqual({ hayward: 1, musgrave: 3 });
    expect({ hayward: bare("Louisa Hayward"), musgrave: bare("Louisa Musgrave") }).toEqual({ hayward: 1, musgrave: 0 });
  });

  test("a surname with its particle ('Lord St. Clare') is the man whose full name ends on it", () => {
    const t = [
      'Lord Robert St. Clare called at noon. "I am ruined," said Lord Robert St. Clare.',
      '"Sit down," said Holt. Lord St. Clare sat. "My bride is gone," said Lord St. Clare, and Lord St. Clare wept.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Lord St. Clare").id).toBe(character(characters, "Lord Robert St. Clare").id);
  });

  test("a full name met once, late, does not take a given name the book has long used", () => {
    const t = [
      '"Mary is tiresome," said Anne. Mary sighed. Mary complained of her nerves, and Mary lay on the sofa.',
      "Mary wrote to her sister. Mary wanted company. Sir Walter read of Lady Mary Grierson in the paper.",
      '"I am so ill," said Mary. Mary rose, and Mary ate a large dinner.',
    ].join("\n\n");
    const { characters } = read(t);
    const mary = character(characters, "Mary");
    expect(mary.name).toBe("Mary");
    expect(mary.aliases).not.toContain("Lady Mary Grierson");
  });

  test("a full name met once, late, whose surname is a family of the book, is the given name's owner", () => {
    const t = [
      '"Jane is kind," said Mrs. Ashby. Jane smiled. Jane sewed by the fire, and Jane said nothing.',
      'Jane walked out. Jane was pretty. Mr. Ashby read the letter, and Kitty Ashby laughed. "Jane," said Kitty Ashby.',
      "The letter was for Miss Jane Ashby. Jane read it twice, and Jane wept.",
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Miss Jane Ashby").id).toBe(character(characters, "Jane").id);
  });

  test("a place run into a name is no part of it: 'from Brenna Halloran wrote' is Halloran, though Brenna is named more often than it is a place", () => {
    const t = [
      "General Halloran rode to Brenna with his men. The men rested in Brenna, and at Brenna they waited. They loved Brenna, they sang of Brenna, they left Brenna late, and they dreamt of Brenna.",
      "The king wrote, and from Brenna Halloran wrote to the king. Halloran was tired, and Halloran was old. \"We stay,\" said Halloran.",
    ].join("\n\n");
    const { analysis } = read(t);
    expect(analysis.chars.flatMap((c) => [...c.forms.keys()])).not.toContain("Brenna Halloran");
  });

  test("a name set in italics on its own is a play, a book or a ship, not a character, though a title opens it", () => {
    const t = [
      'Clara Whitcombe had seen _Lady Anne Grey_ twice in London. "It is a dull play," said Clara. Lady Anne Grey was a dull play, she thought, and she said so to Tobias Fenwick.',
      '"You liked _Lady Anne Grey_ well enough," said Tobias, and he laughed. The third act of Lady Anne Grey had made her cry.',
    ].join("\n\n");
    expect(read(t).characters.map((c) => c.name)).not.toContain("Lady Anne Grey");
    // a person's name in italics now and then, for stress, is still a person
    const stressed = 'Lady Anne Grey came in. "Good evening," said Lady Anne Grey. "It was _Lady Anne Grey_ who called," said Clara Whitcombe. Lady Anne Grey sat down, and she smiled. Lady Anne Grey stayed an hour.';
    expect(read(stressed).characters.map((c) => c.name)).toContain("Lady Anne Grey");
  });

  test("a month after 'the' and before a name is part of the name: the March Hare", () => {
    const t = 'The March Hare poured the tea. "More?" said the March Hare. Alice shook her head. "Then hush," said the March Hare, and the March Hare laughed. In March Alice went home.';
    const { characters } = read(t);
    expect(character(characters, "the March Hare").name).toBe("March Hare");
  });

  test("two ranks before one surname are one person, Mr. and a rank two: Countess and Madame Olenska, Major and Mr. Sholt", () => {
    const t = [
      'Countess Olenska came late to the opera. "Good evening," said Countess Olenska. Newland looked at Madame Olenska, and Madame Olenska smiled. "You are kind," said Madame Olenska.',
      'Major Sholt had died in India. Mr. Sholt, his son, kept the house. "Come in," said Mr. Sholt. Major Sholt\'s portrait hung above him.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Countess Olenska").id).toBe(character(characters, "Madame Olenska").id);
    expect(character(characters, "Major Sholt").id).not.toBe(character(characters, "Mr. Sholt").id);
  });

  test("'Mesdames' and 'Messrs.' before a surname name several people, none of them a character", () => {
    const t = 'Major Hale rode in. "Good day," said Major Hale. Mesdames Hale were at the club. Messrs. Hale and Dunn sold tea. Major Hale laughed.';
    const { analysis } = read(t);
    expect(analysis.chars.flatMap((c) => [...c.forms.keys()]).filter((n) => /Mesdames|Messrs/.test(n))).toEqual([]);
  });

  test("a description its exchanges keep calling by one name is that person", () => {
    const scene = [
      '"Come here, my dear," said the Jew.',
      '"What is it, Fagan?" asked the boy.',
      '"Nothing, nothing," said the Jew.',
      '"You lie, Fagan," said Nance.',
      '"Ah, Nance," said the Jew, and he laughed.',
    ].join("\n\n");
    const t = ["Fagan kept a house near the river. Fagan was old.", ...Array.from({ length: 4 }, () => scene), "Fagan went out. Fagan did not come back."].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "the Jew").id).toBe(character(characters, "Fagan").id);
  });

  test("a description that talks with a named person is not that person", () => {
    const scene = [
      '"Where are you?" said Kemble.',
      '"Here," said the Invisible Man.',
      '"I cannot see you, Kemble cannot see anyone," said Kemble.',
      '"Listen, Kemble," said the Invisible Man.',
      '"I am listening," said Kemble.',
    ].join("\n\n");
    const { characters } = read(Array.from({ length: 5 }, () => scene).join("\n\n"));
    expect(character(characters, "the Invisible Man").id).not.toBe(character(characters, "Kemble").id);
  });

  test("a description that speaks in every scene where one named person does, the two never answering each other, is that person", () => {
    const filler = Array.from({ length: 200 }, () => "The rain fell on the roofs of the town all night.").join(" ");
    // the urchin speaks in turns 1, 3 and (with `more`) 7 of a scene, Perrin in turn 5
    const scene = (opening: string, more = true) =>
      [
        opening,
        '"Where are you going?" said Walter.',
        '"Up the hill," said the urchin.',
        '"It is far too steep for you," said Edith.',
        '"It is not," said the urchin.',
        '"Stop arguing," said Walter.',
        '"I have been up it twice," said Perrin. He laughed.',
        '"Then go," said Edith.',
        ...(more ? ['"I will," said the urchin.'] : []),
      ].join("\n\n");
    const lonely = (opening: string) =>
      [opening, '"Who is there?" said Walter.', '"Only me," said the urchin.', '"Go home," said Edith.'].join("\n\n");
    const r = read([scene("A small urchin came along the path with a stick."), filler, scene("Perrin came back the next day. He was nine."), filler].join("\n\n"));
    expect([1, 3, 7, 9, 11, 15].map((q) => r.speakers[q])).toEqual(r.ids(...Array<string>(6).fill("Perrin")));
    const cases = [
      ["in one scene only", [scene("A small urchin came along the path with a stick."), scene("Perrin came back. He was nine.")]],
      ["in a scene without him", [scene("A small urchin came along the path."), filler, lonely("Edith went out.")]],
      ["tagged too few times", [scene("A small urchin came along the path.", false), filler, scene("Perrin came back. He was nine.", false)]],
    ] as const;
    for (const [, parts] of cases) {
      const apart = read(parts.join("\n\n"));
      expect(apart.speakers[1]).toBe(apart.ids("The urchin")[0]);
      expect(apart.ids("The urchin")).not.toEqual(apart.ids("Perrin"));
    }
  });

  test("'Master' before a surname is Mr.: 'Master Holmes' is Mr. Holmes, not someone new", () => {
    const t = [
      'Mr. Tobias Quill came in. "Sit down," said Mr. Quill. Quill lit his pipe. Quill waited.',
      '"A little nut for you to crack, Master Quill," said the stranger. Quill smiled. "We shall see," said Quill. Quill rose, and Quill went out.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(characters.filter((c) => [c.name, ...c.aliases].some((n) => n.endsWith("Quill")))).toHaveLength(1);
  });

  test("'the Lord' pages away from the one lord the book names is not him", () => {
    const filler = "The rain fell on the roofs of the town, and the river ran high under the bridge all night long.";
    const t = [
      '"I wish to the Lord that I had gone," said Tobias. "Thank the Lord you did not," said Clara.',
      ...Array.from({ length: 250 }, () => filler),
      'Lord Ashdown came in. "Good evening," said Lord Ashdown. The Lord sat down. "Wine," said the Lord.',
    ].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, "Lord Ashdown").aliases.map((a) => a.toLowerCase())).toContain("the lord");
    const lords = characters.filter((c) => [c.name, ...c.aliases].some((n) => n.toLowerCase() === "the lord"));
    expect(lords.map((c) => c.name)).toEqual(["Lord Ashdown"]);
    expect(characters.flatMap((c) => c.aliases).filter((a) => a.toLowerCase() === "the lord")).toHaveLength(1);
  });

  test("a nationality in the plural is a group, not a character; a surname that is a plural word is still a name", () => {
    const t = 'The Englishmen came at noon, and the Indians waited. Tobias watched the Englishmen. The Indians spoke to Tobias, and he answered them. "Welcome," said Tobias to the Indians. "Well, well," said Mr. Wells.';
    const { characters } = read(t);
    expect(characters.map((c) => c.name).sort()).toEqual(["Mr. Wells", "Tobias"]);
  });

  test("a street named after a titled person is a place, never an alias of that person", () => {
    const t = [
      'The King paced the room. "You must find it," said the King, and the King sat down. "I will," said Tobias.',
      'Tobias took a cab to King Edward Street, and waited in King Edward Street until dark. "Nothing," said Tobias. The King frowned, and the King said nothing.',
      'A girl ran past him towards Queen Anne Terrace. "Hurry, Edward," said the girl. Edward was her brother, and Edward hurried.',
    ].join("\n\n");
    const { characters } = read(t);
    const names = characters.flatMap((c) => [c.name, ...c.aliases]);
    expect(names).not.toContain("King Edward Street");
    expect(names).not.toContain("Queen Anne Terrace");
    expect(character(characters, "The King").aliases).toEqual([]);
    expect(character(characters, "Edward").id).not.toBe(character(characters, "The King").id);
  });

  test("the author, editor and transcriber credited in the text are never characters, and the author's given name still finds its character", () => {
    const t = [
      "The Orchard Letters",
      "by Jane Tobin",
      "Edited by Walter Crane, with notes. Transcriber: Nell Marsh and Peter Quill.",
      'Jane Ashdown walked into the orchard. "It is cold," said Jane. Jane shivered, and she went in.',
      '"Good morning, Jane," said Tobias. Tobias smiled at Jane, and Jane smiled back. "Good morning," said Jane.',
      "The letters were later praised by Miss Tobin in a preface, and Tobin signed it.",
    ].join("\n\n");
    const { characters } = read(t);
    const names = characters.flatMap((c) => [c.name, ...c.aliases]);
    for (const credited of ["Jane Tobin", "Tobin", "Miss Tobin", "Walter Crane", "Nell Marsh", "Peter Quill", "Transcriber"]) expect(names).not.toContain(credited);
    expect(character(characters, "Jane").id).toBe(character(characters, "Jane Ashdown").id);
    expect(characters).toHaveLength(2);
  });

  test("a name after 'by' in a sentence of the story, even after 'produced by', is still a character", () => {
    const t = '"Up," said Clara to Tobias, and she laughed. Then Tobias was woken by Clara. The noise was produced by Clara and Tobias.\n\nHe was saved by Clara';
    const { analysis } = read(t);
    expect(analysis.names.filter((m) => m.parts.join(" ") === "Clara")).toHaveLength(4);
  });

  test("after 'Mrs.' or 'Mr.' a word the book mostly writes in lower case is a surname", () => {
    const t = [
      "The house stood on a hill, and the hill was green. Beyond the hill ran a road over another hill.",
      '"Dear madam," cried Mrs. Hill, "the post has come." Clara Whitcombe took the letter from Mrs. Hill.',
    ].join("\n\n");
    const r = read(t);
    expect(character(r.characters, "Mrs. Hill").gender).toBe("female");
    expect(r.speakers[0]).toBe(r.ids("Mrs. Hill")[0]);
  });

  test("a capitalised word that is usually lower case is not a name", () => {
    const t = "Tobias went to the market. Yesterday he bought bread, and yesterday the baker smiled. Yesterday was cold. Tobias said nothing.";
    const { characters } = read(t);
    expect(characters.map((c) => c.name)).not.toContain("Yesterday");
  });

  test.each([
    ["known to his friends as", "Tobias Fenwick, known to his friends as Toby Wren, came down the stairs.", "Tobias Fenwick", "Toby Wren"],
    ["or … as she was called", "Margaret Ashdown, or Peggy as she was called, sat by the fire.", "Margaret Ashdown", "Peggy"],
    ["or … for short", "Bartholomew Crane, or Barty for short, fell asleep.", "Bartholomew Crane", "Barty"],
    ["commonly called", "Ignatius Hale, commonly called Nat, was a miller.", "Ignatius Hale", "Nat"],
  ])("a name the text says someone goes by ('%s') is that person", (_, intro, full, other) => {
    const [given] = full.split(" ");
    const t = [intro, `${given} was tall. ${other} laughed. ${given} smiled.`, `"Come," said ${other}. ${other} went out and ${given} followed.`].join("\n\n");
    const { characters } = read(t);
    expect(character(characters, full).id).toBe(character(characters, other).id);
  });

  const addressed = (together: boolean) =>
    [
      "Piero lived above the bakery. Piero was young, and he was proud.",
      "Mrs. Lane had written to Signor Vanni about the rooms. She waited for a week.",
      '"You are welcome, Signor Vanni," said Mrs. Lane. Piero bowed low, and he smiled.',
      "The letter from Signor Vanni came on a Tuesday. It was short.",
      '"Sit down, Signor Vanni," said Clara. "Thank you," said Piero, and he sat.',
      "Nobody in the town had ever seen Signor Vanni in a hurry. The shops were shut.",
      '"Signor Vanni, will you stay?" asked Mrs. Lane. "Till Sunday," said Piero.',
      together ? "Signor Vanni walked home with Piero at dusk. It was cold." : "Everyone in the square knew Signor Vanni by sight. It was cold.",
      '"Good night, Signor Vanni," said Clara. Piero laughed.',
      "The rent was owed to Signor Vanni by Friday. Mrs. Lane paid it.",
      '"I shall tell Signor Vanni," said Clara. "Tell him," said Mrs. Lane.',
      "Piero was at the door. Piero had heard.",
    ].join("\n\n");

  test.each([
    ["is the man the narration calls by his given name", false],
    ["stays another man when the narration once names the two side by side", true],
  ])("a titled surname the others say, never beside a given name in the narration, %s", (_, together) => {
    const { characters } = read(addressed(together));
    const same = character(characters, "Signor Vanni").id === character(characters, "Piero").id;
    expect(same).toBe(!together);
  });

  test("two names side by side without a naming phrase, or with 'called' in its other sense, stay two people", () => {
    const t = "Tobias Fenwick, Toby Wren and Clara came down the stairs. Toby Wren laughed. Tobias Fenwick smiled. Clara, or Tobias, must go. Mrs. Ashdown, called Clara to her side.";
    const { characters } = read(t);
    expect(character(characters, "Tobias Fenwick").id).not.toBe(character(characters, "Toby Wren").id);
    expect(character(characters, "Clara").id).not.toBe(character(characters, "Tobias Fenwick").id);
    expect(character(characters, "Clara").id).not.toBe(character(characters, "Mrs. Ashdown").id);
  });
});

describe("quote conventions", () => {
  test.each([
    ["straight double quotes", '"I am going out," said Tobias. "Do not wait up."', "double", ['"I am going out,"', '"Do not wait up."']],
    ["curly double quotes", "\u201cI am going out,\u201d said Tobias. \u201cDo not wait up.\u201d", "double", ["\u201cI am going out,\u201d", "\u201cDo not wait up.\u201d"]],
    [
      "single quotes around apostrophes",
      "\u2018I don\u2019t mind,\u2019 said Tobias. \u2018The boys\u2019 coats are wet.\u2019",
      "single",
      ["\u2018I don\u2019t mind,\u2019", "\u2018The boys\u2019 coats are wet.\u2019"],
    ],
    ["em-dash dialogue", "\u2014I am going out \u2014 said Tobias \u2014 do not wait up.", "dash", ["\u2014I am going out", "\u2014 do not wait up."]],
  ])("%s are found", (_label, text, convention, expected) => {
    expect(detectConvention(tokenize(text))).toBe(convention as "double" | "single" | "dash");
    expect(quoteTexts(text)).toEqual(expected);
  });

  test("the dominant convention wins: stray single quotes in a double-quoted book are not quotes", () => {
    const text = '"Come in," said Clara. "It is only the wind."\n\nThe sign read \u2018Closed\u2019 in faded paint.';
    expect(quoted(text).convention).toBe("double");
    expect(quoted(text).quotes).toHaveLength(2);
  });

  test("a quote nested in another stays inside the outer quote", () => {
    const text = "\"She told me, 'Never again,' and walked out,\" said Tobias.";
    expect(quoteTexts(text)).toEqual(["\"She told me, 'Never again,' and walked out,\""]);
    const r = read(text);
    expect(r.speakers).toEqual(r.ids("Tobias"));
  });

  test("a paragraph that leaves its quote open continues in the next, with the same speaker", () => {
    const text = [
      "Clara Whitcombe and Tobias Fenwick sat by the fire.",
      '"It began in the spring," said Clara. "The river rose and the mill flooded.',
      '"By summer nothing was left of it."',
      "Tobias nodded.",
    ].join("\n\n");
    const r = read(text);
    expect(r.quotes).toHaveLength(3);
    expect(r.analysis.scan.quotes[2]!.continuation).toBe(true);
    expect(r.speakers).toEqual(r.ids("Clara Whitcombe", "Clara Whitcombe", "Clara Whitcombe"));
  });

  test("an untagged story told over several paragraphs stays with its teller, whoever it names", () => {
    const text = [
      "Clara Whitcombe and Tobias Fenwick sat by the fire. Tobias poured the tea, and he waited. Clara thought of Silas Brand, and of what Silas had said to her.",
      '"Tell me how it happened," said Tobias.',
      '"It was long ago. I was a clerk then, and poor.',
      '"My old master, Silas Brand, was kind to me, and he taught me the trade.',
      '"But he died, and I was alone again."',
    ].join("\n\n");
    const r = read(text);
    expect(r.speakers).toEqual(r.ids("Tobias Fenwick", "Clara Whitcombe", "Clara Whitcombe", "Clara Whitcombe"));
  });
});

describe("speaker attribution", () => {
  // The intro's own quote comes first; each case checks the quotes after it.
  const intro = "Clara Whitcombe met Tobias Fenwick at the gate. Tobias was late, and he apologised. Clara laughed, and she took his arm.\n\n\"Shall we go?\" said Tobias.\n\nClara nodded.\n\n";
  // The exchange above, then a paragraph on the innkeeper and the passage under test.
  const atTheInn = (passage: string) => read(intro + "Mrs. Pell kept the inn, and she was kind to them.\n\n" + passage);

  test.each([
    ["said X after the quote", '"The gate is locked," said Tobias.', "Tobias Fenwick"],
    ["X said after the quote", '"The gate is locked," Clara said.', "Clara Whitcombe"],
    ["X replied with an adverb", '"The gate is locked," Tobias quietly replied.', "Tobias Fenwick"],
    ["a tag before the quote", 'Clara said, "The gate is locked."', "Clara Whitcombe"],
    ["a pronoun tag for the woman", '"The gate is locked," she said.', "Clara Whitcombe"],
    ["a pronoun tag for the man", '"The gate is locked," he answered.', "Tobias Fenwick"],
    ["a description that gives only a gender", '"The gate is locked," said the young man.', "Tobias Fenwick"],
    ["a description before the verb", '"The gate is locked," the young lady replied.', "Clara Whitcombe"],
    ["a less common speech verb", 'Clara looked at the gate. "It is open," contradicted Tobias.', "Tobias Fenwick"],
    ["any verb in -ed between the quote and a name", 'Clara looked at the gate. "It is open," wheezed Tobias.', "Tobias Fenwick"],
    ["not a name after 'declared that', the subject of what is reported", 'Clara looked at the gate, and she declared that Tobias had been right all along. "It is open."', "Clara Whitcombe"],
    ["not 'X replied that' after the quote, reported speech", 'Clara came up to the gate. "Is it locked?" Tobias replied that it was not, and she laughed.', "Clara Whitcombe"],
    ["he/she before the verb, not the one asked after it", 'Tobias looked at the gate. "Is it locked?" she asked Tobias.', "Clara Whitcombe"],
    ["'was X's answer' after the quote", 'Clara looked at the gate. "It is open," was Tobias\'s answer.', "Tobias Fenwick"],
    ["'was his only reply' after the quote", 'Clara looked at the gate. "It is open," was his only reply.', "Tobias Fenwick"],
    ["a speech verb in -ing", 'Clara looked at the gate, Tobias replying, "It is open."', "Tobias Fenwick"],
    ["a name after words that describe it", 'Clara looked at the gate. "It is open," said the weary Tobias.', "Tobias Fenwick"],
    ["a speech verb with its particle", 'Clara looked at the gate. "It is open," Tobias put in.', "Tobias Fenwick"],
    ["'the voice of X'", 'Clara looked at the gate. "It is open," called the voice of Tobias.', "Tobias Fenwick"],
    ["a subject set off from its verb by a phrase", 'Clara looked at the gate. Tobias, turning away from her, said, "It is open."', "Tobias Fenwick"],
    ["a subject whose clause goes on before 'saying'", 'Clara looked at the gate; but Tobias shook his head, saying, "It is open."', "Tobias Fenwick"],
    ["'X, who … said' after another person", 'Clara turned from the gate to Tobias, who said, "It is open."', "Tobias Fenwick"],
    ["'X, who … cried' after he/she", 'He was met at the gate by Clara, who, taking his hands, cried, "It is open."', "Clara Whitcombe"],
    ["'was X's explanation'", 'Clara looked at the gate. "It is open," was Tobias\'s explanation.', "Tobias Fenwick"],
    ["'X's reply was,' before the quote", 'Clara looked at the gate, and Tobias\'s reply was, "It is open."', "Tobias Fenwick"],
    ["'X's reproach of' before the quote", 'Clara looked at the gate, and heard Tobias\'s gentle reproach of "It is open."', "Tobias Fenwick"],
    ["'his declaration was' before the quote", 'Clara looked at the gate; Tobias stood beside her. His declaration was, "It is open."', "Tobias Fenwick"],
  ])("%s", (_label, line, speaker) => {
    const r = read(intro + line);
    expect(r.speakers.slice(1)).toEqual(r.ids(speaker));
  });

  describe("a he/she tag after a little narration is the one person of that gender in the exchange", () => {
    // The opening's turn is too far back to count as part of the exchange.
    const opening = [
      'Walter Brandt had gone to sea, and he had not written. Tobias Fenwick was quiet, and he kept to the path. "Come along," said Tobias to Clara Whitcombe.',
      Array.from({ length: 20 }, () => "The path ran on between the hedges.").join(" "),
    ].join("\n\n");
    const exchange = (tobias: string) =>
      [opening, '"How far is it?" said Clara.', tobias, '"Good," said Clara, thinking of Walter Brandt.'].join("\n\n") + "\n\n";
    test.each([
      ["his tagged turn", exchange('"Not far," said Tobias.'), "She stopped by the wall and looked at the old trees for a while.", "Tobias Fenwick"],
      ["his turn known only from turn order", exchange('"Not far."'), "She stopped by the wall and looked at the old trees for a while.", "Tobias Fenwick"],
      ["not when the narration names another man", exchange('"Not far," said Tobias.'), "She stopped by the wall. Walter Brandt came up the path behind them.", "Walter Brandt"],
    ])("%s", (_label, before, narration, speaker) => {
      const r = read(before + narration + '\n\n"They are older than the house," he said.');
      expect(r.speakers.at(-1)).toBe(r.ids(speaker)[0]);
    });
  });

  test.each([
    ["the answer to a question after a name is the speaker's own", '"And may I know your name?"', true],
    ["otherwise it calls someone", '"Who is at the door?"', false],
  ])("a turn that is only a name: %s", (_label, question, answers) => {
    const r = read(intro + `Walter Brandt came up to them, and he bowed.\n\n${question} asked Walter Brandt.\n\n"Clara Whitcombe."`);
    expect(r.speakers.at(-1) === r.ids("Clara Whitcombe")[0]).toBe(answers);
  });

  test.each([
    ["'met with Tobias' puts him in the scene", "As soon as she met with Tobias she told him the news.", "Tobias Fenwick"],
    ["'towards Tobias' puts him in the scene", "As soon as she came towards Tobias she told him the news.", "Tobias Fenwick"],
    ["'thought of Tobias' does not", "She sat alone and thought of Tobias, and of the news.", "Walter Brandt"],
  ])("who answers an untagged turn: %s", (_label, narration, speaker) => {
    const text = intro + ["Walter Brandt had come home from sea, and he wrote to Clara at once.", narration, '"Walter is home," said she.', '"Indeed!"'].join("\n\n");
    const r = read(text);
    expect(r.speakers.at(-1)).toBe(r.ids(speaker)[0]);
  });

  test.each([
    ["after ', and'", 'Clara said crossly, "It is locked," and Tobias said, "Then we climb."'],
    ["after a semicolon", 'Clara thought, "It is locked"; Tobias thought, "Then we climb."'],
  ])("a subject before its verb after a break opens the next quote's tag: %s", (_label, line) => {
    const r = read(intro + line);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Tobias Fenwick"));
  });

  test("'cried her mother' after a turn that calls a girl by name is that girl's mother", () => {
    const r = read(
      intro +
        'Mrs. Whitcombe and Mrs. Marsh sat by the fire with Lucy Marsh.\n\n"It is cold," said Lucy Marsh.\n\n"Clara, shut the door," cried her mother.',
    );
    expect(r.speakers.at(-1)).toBe(r.ids("Mrs. Whitcombe")[0]);
  });

  test.each([
    ["after a comma and 'and'", 'Clara looked away. He coughed, and said, "It is late."', "Tobias Fenwick"],
    ["not when someone else is named before the verb", 'Clara looked away. He coughed, and Clara said, "It is late."', "Clara Whitcombe"],
  ])("a sentence opening on he/she is the subject of its speech verb after 'and': %s", (_label, line, speaker) => {
    const r = read(intro + line);
    expect(r.speakers.at(-1)).toBe(r.ids(speaker)[0]);
  });

  test("a he/she tag whose only fitting person in mind spoke the paragraph before is that person, whatever the turn order", () => {
    const r = read(intro + ['"Walter, is that you?" called Clara.', '"No," said Tobias.', '"It is only me," he said.'].join("\n\n"));
    expect(r.speakers.at(-1)).toBe(r.ids("Tobias Fenwick")[0]);
  });

  test("'she added' right after her own turn keeps it, though turn order would hand it to the other woman", () => {
    const r = read(
      intro +
        "Mrs. Pell kept the inn, and she was kind to them.\n\n" +
        ['"Come in, both of you," said Mrs. Pell.', '"Thank you," said Tobias.', '"What a fire!" said Clara.', '"I have never been so cold," she added.'].join("\n\n"),
    );
    expect(r.speakers.at(-1)).toBe(r.ids("Clara Whitcombe")[0]);
  });

  test("a he/she tag after the turn of the one person of its gender in the exchange is that person, not one named before it", () => {
    const r = read(
      intro +
        ["Walter Brandt had gone down to the mill an hour before, and he had not come back.", '"Where is your brother?" asked Clara.', '"At the mill," said Tobias.', '"He will be back by noon, I should think," he said.'].join("\n\n"),
    );
    expect(r.speakers.at(-1)).toBe(r.ids("Tobias Fenwick")[0]);
  });

  test.each([
    ["the latest sentence to open on a woman", 'Clara sat by the fire, and Mrs. Pell sewed. Mrs. Pell looked up from her work. "It is late," said she.', "Mrs. Pell"],
    ["not a woman named inside the sentence", 'Clara sat by the fire. She looked up at Mrs. Pell. "It is late," said she.', "Clara"],
    ["the first woman named when no sentence opens on one", 'At the fire sat Clara and Mrs. Pell. "It is late," said she.', "Clara"],
  ])("a he/she tag goes on about the paragraph's latest sentence subject: %s", (_label, passage, speaker) => {
    const r = atTheInn(passage);
    expect(r.speakers.at(-1)).toBe(r.ids(speaker)[0]);
  });

  test("a she in narration after another woman's name written as an owner goes on about the woman before, and so does the next she-tag", () => {
    const r = atTheInn("Clara sat by the window.\n\nShe was reading Mrs. Pell's letter, and she smiled at it.\n\n\"It is a kind letter,\" she said.");
    expect(r.speakers.at(-1)).toBe(r.ids("Clara Whitcombe")[0]);
  });

  test("the narration after a turn's quote keeps in mind whom its she goes on about, as a narration paragraph does", () => {
    const r = atTheInn("\"The fire is low,\" said Tobias. Clara read Mrs. Pell's note by the lamp, and she smiled.\n\n\"It is a kind note,\" she said.");
    expect(r.speakers.at(-1)).toBe(r.ids("Clara Whitcombe")[0]);
  });

  test("the narration opening a turn's paragraph keeps in mind whom its she goes on about, as a narration paragraph does", () => {
    const r = atTheInn(
      [
        '"Come in," said Mrs. Pell.',
        '"Thank you," said Clara.',
        "They went in and sat down by the fire, and nobody spoke for a long while as the wind rattled the shutters of the old inn.",
        'Clara took up Mrs. Pell\'s shawl, and she wrapped it round her. "It is cold," said Tobias.',
        '"It is," she said.',
      ].join("\n\n"),
    );
    expect(r.speakers.at(-1)).toBe(r.ids("Clara Whitcombe")[0]);
  });

  test("a he/she tag may be someone the paragraph's quotes name two quotes further on, as in a letter read out", () => {
    const r = atTheInn(
      'Clara opened the letter by the fire. "It has come at last," said she, and she broke the seal with her thumb and spread the two thin pages out upon her knee. "Walter is well." She turned the page. "And he sends his love to Clara and to Tobias."',
    );
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Clara Whitcombe", "Clara Whitcombe"));
  });

  test.each([
    ["not the paragraph's subject", 'Mrs. Pell looked at Clara and smiled. "It is late," said the girl.', "Clara"],
    ["not the last woman named", '"Come in," said Mrs. Pell.\n\n"Thank you," said Tobias.\n\n"It is late," said the girl.', "Clara"],
    ["while 'said the woman' may be", 'Mrs. Pell looked at Clara and smiled. "It is late," said the woman.', "Mrs. Pell"],
  ])("'said the girl' is no one called Mrs.: %s", (_label, passage, speaker) => {
    const r = atTheInn(passage);
    expect(r.speakers.at(-1)).toBe(r.ids(speaker)[0]);
  });

  test("a noun tag read from recency skips a man the book never tags as speaking, named in passing", () => {
    const r = read(
      intro +
        [
          '"It is a fine evening," said Tobias.',
          "They walked on towards the church. Clara talked of the book by Mr. Henry Dobson that she had been reading, and of little else.",
          '"I have not read it," said the young man.',
        ].join("\n\n"),
    );
    expect(r.speakers.at(-1)).toBe(r.ids("Tobias Fenwick")[0]);
  });

  test("untagged turns alternate between the two speakers", () => {
    const text =
      intro +
      ['"Where have you been?" asked Clara.', '"At the mill," said Tobias.', '"All night?"', '"All night."', '"And what did you find there?"'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Tobias Fenwick", "Clara Whitcombe", "Tobias Fenwick", "Clara Whitcombe"));
  });

  test.each([
    ["after a long narration of what he did, the same man may go on", " He sat down heavily by the fire, pulled off his wet boots one after the other, and held his cold hands out to the flames for a long while.", "Tobias Fenwick"],
    ["straight after his turn, the other answers", " He sat down.", "Clara Whitcombe"],
  ])("who takes an untagged turn: %s", (_label, narration, speaker) => {
    const text =
      intro +
      ['"Where have you been?" asked Clara.', '"At the mill," said Tobias.' + narration, '"The wheel is broken, and the miller has gone to the town."', '"Then we shall have no flour," said Clara.'].join("\n\n");
    const r = read(text);
    expect(r.speakers[3]).toBe(r.ids(speaker)[0]);
  });

  test("a name used to address someone makes the other person the speaker", () => {
    const text = intro + ['"Tobias, will you fetch the lamp?"', '"At once," said Tobias.'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Tobias Fenwick"));
  });

  test("a he/she tag goes to the person of that gender the paragraph is about, not the last one it named", () => {
    const text = [
      intro,
      "Tobias Fenwick stood by the window, and his eyes followed Clara and Walter Ashdown down the lane. Recovering himself, he turned and said,",
      '"We should follow them."',
    ].join("");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Tobias Fenwick"));
  });

  test("turn-taking does not carry across a narration paragraph", () => {
    const text =
      intro +
      [
        '"Where have you been?" asked Clara.',
        '"At the mill," said Tobias.',
        "Walter Ashdown came through the gate with his dog, and Walter whistled to it.",
        '"Good evening to you both."',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Tobias Fenwick", "Walter Ashdown"));
  });

  test("a he/she tag goes to the woman the paragraph is about, not to one it names after a preposition", () => {
    const text = intro + 'Standing with Mrs. Pell by the window, Clara watched the lane. "The rain has stopped," she said.';
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe"));
  });

  test("an untagged quote goes to whoever its paragraph opens on, passing over a name after a preposition", () => {
    const text =
      intro + ["Mrs. Pell came out to the garden with a letter, and she smiled at Tobias.", 'From Mrs. Pell the letter passed to Clara, who laughed. "What a day it has been!"'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe"));
  });

  test("a he/she tag does not go to someone the quote talks about", () => {
    const text = intro + ["Walter Ashdown came in, and he sat down by the fire.", '"Walter always wins at cards," he said.'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Tobias Fenwick"));
  });

  test("a speaker who says who they are is that person, even untagged", () => {
    const text = intro + ["Walter Ashdown came in, and he sat down by the fire.", '"Good evening. I am Tobias Fenwick, and this is my gate."'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Tobias Fenwick"));
  });

  test("a turn right after someone's one-line action answers them, and they reply next", () => {
    const text =
      intro +
      [
        "Walter Ashdown sat by the fire, and he smoked.",
        '"Where have you been?" asked Clara.',
        '"At the mill," said Tobias.',
        "He shook his head.",
        '"What is the matter?"',
        '"Nothing at all."',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Tobias Fenwick", "Clara Whitcombe", "Tobias Fenwick"));
  });

  test("a he/she tag right after a turn that named its listener goes to that listener", () => {
    const text =
      intro +
      [
        "Walter Ashdown came in with Mr. Pell, and Mr. Pell sat down by the fire.",
        '"Are you staying, Tobias?" asked Walter.',
        '"Only for an hour," he said.',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Walter Ashdown", "Tobias Fenwick"));
  });

  test("an untagged turn belongs to whoever the reply to it names", () => {
    const text =
      intro +
      ["Walter Ashdown came in with Mr. Pell, and Mr. Pell sat down by the fire.", '"It is cold tonight."', '"Then sit closer, Walter," said Tobias.'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Walter Ashdown", "Tobias Fenwick"));
  });

  test.each([
    ["turning to someone", 'Clara turned to Walter, and Mr. Pell watched them. "You are late."'],
    ["a tag that says to whom", '"You are late," said she to Walter, and Mr. Pell watched them.'],
  ])("a turn the narration says was spoken to someone is answered by them: %s", (_label, line) => {
    const text = intro + ["Walter Ashdown came in with Mr. Pell, and Mr. Pell sat down by the fire.", line, '"The road was long."'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Walter Ashdown"));
  });

  test("whoever the speaker turns to after calling someone by name is the one who answers", () => {
    const text =
      intro +
      [
        "Walter Ashdown came in with Mr. Pell, and Mr. Pell sat down by the fire.",
        '"Walter," said Clara, "the lamp has gone out." Then, turning to Tobias, "Will you fetch the oil?"',
        '"At once."',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.at(-1)).toBe(r.ids("Tobias Fenwick")[0]!);
  });

  test("a title and surname called out name the sister in the scene, not the elder the name stands for", () => {
    const text = [
      "Ellen Ashdown and her sister Kitty Ashdown lived at the mill with their father. Miss Ashdown was the elder. Miss Ashdown kept the accounts, and Miss Kitty Ashdown kept the garden. Everyone in the village knew Miss Ashdown, and Ellen knew everyone. Ellen was clever, and Miss Ashdown was proud of it.",
      "One morning Ellen went to town with her father, and they stayed there all day.",
      "Mrs. Pell called at the mill that afternoon, and Kitty met her at the gate. Kitty showed Mrs. Pell the roses, and Mrs. Pell praised them. Then Kitty took Mrs. Pell to the orchard, where Mrs. Pell admired the pears, and Kitty picked some for her. Mrs. Pell thanked Kitty. Kitty led Mrs. Pell back to the house, and Mrs. Pell sat down by the window while Kitty made the tea. Mrs. Pell looked at the drawings on the wall, and Kitty brought the cups. Kitty poured, and Mrs. Pell took a cup from Kitty. Mrs. Pell smiled at Kitty, and Kitty smiled back.",
      '"Do you draw, Miss Ashdown?" asked Mrs. Pell.',
      '"A little."',
    ].join("\n\n");
    const r = read(text);
    expect(character(r.characters, "Miss Ashdown").id).toBe(r.ids("Ellen Ashdown")[0]!);
    expect(r.speakers).toEqual(r.ids("Mrs. Pell", "Kitty Ashdown"));
  });

  test("a reply to 'sir' is a man's, even when turn order points at a woman", () => {
    const text =
      intro + ["Mrs. Ashdown came to the gate.", '"Shall we go in?" said Mrs. Ashdown.', '"Is the gate locked, sir?" asked Clara.', '"It is."'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Mrs. Ashdown", "Clara Whitcombe", "Tobias Fenwick"));
  });

  test("a turn answered with 'sir' is a man's, though the narration before it last named a woman", () => {
    const text =
      intro +
      ["Tobias opened the gate, and Mrs. Ashdown came down the path to meet them with Mrs. Pell.", '"The house is ready for you."', '"Thank you, sir. We shall go in."'].join("\n\n");
    const r = read(text);
    expect(r.speakers[1]).toEqual(r.ids("Tobias Fenwick")[0]);
  });

  test("an untagged turn is not by whom its own narration has someone glance at", () => {
    const text =
      intro +
      ['"Good evening," said Walter Ashdown.', "By the fire sat Tobias and Walter, warming their hands.", '"Is it raining?" said Clara.', '"Only a little," with a glance at Walter.'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(2)).toEqual(r.ids("Clara Whitcombe", "Tobias Fenwick"));
  });

  test("a turn that says 'my husband' is a woman's, though turn order points at a man", () => {
    const text = intro + ["Mrs. Pell was at the inn door with Walter Ashdown when Tobias came up.", '"Good evening," said Tobias.', '"My husband has gone to the market."'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Tobias Fenwick", "Mrs. Pell"));
  });

  test("a 'he' in narration does not reach back past someone whose gender the book leaves open: it may mean them", () => {
    const text =
      intro +
      ['"Good day," said Pargeter. Pargeter sat down, and she smiled at Clara.', "Tobias went out to the yard, and Pargeter stood by the fire. He warmed his hands by it.", '"The fire is low."'].join("\n\n");
    const r = read(text);
    expect(r.speakers.at(-1)).toBe(r.ids("Pargeter")[0]!);
  });

  test("'the other answered', the tag before its verb, is read as 'said the other'", () => {
    const text =
      intro +
      [
        "Walter Ashdown came up the lane, and Clara waved to him.",
        '"Where have you been?" asked Walter.',
        '"At the mill, Clara," said Tobias.',
        '"All night?" the other answered.',
        '"Never mind, Clara," said Tobias.',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Walter Ashdown", "Tobias Fenwick", "Walter Ashdown", "Tobias Fenwick"));
  });

  test("'she added' goes on with whoever spoke last, though narration named another woman since", () => {
    const text =
      intro +
      [
        '"The river is high tonight," said Clara.',
        "Mrs. Pell came down the lane with a lantern, and Mrs. Pell waved to them.",
        '"And the bridge will be closed by morning," she added.',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Clara Whitcombe"));
  });

  test("a he/she tag does not go to the last person named when the next paragraph's tag names them as replying", () => {
    const text =
      intro + ["Clara walked down to the gate with Mrs. Pell.", '"It is colder than yesterday," she said.', '"Much colder," said Mrs. Pell.'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Mrs. Pell"));
  });

  test("turn order overrules a he/she tag read from whoever spoke last", () => {
    const text =
      intro +
      [
        "Mrs. Pell came out to the garden with a letter.",
        '"Who is it from?" asked Mrs. Pell.',
        '"From my brother," said Clara.',
        '"Is he well?"',
        '"Quite well. He has bought a farm."',
        '"A farm!" she cried. "Whatever for?"',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Mrs. Pell", "Clara Whitcombe", "Mrs. Pell", "Clara Whitcombe", "Mrs. Pell", "Mrs. Pell"));
  });

  test("an exchange is read as a whole: the names in its first and last turns set who speaks between, over a bystander named last", () => {
    const text =
      intro +
      [
        "Mrs. Pell came out to the garden with a letter, and Walter Ashdown followed her.",
        '"Is it from your brother, Clara?"',
        '"It is."',
        '"Is he well?"',
        '"Quite well."',
        '"And the farm?"',
        '"Sold, Mrs. Pell, last spring."',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Mrs. Pell", "Clara Whitcombe", "Mrs. Pell", "Clara Whitcombe", "Mrs. Pell", "Clara Whitcombe"));
  });

  test("an exchange whose tags name two people is theirs: an untagged turn between them does not go to a bystander named before it", () => {
    const text =
      intro +
      [
        "They went into the hall, where Walter Ashdown was sorting the post.",
        '"Is there a letter for me?" asked Clara.',
        '"There is one, from your aunt," said Tobias.',
        '"Oh, give it to me!"',
        '"Thank you," said Clara.',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Tobias Fenwick", "Clara Whitcombe", "Clara Whitcombe"));
  });

  test("a run-on quote whose next paragraph is tagged for someone else still leaves the exchange its speakers", () => {
    const text =
      intro + ['"Is the gate locked?" asked Clara.', '"It is," said Tobias. "And I have lost the key.', '"Then we must climb," said Clara.', '"Over the wall?"'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe", "Tobias Fenwick", "Tobias Fenwick", "Clara Whitcombe", "Tobias Fenwick"));
  });

  test("'his wife' is the woman who shares his surname, not merely the last woman mentioned", () => {
    const text = [
      "Mrs. Ashdown was sewing by the fire. Mr. Ashdown came in from the garden, and he sat down heavily. Clara Whitcombe was reading in the corner, and she did not look up.",
      '"The roses are finished," said Mr. Ashdown.',
      '"Then we shall have none for Sunday," said his wife.',
    ].join("\n\n");
    const r = read(text);
    expect(r.speakers).toEqual(r.ids("Mr. Ashdown", "Mrs. Ashdown"));
  });

  test("'his wife' answering a man is the wife of the man who spoke, not of the last man named", () => {
    const text = [
      "Mr. Ashdown and Mrs. Ashdown sat by the fire with Mr. Pell and Mrs. Pell.",
      '"The roses are finished," said Mr. Ashdown, looking at Mr. Pell.',
      '"Then we shall have none for Sunday," cried his wife.',
    ].join("\n\n");
    const r = read(text);
    expect(r.speakers).toEqual(r.ids("Mr. Ashdown", "Mrs. Ashdown"));
  });

  test("'her mother' of a girl known by her given name alone is the married woman lately in mind, not the last woman named", () => {
    const text = [
      "Mrs. Vane sat by the fire with her work. Kitty coughed, and Clara Whitcombe laughed at Kitty.",
      '"I cannot help it," said Kitty.',
      '"Then go upstairs," cried her mother.',
    ].join("\n\n");
    const r = read(text);
    expect(r.speakers).toEqual(r.ids("Kitty", "Mrs. Vane"));
  });

  test("an untagged turn goes to someone present in the narration, not to someone it names only after a preposition", () => {
    const text = intro + ["Clara sat by the fire with a long letter from Mrs. Pell.", '"Tobias, do listen to this."'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Clara Whitcombe"));
  });

  test("'said the other' is whichever of the two talking did not speak last, though the turn before named someone else", () => {
    const text =
      intro +
      [
        "Walter Ashdown came up the lane, and Clara waved to him.",
        '"Where have you been?" asked Walter.',
        '"At the mill, Clara," said Tobias.',
        '"All night?" said the other.',
        '"Never mind, Clara," said Tobias.',
      ].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Walter Ashdown", "Tobias Fenwick", "Walter Ashdown", "Tobias Fenwick"));
  });

  test("'said I.' at the end of a sentence is the first-person narrator, not an initial", () => {
    const text = [
      "I had not seen my brother for a year when I came home at last. I found him in the study with Walter Ashdown, and I sat down.",
      '"Sit down, Arthur," said Edmund Varley. "You look tired."',
      '"I am tired," I said. "The roads were bad, and I rode all night."',
      '"Nobody rides at night," said Walter Ashdown.',
      '"Then you must rest," said Edmund Varley.',
      '"The roads were worse last winter," said I.',
    ].join("\n\n");
    const r = read(text);
    expect(r.analysis.narrator).toBe(true);
    expect(r.speakers.at(-1)).toBe(0);
  });

  test("a name after a capitalised word that is never a name ('the Old Hare') is read as the tag", () => {
    const text = [
      "Clara Whitcombe sat with Hare and Tobias Fenwick at the table. Hare poured the tea, and Hare laughed.",
      '"Have some wine," said Tobias.',
      '"I see none," said Clara.',
      '"There is none," said the Old Hare.',
    ].join("\n\n");
    const r = read(text);
    expect(r.speakers).toEqual(r.ids("Tobias Fenwick", "Clara Whitcombe", "Hare"));
  });

  test.each([
    ["'he said,'", "Mrs. Pell looked up from her sewing at Clara. Walter Ashdown stood at the window, and Mrs. Pell watched him. Presently he said, without turning,"],
    ["a dash", "After a long pause, Walter Ashdown, who had watched Mrs. Pell at her sewing, presumed to say--"],
  ])("a paragraph of narration ending on %s introduces the quote that opens the next paragraph", (_, narration) => {
    const text = intro + [narration, '"The mill is burning."'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Walter Ashdown"));
  });

  test("a 'she replied' whose woman is nowhere in mind still keeps the turn from the men turn order points at", () => {
    const text = [
      "Tobias Fenwick and Walter Ashdown sat in the study. Tobias lit his pipe, and Walter read the paper.",
      '"Is the carriage ready?" said Tobias.',
      '"I think so," said Walter.',
      '"Then we must go," said Tobias.',
      '"Not yet," she replied.',
      '"Why not, Clara?" said Tobias.',
    ].join("\n\n");
    const r = read(text);
    expect(r.speakers[3]).toBe(r.ids("Clara")[0]);
  });

  test("narration that names its lead once and goes on with 'he' keeps him the most likely speaker over a woman named since", () => {
    const text = intro + ["Tobias walked down to the river. Clara had stayed behind at the house. He sat on the bank, and he watched the water.", '"The river is high tonight."'].join("\n\n");
    const r = read(text);
    expect(r.speakers.slice(1)).toEqual(r.ids("Tobias Fenwick"));
  });

  test("a description used in many tags becomes a character", () => {
    const text = [
      '"Who goes there?" said the lamplighter.',
      '"A friend," said Tobias Fenwick.',
      '"Friends carry lanterns," said the lamplighter.',
      '"Mine went out," said Tobias.',
      '"Then come and light it," said the lamplighter, and the lamplighter smiled.',
    ].join("\n\n");
    const r = read(text);
    expect(character(r.characters, "The lamplighter").name).toBe("The lamplighter");
    expect(r.speakers).toEqual(r.ids("The lamplighter", "Tobias Fenwick", "The lamplighter", "Tobias Fenwick", "The lamplighter"));
  });
});

describe("vocatives", () => {
  const vocative = (text: string, name: string) => {
    const tok = tokenize(text);
    const words = name.split(" ");
    const start = tok.text.findIndex((_, i) => words.every((w, k) => tok.text[i + k] === w));
    return isVocative(tok, { start, end: start + words.length - 1, inQuote: true });
  };
  test.each([
    ['"Oh, Jane, how could you?"', "Jane", true],
    ['"You are late, Mr. Small."', "Mr. Small", true],
    ['"My dear Clara, sit down."', "Clara", true],
    ['"Her daughter, Miss Vale, will come."', "Miss Vale", false],
    ['"His brother, Tom, is at sea."', "Tom", false],
  ])("%s addresses %s: %p", (text, name, expected) => {
    expect(vocative(text, name)).toBe(expected);
  });
});

describe("quotations inside quotations", () => {
  const t = [
    'Miss Ada Lamb came to see Mr. Quill. "Good morning," said Mr. Quill. "Good morning," said Miss Lamb. "Sit down," said Mr. Quill. Mr. Quill listened, and Miss Lamb told her story.',
    "\u201cI went to the house. Mr. Thorne met me at the gate, Mr. Quill. \u2018You are late,\u2019 said he. \u2018The train was slow,\u2019 I answered. \u2018Come in,\u2019 said Mrs. Thorne from the door.\u201d",
    "\u201cAnd then?\u201d said Mr. Quill.",
  ].join("\n\n");
  const { quotes, ids, parsed } = read(t);

  test("a tagged quotation inside someone's speech is the person its tag names, the teller's own 'I' hers", () => {
    const [thorne, mrsThorne] = ids("Mr. Thorne", "Mrs. Thorne");
    const inner = (words: string) => quotes.find((q) => q.text.startsWith("\u2018") && q.text.includes(words))?.speaker;
    expect(inner("You are late")).toBe(thorne);
    expect(inner("Come in")).toBe(mrsThorne);
    // "I answered" is the teller herself: her own line already holds it.
    expect(inner("The train was slow")).toBeUndefined();
  });

  test("the teller's speech keeps its speaker and the listener she calls by name is never 'he'", () => {
    const [lamb, quill] = ids("Miss Lamb", "Mr. Quill");
    expect(quotes.find((q) => q.text.includes("I went to the house"))?.speaker).toBe(lamb);
    expect(quotes.filter((q) => q.text.startsWith("\u2018")).map((q) => q.speaker)).not.toContain(quill);
    expect(parsed.quotes.length).toBe(7);
  });
});

describe("first-person narrator", () => {
  const text = [
    "I had not seen my brother for a year when I came home at last. I found him in the study, and I sat down.",
    '"Sit down, Arthur," said Edmund Varley. "You look tired."',
    '"I am tired," I said. "The roads were bad, and I rode all night."',
    '"Well, Arthur, what news from the city?"',
    "I told him everything I knew, and he listened.",
  ].join("\n\n");

  test("a book told in the first person has the narrator as character 0", () => {
    const { analysis, parsed } = read(text);
    expect(analysis.narrator).toBe(true);
    const tagged = parsed.quotes.find((q) => q.quote.startsWith('" I am tired'));
    expect(tagged?.charId).toBe(0);
  });

  test("the narrator takes the name others call them by", () => {
    const { characters } = read(text);
    const narrator = characters.find((c) => c.id === 0);
    expect(narrator?.name).toBe("Arthur");
    expect(character(characters, "Edmund Varley").id).not.toBe(0);
  });

  test("a tag that describes the speaker ('snarled the old convict') is never the narrator, whom turn order points at", () => {
    const told = [
      "I sat by the fire with Tobias Fenwick. I had known him for years, and I trusted him. I poured the wine. Walter Ashdown stood by the door, and I did not like him.",
      '"It is late," said I.',
      '"Too late," said Tobias.',
      '"Late!" snarled the old convict.',
    ].join("\n\n");
    const r = read(told);
    expect(r.analysis.narrator).toBe(true);
    expect(r.speakers[2]).toBe(r.ids("Walter Ashdown")[0]);
  });

  test("a third-person book has no narrator character", () => {
    const { analysis, parsed } = read('Clara Whitcombe opened the door. "Come in," said Clara.');
    expect(analysis.narrator).toBe(false);
    expect(parsed.entities.some((e) => e.coref === 0)).toBe(false);
  });
});

describe("output files", () => {
  test.each([
    ["an empty text", ""],
    ["a text with no dialogue", "The house stood empty. Nobody came, and the rain fell all winter."],
  ])("%s still gives every file with its header and a valid book", (_label, text) => {
    const { files } = runBookNlp(text);
    expect(files.tokens.split("\n")[0]).toBe(TOKENS_HEADER);
    expect(files.entities.split("\n")[0]).toBe(ENTITIES_HEADER);
    expect(files.quotes).toBe(QUOTES_HEADER + "\n");
    expect(files.supersense.split("\n")[0]).toBe(SUPERSENSE_HEADER);
    expect(JSON.parse(files.book)).toEqual({ characters: [] });
  });

  test("token offsets point at the token text, counted in characters as BookNLP does", () => {
    const text = "Ada said \u201cHi\u201d to \ud83d\ude00 Bo\u00e9 at noon.";
    const { parsed } = read(text);
    const codePoints = [...text];
    for (const t of parsed.tokens) expect(codePoints.slice(t.start, t.end).join("")).toBe(t.word);
    expect(parsed.tokens.map((t) => t.word)).toContain("Bo\u00e9");
  });

  test("tokens rows carry paragraph, sentence and in-quote flags", () => {
    const { parsed } = read('First line here.\n\n"Second," said Ada. Third one.');
    const byWord = new Map(parsed.tokens.map((t) => [t.word, t]));
    expect(byWord.get("First")!.paragraph).toBe(0);
    expect(byWord.get("Second")!.paragraph).toBe(1);
    expect(byWord.get("Second")!.inQuote).toBe(true);
    expect(byWord.get("said")!.inQuote).toBe(false);
    expect(byWord.get("Third")!.sentence).toBeGreaterThan(byWord.get("Second")!.sentence);
  });

  test("the book file lists each character's mentions and gender the way BookNLP does", () => {
    const text = 'Clara Whitcombe opened the door. She smiled. "Come in," said Clara. Clara was glad, and she laughed.';
    const { files } = runBookNlp(text);
    const book = JSON.parse(files.book) as { characters: { id: number; count: number; g: { argmax: string } | null; mentions: { proper: { c: number; n: string }[]; pronoun: { c: number; n: string }[] } }[] };
    const clara = book.characters[0]!;
    expect(clara.mentions.proper).toEqual(expect.arrayContaining([{ c: 2, n: "Clara" }, { c: 1, n: "Clara Whitcombe" }]));
    expect(clara.g?.argmax).toBe("she/her");
    expect(clara.count).toBe(clara.mentions.proper.reduce((a, m) => a + m.c, 0) + clara.mentions.pronoun.reduce((a, m) => a + m.c, 0));
  });
});

describe("writing the files", () => {
  const text = [
    "Zo\u00eb Marsh opened the door of the caf\u00e9. \u201cCome in,\u201d said Zo\u00eb, and she smiled \ud83d\ude00.",
    "Tobias Fenwick came in out of the rain. \u201cThank you,\u201d said Tobias. He sat down by the fire.",
    "The clock struck " + "eleven ".repeat(40).trim() + ".",
  ].join("\n\n");

  test("the files written to disk are byte for byte the files read in memory", () => {
    const dir = mkdtempSync(join(tmpdir(), "nlp-write-"));
    try {
      const { analysis, files } = runBookNlp(text);
      writeBookNlp(analysis, dir, "book");
      for (const ext of ["tokens", "entities", "quotes", "supersense", "book"] as const) {
        expect(readFileSync(join(dir, `book.${ext}`), "utf8")).toBe(files[ext]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a .tokens file handed out in small pieces breaks only at line ends, even around a line longer than a piece", () => {
    const long = `${text}\n\nThen ${"x".repeat(600)} ended it.`;
    const a = analyze(long);
    const pieces: string[] = [];
    renderTokenPieces(a, new Tags(a), (piece) => pieces.push(new TextDecoder().decode(piece)), 256);
    expect(pieces.length).toBeGreaterThan(10);
    for (const piece of pieces) expect(piece.endsWith("\n")).toBe(true);
    expect(pieces.join("")).toBe(runBookNlp(long).files.tokens);
  });
});

describe("tokens", () => {
  test("no token contains whitespace, whatever spaces the text uses", () => {
    const tok = tokenize("One\ttwo\r\nthree\u00a0four\u2003five\u3000six\u2028seven  \n\n eight\u000bnine");
    expect(tok.text).toEqual(["One", "two", "three", "four", "five", "six", "seven", "eight", "nine"]);
  });

  test("every token is the slice of the book it spans, and equal words share one word id", () => {
    // Enough distinct words to make the word table grow several times.
    const words = Array.from({ length: 40_000 }, (_, k) => `w${k.toString(36)}${k % 7 === 0 ? "\u00e9" : ""}`);
    const book = [...words, ...words.slice(0, 1000).reverse()].join(" ");
    const tok = tokenize(book);
    const idOf = new Map<string, number>();
    for (let i = 0; i < tok.count; i++) {
      expect(tok.text[i]).toBe(book.slice(tok.start[i], tok.end[i]));
      expect(tok.vocab[tok.word[i]!]).toBe(tok.text[i]!);
      const seen = idOf.get(tok.text[i]!);
      if (seen === undefined) idOf.set(tok.text[i]!, tok.word[i]!);
      else expect(tok.word[i]).toBe(seen);
    }
    expect(tok.vocab).toHaveLength(40_000);
    expect(tok.lower[0]).toBe(tok.vocabLower[tok.word[0]!]!);
  });
});
