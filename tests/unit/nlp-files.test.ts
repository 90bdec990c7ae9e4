import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import {
  detokenize,
  parseBook,
  parseBookNlp,
  parseEntities,
  parseQuotes,
  parseSupersense,
  parseTokens,
  stripQuoteMarks,
  type BookNlpFileTexts,
} from "../../ingest/nlp/booknlp-files.ts";
import { DEFAULT_MIN_MENTIONS, toCharacterList } from "../../ingest/nlp/character-list.ts";
import { runBookNlp } from "../../ingest/nlp/engine.ts";

const FIXTURES = resolve(import.meta.dirname, "..", "fixtures", "booknlp");
const fixture = (name: string) => readFileSync(join(FIXTURES, name), "utf8");

describe("parsing real BookNLP output", () => {
  test("a .tokens file is read by column name, with character offsets and the in-quote flag", () => {
    const rows = parseTokens(fixture("daisy.tokens"));
    expect(rows).toHaveLength(40);
    expect(rows[0]).toEqual({
      paragraph: 0,
      sentence: 0,
      tokenInSentence: 0,
      token: 0,
      word: "DAISY",
      lemma: "DAISY",
      start: 0,
      end: 5,
      pos: "PROPN",
      finePos: "NNP",
      dependency: "nsubj",
      head: 1,
      event: "O",
      inQuote: false,
    });
  });

  test("a 13-column .tokens file without inQuote still parses", () => {
    const thirteen = fixture("daisy.tokens")
      .split("\n")
      .map((l) => l.split("\t").slice(0, 13).join("\t"))
      .join("\n");
    const rows = parseTokens(thirteen);
    expect(rows[3]!.word).toBe("A");
    expect(rows[3]!.inQuote).toBeUndefined();
  });

  test("an .entities file gives cluster, span, kind, category and text", () => {
    const rows = parseEntities(fixture("emma.entities"));
    expect(rows).toHaveLength(40);
    expect(rows[0]).toEqual({ coref: 123, start: 4, end: 5, prop: "PROP", cat: "PER", text: "Emma Woodhouse" });
    expect(new Set(rows.map((r) => r.prop))).toEqual(new Set(["PROP", "NOM", "PRON"]));
  });

  test("a .quotes file gives the quote, its speaker mention and the speaker's cluster", () => {
    const rows = parseQuotes(fixture("emma.quotes"));
    expect(rows).toHaveLength(30);
    expect(rows[0]).toMatchObject({ quoteStart: 1272, quoteEnd: 1295, mentionStart: 1266, mentionEnd: 1266, mentionPhrase: "he", charId: 425 });
    expect(rows[0]!.quote.startsWith("\u201c Poor Miss Taylor!")).toBe(true);
  });

  test("a speaker written as None or -1 reads as no speaker", () => {
    const header = "quote_start\tquote_end\tmention_start\tmention_end\tmention_phrase\tchar_id\tquote";
    const rows = parseQuotes(`${header}\n1\t3\t-1\t-1\t\tNone\t" Hi "\n4\t6\t-1\t-1\t\t-1\t" Yo "\n`);
    expect(rows.map((r) => r.charId)).toEqual([null, null]);
  });

  test("a .supersense file gives spans and categories", () => {
    const rows = parseSupersense(fixture("emma.supersense"));
    expect(rows[0]).toEqual({ start: 2, end: 2, category: "noun.communication", text: "CHAPTER" });
    expect(rows.some((r) => r.category === "noun.person" && r.text === "Emma Woodhouse")).toBe(true);
  });

  test("a .book file gives each character's count, gender and mention lists, null gender included", () => {
    const chars = parseBook(fixture("emma.book"));
    expect(chars[0]).toMatchObject({ id: 123, count: 4405, genderLabel: "she/her" });
    expect(chars[0]!.mentions.proper[0]).toEqual({ c: 799, n: "Emma" });
    const unknown = chars.find((c) => c.genderLabel === null);
    expect(unknown?.mentions.common[0]).toEqual({ c: 5, n: "my dear madam" });
  });

  test("CRLF line ends, blank lines and short rows are tolerated", () => {
    const text = "COREF\tstart_token\tend_token\tprop\tcat\ttext\r\n7\t1\t2\tPROP\tPER\tAda Byron\r\n\r\n8\t3\r\n";
    const rows = parseEntities(text);
    expect(rows[0]).toEqual({ coref: 7, start: 1, end: 2, prop: "PROP", cat: "PER", text: "Ada Byron" });
    expect(rows[1]).toMatchObject({ coref: 8, start: 3, end: -1, prop: "" });
  });
});

describe("character list", () => {
  const real: BookNlpFileTexts = {
    entities: fixture("emma.entities"),
    quotes: fixture("emma.quotes"),
    book: fixture("emma.book"),
  };

  test("characters are ranked by importance with their best proper name, aliases and gender", () => {
    const list = toCharacterList(parseBookNlp(real));
    expect(list.map((c) => c.name).slice(0, 4)).toEqual(["Emma Woodhouse", "Harriet Smith", "Mr. Knightley", "Frank Churchill"]);
    const emma = list[0]!;
    expect(emma.gender).toBe("female");
    expect(emma.aliases).toContain("Emma");
    expect(emma.quotes.length).toBe(emma.quoteCount);
    expect(list.find((c) => c.name === "Mr. Knightley")?.gender).toBe("male");
  });

  test("a character's quotes come back as plain text without quotation marks", () => {
    const list = toCharacterList(parseBookNlp(real));
    const speaker = list.find((c) => c.id === 92);
    expect(speaker?.quotes.length).toBe(5);
    for (const q of speaker?.quotes ?? []) expect(q).not.toMatch(/^[\u201c"]|[\u201d"]$/);
  });

  test("minimum mentions and quotes filter the list", () => {
    const parsed = parseBookNlp(real);
    expect(toCharacterList(parsed, { minMentions: 2000 }).map((c) => c.id)).toEqual([123]);
    expect(toCharacterList(parsed, { minQuotes: 1 }).every((c) => c.quoteCount >= 1)).toBe(true);
    expect(toCharacterList(parsed, { maxCharacters: 2 })).toHaveLength(2);
    expect(toCharacterList(parsed).every((c) => c.mentionCount >= DEFAULT_MIN_MENTIONS)).toBe(true);
  });

  test("without a .book file the list is rebuilt from .entities", () => {
    const list = toCharacterList(parseBookNlp({ entities: real.entities, quotes: real.quotes }), { minMentions: 1 });
    const emma = list.find((c) => c.id === 123);
    expect(emma?.name).toBe("Emma");
    expect(emma?.aliases).toEqual(["Emma Woodhouse"]);
    expect(emma?.quoteCount).toBe(3);
  });

  test("the engine's own files give the same list shape as BookNLP's", () => {
    const text = [
      "Ada Byron sat by the window. Ada was reading, and she did not look up.",
      '"Are you coming?" asked Charles Babbage.',
      '"In a minute," said Ada.',
      '"The engine will not wait," said Charles.',
    ].join("\n\n");
    const list = toCharacterList(parseBookNlp(runBookNlp(text).files), { minMentions: 1 });
    const ada = list.find((c) => c.name === "Ada Byron");
    expect(ada?.quotes).toEqual(["In a minute,"]);
    expect(list.find((c) => c.name === "Charles Babbage")?.quoteCount).toBe(2);
  });

  test.each([
    ["Mr. Darcy 's horse", "Mr. Darcy's horse"],
    ["I do n't know , sir .", "I don't know, sir."],
    ["a good - humoured man", "a good-humoured man"],
  ])("BookNLP token spacing %p reads as %p", (raw, expected) => {
    expect(detokenize(raw)).toBe(expected);
  });

  test("quotation marks are removed from both ends of a quote", () => {
    expect(stripQuoteMarks("\u201c Poor Miss Taylor ! \u201d")).toBe("Poor Miss Taylor!");
    expect(stripQuoteMarks('" Yes , " ')).toBe("Yes,");
  });
});

// Every real BookNLP file shipped beside the project, when the shared folder exists.
const SHARED_EVAL = resolve(import.meta.dirname, "..", "..", "..", "shared", "eval");
const realDirs = existsSync(SHARED_EVAL)
  ? readdirSync(SHARED_EVAL)
      .filter((d) => d.startsWith("booknlp-"))
      .flatMap((d) => {
        const root = join(SHARED_EVAL, d);
        const subdirs = readdirSync(root, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => join(root, e.name));
        return subdirs.length > 0 ? subdirs : [root];
      })
  : [];

describe.skipIf(realDirs.length === 0)("every real BookNLP output in ../shared/eval", () => {
  if (realDirs.length === 0) console.log("skipped: ../shared/eval/booknlp-* is not present in this clone");
  test.each(realDirs.map((d) => [d]))("%s parses into a non-empty character list", (dir) => {
    const files: BookNlpFileTexts = {};
    for (const f of readdirSync(dir)) {
      const ext = f.split(".").pop() as keyof BookNlpFileTexts;
      if (["tokens", "entities", "quotes", "supersense", "book"].includes(ext)) files[ext] = readFileSync(join(dir, f), "utf8");
    }
    const parsed = parseBookNlp(files);
    expect(parsed.entities.length).toBeGreaterThan(0);
    expect(parsed.quotes.every((q) => q.quoteStart <= q.quoteEnd)).toBe(true);
    if (files.tokens) expect(parsed.tokens.every((t) => t.start <= t.end && t.word !== "")).toBe(true);
    const list = toCharacterList(parsed);
    expect(list.length).toBeGreaterThan(3);
    expect(list[0]!.quoteCount).toBeGreaterThan(0);
  });
});
