import { describe, expect, test } from "bun:test";
import { buildDiscoveryMessages, buildExtractionMessages, buildPersonaMessages, parseDiscovery, parseProfile } from "../../common/prompt/character.ts";
import { CharacterProfile, type DiscoveryInput, type ExtractionInput, type PersonaInput } from "../../common/llm/prompt-format.ts";
import { countO200kTokens } from "../../common/token-count.ts";
import type { LlmPurpose, TokenUsage } from "../../common/llm/index.ts";
import { createOfflineLanguageModel } from "../../common/llm/offline.ts";
import { APPEARS_WITH, MAX_PERSONA_QUOTES, NOT_STATED } from "../../common/llm/offline-characters.ts";
import { OFFLINE_QUOTES_HEADING, personaQuotes } from "../../common/llm/offline-conversation.ts";
import { contentTerms } from "../../common/llm/offline-text.ts";
import { buildChatMessages, buildChatSystemPrompt } from "../../common/prompt/chat.ts";

const llm = createOfflineLanguageModel();
const extract = async (input: ExtractionInput) => parseProfile(await llm.complete(buildExtractionMessages(input), { purpose: "extract", json: true }));
const persona = (input: PersonaInput) => llm.complete(buildPersonaMessages(input), { purpose: "persona" });
const discover = async (input: DiscoveryInput) => parseDiscovery(await llm.complete(buildDiscoveryMessages(input), { purpose: "characters", json: true }));

// Original material written for these tests.
const BOOK = { title: "The Gullrock Light", author: "A. N. Writer" };
const MAREN: ExtractionInput = {
  book: BOOK,
  character: {
    name: "Maren Holt",
    aliases: ["Maren"],
    gender: "she/her",
    quotes: [
      "The lamp has not gone dark in forty winters.",
      "My dear brother, you smell of tar!",
      "Is the fog coming in already?",
      "My dear brother, the lamp will not light itself.",
      "Storms are honest. They tell you they are coming.",
      "Bring me the oil for the lamp.",
      "Is the fog coming in already?",
    ],
    mentionCount: 42,
    quoteCount: 7,
  },
  cooccurring: [
    { name: "Tobias", count: 12 },
    { name: "Mr. Quill", count: 7 },
    { name: "Maren", count: 3 },
    { name: "Edda Holt", count: 2 },
  ],
  passages: [
    "Maren watched her brother Tobias row out past the point into the fog.",
    "Mr. Quill tipped his hat to the keeper and went back to his ledger.",
    "Edda Holt, their mother, had kept the lamp before Maren, through the fog of the great storm.",
  ],
};
const SALMA: ExtractionInput = {
  book: { title: "خط", author: null },
  character: {
    name: "سلمیٰ",
    aliases: [],
    gender: null,
    quotes: ["کیا تم نے خط پڑھا؟", "خط میز پر رکھا ہے۔", "تم ہمیشہ دیر سے آتے ہو؟"],
    mentionCount: 9,
    quoteCount: 3,
  },
  cooccurring: [{ name: "احمد", count: 5 }],
  passages: ["سلمیٰ کا بھائی احمد لاہور گیا۔", "احمد نے خط لکھا۔"],
};

const words = (text: string) => text.toLowerCase().match(/[\p{L}\p{M}]+/gu) ?? [];

describe("offline profile (pass 1)", () => {
  test.each([
    ["an English character", MAREN],
    ["an Urdu character", SALMA],
    ["a character without lines", { ...MAREN, character: { ...MAREN.character, quotes: [], quoteCount: 0 } }],
  ])("answers a profile that validates against the schema, the same every time, for %s", async (_, input) => {
    const answer = await llm.complete(buildExtractionMessages(input), { purpose: "extract", json: true });
    expect(CharacterProfile.safeParse(JSON.parse(answer)).success).toBe(true);
    expect(await llm.complete(buildExtractionMessages(input), { purpose: "extract", json: true })).toBe(answer);
  });

  test("names only co-occurring characters as relationships, typed by the relation word next to the name", async () => {
    const profile = await extract(MAREN);
    expect(profile.relationships).toEqual([
      { name: "Tobias", type: "brother" },
      { name: "Mr. Quill", type: APPEARS_WITH },
      { name: "Edda Holt", type: "mother" },
    ]);
  });

  test.each([
    ["English", MAREN],
    ["Urdu", SALMA],
  ])("invents no relationship in %s: every name is co-occurring and every type is a word of the text or 'appears with'", async (_, input) => {
    const profile = await extract(input);
    const cooccurring = input.cooccurring.map((c) => c.name);
    const textWords = new Set(words([...input.character.quotes, ...input.passages].join(" ")));
    expect(profile.relationships.length).toBeGreaterThan(0);
    for (const { name, type } of profile.relationships) {
      expect(cooccurring).toContain(name);
      expect(name).not.toBe(input.character.name);
      if (type !== APPEARS_WITH) expect(textWords.has(type)).toBe(true);
    }
  });

  test("reads an Urdu relation word next to the name", async () => {
    expect((await extract(SALMA)).relationships).toEqual([{ name: "احمد", type: "بھائی" }]);
  });

  test("takes themes only from words that recur in the character's lines and passages, never from names", async () => {
    const profile = await extract(MAREN);
    // Compared as index terms: "storms" in a line and "storm" in a passage are one theme.
    const textTerms = contentTerms([...MAREN.character.quotes, ...MAREN.passages].join(" "));
    expect(profile.signatureThemes).toEqual(expect.arrayContaining(["lamp", "fog"]));
    for (const theme of profile.signatureThemes) {
      expect(textTerms.filter((t) => t === contentTerms(theme)[0]).length).toBeGreaterThanOrEqual(2);
      expect(["maren", "holt", "tobias", "quill", "edda"]).not.toContain(theme);
    }
  });

  test("describes the voice from the character's own lines: length, questions, recurring words and phrases, address", async () => {
    const { voice } = await extract(MAREN);
    expect(voice).toContain("Measured on 6 lines"); // the repeated line counts once
    expect(voice).toContain("median 8 words");
    expect(voice).toContain("1 of 6 ask a question and 1 of 6 exclaim");
    expect(voice).toContain('"lamp" (3)');
    expect(voice).toContain('"my dear brother" (2)');
    expect(voice).not.toContain('"my dear" (2), "my dear brother"');
    expect(voice).toContain('Address and courtesy words: "my dear" (2)');
  });

  test("says what it cannot know instead of inventing it", async () => {
    const profile = await extract(MAREN);
    expect(profile.psychology.startsWith(NOT_STATED)).toBe(true);
    expect(profile.psychology).toContain("names Maren Holt 42 times and gives 7 lines of speech");
    expect(profile.motivations).toEqual([NOT_STATED]);
    const silent = await extract({ ...MAREN, character: { ...MAREN.character, quotes: [] }, passages: [] });
    expect(silent.voice.startsWith(NOT_STATED)).toBe(true);
    expect(silent.signatureThemes).toHaveLength(1);
    expect(silent.signatureThemes[0]!.startsWith(NOT_STATED)).toBe(true);
  });
});

describe("offline persona (pass 2)", () => {
  const input = async (quotes = MAREN.character.quotes): Promise<PersonaInput> => ({
    book: BOOK,
    name: "Maren Holt",
    profile: await extract(MAREN),
    quotes,
  });

  test("writes a first-person prompt that lists every distinct real line under its own heading", async () => {
    const text = await persona(await input());
    expect(text.startsWith('I am Maren Holt, a character in "The Gullrock Light" by A. N. Writer.')).toBe(true);
    expect(text).toContain("Offline persona");
    expect(text).toContain(`\n${OFFLINE_QUOTES_HEADING}\n“The lamp has not gone dark in forty winters.”\n`);
    expect(personaQuotes(text)).toEqual([...new Set(MAREN.character.quotes)]);
  });

  test("carries the profile's known fields and leaves out the ones it does not know", async () => {
    const text = await persona(await input());
    expect(text).toContain("The people in my story: Tobias (brother), Mr. Quill (appears with), Edda Holt (mother).");
    expect(text).toContain("How I speak: Measured on 6 lines");
    expect(text).toMatch(/\nWhat I keep coming back to: lamp, .*fog/);
    expect(text).not.toContain(NOT_STATED);
  });

  test("keeps each line on one line and at most MAX_PERSONA_QUOTES of them", async () => {
    const many = Array.from({ length: MAX_PERSONA_QUOTES + 5 }, (_, i) => `Line ${i} about the lamp,\nwrapped over two lines.`);
    const quotes = personaQuotes(await persona(await input(many)));
    expect(quotes).toHaveLength(MAX_PERSONA_QUOTES);
    expect(quotes[0]).toBe("Line 0 about the lamp, wrapped over two lines.");
  });

  test("says the book gives no lines when there are none", async () => {
    const text = await persona(await input([]));
    expect(text).toContain("The book gives me no lines of my own.");
    expect(text).not.toContain(OFFLINE_QUOTES_HEADING);
  });

  test("gives the chat a persona whose lines it answers with", async () => {
    const system = buildChatSystemPrompt({ personaPrompt: await persona(await input()), passages: [] });
    const reply = await llm.complete(buildChatMessages(system, [], "Do you think the storms are honest?"), { purpose: "chat" });
    expect(reply).toBe("Storms are honest. They tell you they are coming.");
  });
});

describe("offline character discovery", () => {
  const urdu: DiscoveryInput = {
    book: { title: "خط", author: null },
    language: "ur",
    samples: [
      'احمد نے کہا: "میں کل لاہور جاؤں گا۔"\n\nسلمیٰ بولی: "تم ہمیشہ جلدی میں ہوتے ہو۔"',
      "احمد نے کہا کہ وہ واپس آئے گا۔\n\n“کیا تم نے خط پڑھا؟” سلمیٰ نے پوچھا۔\n\nاس نے کہا: \"نہیں۔\"\n\nماسٹر جی بولے: \"خاموش!\"",
    ],
  };

  test("finds Urdu speakers from the words before speech verbs, with the lines they speak", async () => {
    expect(await discover(urdu)).toEqual({
      characters: [
        { name: "احمد", aliases: [], quotes: ["میں کل لاہور جاؤں گا۔", "وہ واپس آئے گا۔"] },
        { name: "سلمیٰ", aliases: [], quotes: ["تم ہمیشہ جلدی میں ہوتے ہو۔", "کیا تم نے خط پڑھا؟"] },
      ],
    });
  });

  test("finds English speakers before and after speech verbs, titles included, pronouns ignored, with their quoted lines", async () => {
    const found = await discover({
      book: { title: "Tea", author: null },
      language: "en",
      samples: [
        '"More tea?" said the Hatter.\n\nAlice said, "No, thank you."\n\n"Then hush," said Mr. Thorne.',
        '"Why not?" asked the Hatter.\n\n‘I don’t know,’ said Alice, ‘I’m sure.’\n\n"Indeed," Mr. Thorne replied.\n\n"Tea," he said.\n\n"Once," said Bill.',
      ],
    });
    expect(found.characters).toEqual([
      { name: "Hatter", aliases: [], quotes: ["More tea?", "Why not?"] },
      { name: "Alice", aliases: [], quotes: ["No, thank you.", "I don’t know,"] },
      { name: "Mr. Thorne", aliases: [], quotes: ["Then hush,", "Indeed,"] },
    ]);
  });

  test("answers an empty list when no speaker is tagged", async () => {
    const found = await discover({ book: BOOK, language: "en", samples: ["The fog came in. The lamp was lit.", "بارش ہو رہی تھی۔"] });
    expect(found).toEqual({ characters: [] });
  });

  test("answers the same list every time", async () => {
    const messages = buildDiscoveryMessages(urdu);
    expect(await llm.complete(messages, { purpose: "characters" })).toBe(await llm.complete(messages, { purpose: "characters" }));
  });
});

test.each<[LlmPurpose, ReturnType<typeof buildExtractionMessages>]>([
  ["extract", buildExtractionMessages(MAREN)],
  ["characters", buildDiscoveryMessages({ book: BOOK, language: "en", samples: ['"Hush," said Alice.'] })],
])("reports the o200k tokens of a %s request under that purpose", async (purpose, messages) => {
  const usage: [LlmPurpose, TokenUsage][] = [];
  const answer = await createOfflineLanguageModel({ onUsage: (p, u) => usage.push([p, u]) }).complete(messages, { purpose });
  expect(usage).toEqual([[purpose, { promptTokens: messages.reduce((s, m) => s + countO200kTokens(m.content), 0), completionTokens: countO200kTokens(answer) }]]);
});
