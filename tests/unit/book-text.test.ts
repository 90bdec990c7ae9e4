import { describe, expect, test } from "bun:test";
import { extractWork, hasProse, openingTitle, readHeaderFields } from "../../ingest/book/book-text.ts";
import { HOSTILE_KINDS, hostileBook, hostileGutenbergFile } from "../support/hostile-text.ts";

/** A short story wrapped the way Project Gutenberg wraps its files; the variants are what differs between eras. */
const STORY = [
  "Chapter 1",
  "",
  "Marta Vell opened the ledger and read the first line aloud.",
  "",
  "\u201cWho wrote this?\u201d asked Jonas Brask.",
  "",
  "Chapter 2",
  "",
  "Nobody answered him, and the lamp burned low.",
].join("\n");

const HEADER = (start: string) =>
  [
    "The Project Gutenberg eBook of The Lamp Ledger, by Ida Quarry",
    "",
    "This eBook is for the use of anyone anywhere in the United States and",
    "most other parts of the world at no cost and with almost no restrictions.",
    "",
    "Title: The Lamp Ledger",
    "       and Other Tales",
    "",
    "Author: Ida Quarry",
    "",
    "Language: English",
    "",
    start,
    "",
  ].join("\n");
const LICENCE = ["", "Updated editions will replace the previous one.", "Michael Hart and Gregory B. Newby", "*** START: FULL LICENSE ***", "THE FULL PROJECT GUTENBERG LICENSE"].join("\n");

const CASES: [string, string, string][] = [
  ["a current header and END line", `${HEADER("*** START OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***")}\n${STORY}\n\n*** END OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***${LICENCE}`, STORY],
  ["an older THIS header with an End of sentence", `${HEADER("*** START OF THIS PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***")}\n${STORY}\n\nEnd of the Project Gutenberg EBook of The Lamp Ledger, by Ida Quarry\n\n*** END OF THIS PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***${LICENCE}`, STORY],
  ["the small print of the nineties", `${HEADER("*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*")}\n${STORY}\n\nEnd of Project Gutenberg's The Lamp Ledger, by Ida Quarry\n`, STORY],
  [
    "a producer, a title page and a transcriber's note",
    `${HEADER("*** START OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***")}\n\nProduced by Dana Proofer and the Online\nDistributed Proofreading Team\n\ncover\n\nThe Lamp Ledger and Other Tales\n\nby Ida Quarry\n\nTHE SECOND EDITION\n\n${STORY}\n\nTranscriber's Notes: a misprint was corrected.\n\n*** END OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***`,
    STORY,
  ],
  [
    "a table of contents with the title page above it",
    `${HEADER("*** START OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***")}\nTHE LAMP LEDGER\n\nBy Ida Quarry\n\n    CONTENTS\n\n     Chapter 1\n\n     Chapter 2\n\n\n\n${STORY}\n*** END OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***`,
    STORY,
  ],
  [
    "a table of contents whose entries come back in capitals",
    `${HEADER("*** START OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***")}\nContents\n\n   I.     The Ledger\n   II.    The Lamp\n\n\nI. THE LEDGER\n\nMarta Vell read it.\n\nII. THE LAMP\n\nIt burned.\n*** END OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***`,
    "I. THE LEDGER\n\nMarta Vell read it.\n\nII. THE LAMP\n\nIt burned.",
  ],
  ["a file with no markers, contents and all", `Contents\n\nChapter 1\n\nProduced by nobody.\n\n${STORY}\n`, `Contents\n\nChapter 1\n\nProduced by nobody.\n\n${STORY}\n`],
];

describe("the work out of a book file", () => {
  test.each(CASES)("%s", (_, file, work) => {
    const result = extractWork(file);
    expect(result.text).toBe(work);
    expect(file.slice(result.start, result.end)).toBe(work);
    expect(result.warnings).toEqual([]);
  });

  test("what was stripped is recorded as ranges of the file around the work", () => {
    const file = `${HEADER("*** START OF THE PROJECT GUTENBERG EBOOK X ***")}\nContents\n\nChapter 1\nChapter 2\n\n${STORY}\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***${LICENCE}`;
    const { stripped, start, end } = extractWork(file);
    expect(stripped.map((s) => s.what)).toEqual(["gutenberg header", "table of contents", "gutenberg footer and licence"]);
    expect(stripped[0]!.start).toBe(0);
    expect(stripped.at(-1)!.end).toBe(file.length);
    expect(stripped.every((s) => s.end <= start || s.start >= end)).toBe(true);
    expect(file.slice(stripped[1]!.start, stripped[1]!.end)).toStartWith("Contents");
  });

  test("a contents line far into the work is not a table of contents", () => {
    const late = `${"Para of prose that runs on.\n\n".repeat(2000)}Contents\n\nChapter 1\n\nMore prose.\n\nChapter 1\n\nThe end.\n`;
    const file = `*** START OF THE PROJECT GUTENBERG EBOOK X ***\n${late}*** END OF THE PROJECT GUTENBERG EBOOK X ***\n`;
    expect(extractWork(file).text).toBe(late.trim());
  });

  test("a file with only the header and licence has no prose left", () => {
    const { text } = extractWork(`${HEADER("*** START OF THE PROJECT GUTENBERG EBOOK X ***")}\n\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***${LICENCE}`);
    expect(hasProse(text)).toBe(false);
  });
});

/** A long hard-wrapped novel: numbered paragraphs of lines under 70 characters, no two alike. */
function novel(paragraphs: number): string {
  return Array.from({ length: paragraphs }, (_, i) =>
    [`Marta Vell turned page ${i} of the ledger and read the line aloud,`, `slowly, as the lamp burned low over entry number ${i * 7}.`, `"Who wrote this one?" asked Jonas Brask, for the ${i}th time.`].join("\n"),
  ).join("\n\n");
}
const START = "*** START OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***";
const END = "*** END OF THE PROJECT GUTENBERG EBOOK THE LAMP LEDGER ***";
const wrap = (story: string) => `${HEADER(START)}\n${story}\n\n${END}${LICENCE}\n`;
/** The story with a paragraph put in before the paragraph at `share` of it. */
function withParagraph(story: string, share: number, paragraph: string): string {
  const at = story.indexOf("\n\n", Math.floor(story.length * share)) + 2;
  return `${story.slice(0, at)}${paragraph}\n\n${story.slice(at)}`;
}

describe("marker lines inside the story", () => {
  const story = novel(4000);

  test.each([
    ["a quoted START line at 50%", wrap(withParagraph(story, 0.5, START)), 1, /1 Project Gutenberg marker line inside the file kept as text, at 50%/],
    ["an End of the Project Gutenberg line at 10% of a file with no header", withParagraph(story, 0.1, "End of the Project Gutenberg EBook of The Lamp Ledger, by Ida Quarry"), 1, /at 10% \("End of the Project Gutenberg/],
    ["an END line at 30% of a wrapped file", wrap(withParagraph(story, 0.3, END)), 1, /at 30%/],
    ["two volumes in one file", `${wrap(story)}\n${wrap(story)}`, 2, /^3 Project Gutenberg marker lines inside the file kept as text, at 50%, 50%, 50%/],
  ])("%s cuts only the outermost header and footer, and says what it kept", (_, file, copies, warning) => {
    const result = extractWork(file);
    expect(result.text.length).toBeGreaterThanOrEqual(copies * story.length);
    expect(result.text).toStartWith(story.slice(0, 200));
    expect(result.text).toEndWith(story.slice(-200));
    expect(result.warnings).toEqual([expect.stringMatching(warning)]);
  });

  test("a Contents look-alike in a hard-wrapped story, whose first line comes back at a third of it, is kept as text", () => {
    const short = novel(700);
    const lookAlike = withParagraph(withParagraph(short, 0.34, "* * * * *"), 0.01, "CONTENTS\n\n* * * * *");
    const result = extractWork(wrap(lookAlike));
    expect(result.text).toBe(lookAlike);
    expect(result.warnings).toEqual([expect.stringMatching(/^a "Contents" line at 1% of the file is kept as text: as a table of contents it would cut 3\d% of the work/)]);
  });

  test("a lone START line that would cut a large part of a short file is cut, and named in the warnings", () => {
    const short = novel(40);
    const result = extractWork(withParagraph(short, 0.5, START));
    expect(result.text.length).toBeLessThan(short.length * 0.6);
    expect(result.warnings).toEqual([expect.stringMatching(/^the Project Gutenberg header cut 5\d% of the file, with no word of Project Gutenberg beside its marker line/)]);
  });

  test("a real header and footer of a short story are cut without a warning", () => {
    const short = novel(10);
    expect(extractWork(wrap(short))).toMatchObject({ text: short, warnings: [] });
  });
});

describe("the Gutenberg header's fields", () => {
  test.each([
    ["Title: Emma\nAuthor: Jane Austen\nLanguage: English\n", { title: "Emma", author: "Jane Austen", language: "English" }],
    ["Title: The Lamp Ledger\n       and Other Tales\n\nAuthor: Ida Quarry\n", { title: "The Lamp Ledger and Other Tales", author: "Ida Quarry" }],
    ["Title:\nAuthor: Anonymous\n", { author: "Anonymous" }],
    ["No fields here.\n", {}],
  ])("%j", (header, fields) => {
    expect(readHeaderFields(header)).toEqual(fields);
  });

  test("are read from the header of a wrapped file", () => {
    expect(extractWork(`${HEADER("*** START OF THE PROJECT GUTENBERG EBOOK X ***")}${STORY}`).header).toEqual({
      title: "The Lamp Ledger and Other Tales",
      author: "Ida Quarry",
      language: "English",
    });
  });
});

/** A first paragraph of story, hard-wrapped as plain texts are. */
const PROSE = [
  "Marta Vell had kept the ledger at the lamp house for eleven winters, and in",
  "all that time she had never once let a night go by without a line in it.",
].join("\n");

describe("the title and author a plain text opens with", () => {
  test.each<[string, string, { title?: string; author?: string }]>([
    ["a title in capitals with a by line below", `THE MOONSTONE\n\nby Wilkie Collins\n\n${PROSE}`, { title: "The Moonstone", author: "Wilkie Collins" }],
    ["a title with By on the next line", "Emma\nBy Jane Austen\n", { title: "Emma", author: "Jane Austen" }],
    ["a lone BY with the name in capitals below it", `The Secret Garden\n\nBY\n\nFRANCES HODGSON BURNETT\n\nCHAPTER I\n\n${PROSE}`, { title: "The Secret Garden", author: "Frances Hodgson Burnett" }],
    ["Title: and Author: lines without a Gutenberg marker", `Title: The Lamp Ledger\nAuthor: Ida Quarry\n\n${PROSE}`, { title: "The Lamp Ledger", author: "Ida Quarry" }],
    ["a title over two lines, the edition's notes above it", `Produced by Dana Proofer\n\nTHE LAMP LEDGER\nAND OTHER TALES\n\nBY IDA QUARRY.\n\n${PROSE}`, { title: "The Lamp Ledger and Other Tales", author: "Ida Quarry" }],
    ["capitals with a subtitle, a numeral, O' and Mc", "THE LEDGER OF O'BRIEN MCGREGOR: AN ACCOUNT IN VIII PARTS\n\nby J. M. Quarry, with illustrations by Phiz\n", { title: "The Ledger of O'Brien McGregor: An Account in VIII Parts", author: "J. M. Quarry" }],
    ["a title and a subtitle above the first chapter, with no by line", `THE KEEPER'S LEDGER\n\nA story written for these tests.\n\nCHAPTER I\n\n${PROSE}`, { title: "The Keeper's Ledger" }],
    ["a title under a producer's note of two lines, above a chapter heading", `Produced by Dana Proofer and the Online\nDistributed Proofreading Team\n\nTHE LAMP LEDGER\n\nCHAPTER I\n\n${PROSE}`, { title: "The Lamp Ledger" }],
    ["a title in its author's own case above a chapter heading", `The Lamp on Gull Rock\n\nChapter One\n\n${PROSE}`, { title: "The Lamp on Gull Rock" }],
    ["a title that begins with By above a chapter", `BY THE LAMP\n\nI.\n\n${PROSE}`, { title: "By the Lamp" }],
    ["a title that ends in a question mark", "Who Kept the Lamp?\n\nby Ida Quarry\n", { title: "Who Kept the Lamp?", author: "Ida Quarry" }],
    ["an author's line with no title above it", `by Ida Quarry\n\n${PROSE}`, { author: "Ida Quarry" }],
    ["a text that opens straight into prose", `${PROSE}\n\nCHAPTER II`, {}],
    ["a short first line above prose, with nothing to say it is a title", `The Lamp House\n\n${PROSE}`, {}],
    ["a first line of dialogue", `\u201cMarta!\u201d\n\nNo answer.\n\nCHAPTER I\n\n${PROSE}`, {}],
    ["a short sentence above a chapter", `It was dark on the rock that night.\n\nCHAPTER I\n\n${PROSE}`, {}],
    ["a chapter heading first, its name below it", `CHAPTER I\n\nThe Ledger\n\nby the window\n\n${PROSE}`, {}],
    ["a contents list first", "Contents\n\nThe Ledger\nThe Lamp\n", {}],
    ["a by line that names no one", `THE LAMP LEDGER\n\nBy the author of \u201cThe Gull\u201d\n\n${PROSE}`, {}],
    ["a title and by line under a paragraph of prose", `${PROSE}\n\nTHE MOONSTONE\n\nby Wilkie Collins\n`, {}],
    ["a by line past the opening lines", `${"THE LAMP\n\n".repeat(12)}by Ida Quarry\n`, {}],
  ])("%s", (_, text, expected) => {
    expect(openingTitle(text)).toEqual(expected);
  });
});

describe("prose", () => {
  test.each([
    ["", false],
    ["  \n\n ", false],
    ["1 2 3 ... 42 -- *", false],
    ["It was.", true],
    ["زینب نے کہا", true],
  ])("%j has prose: %p", (text, expected) => {
    expect(hasProse(text)).toBe(expected);
  });
});

/**
 * The file as a String object that counts the characters read from it: one per charCodeAt, and for
 * indexOf the characters its search passed over. Regular expressions read a primitive copy, which
 * this cannot count: the paragraphs of the work must be found by a scan that can be.
 */
class CountedText extends String {
  reads = 0;
  override charCodeAt(index: number): number {
    this.reads++;
    return super.charCodeAt(index);
  }
  override indexOf(search: string, from = 0): number {
    const at = super.indexOf(search, from);
    this.reads += (at < 0 ? this.length : at + search.length) - Math.max(0, from);
    return at;
  }
}

describe("extractWork on long runs of whitespace", () => {
  test.each(HOSTILE_KINDS.filter((kind) => ["spaces", "tabs", "nbsp", "whitespace mix"].includes(kind)))(
    "finds the work around a run of %s reading each character of it a bounded number of times",
    (kind) => {
      // Before: the paragraphs were matched by /\S[\s\S]*?(?=\n[ \t]*\n|\s*$)/, which read the rest of a
      // run of whitespace again from each of its characters: 100,000 spaces took 22.5 s, 1 MB about 1.5 h.
      const reads = [20_000, 40_000].map((n) => {
        const file = hostileGutenbergFile(kind, n);
        const counted = new CountedText(file);
        const work = extractWork(counted as unknown as string);
        expect(work.text).toBe(hostileBook(kind, n).trim());
        return counted.reads / file.length;
      });
      for (const perChar of reads) {
        expect(perChar).toBeGreaterThanOrEqual(1);
        expect(perChar).toBeLessThanOrEqual(3);
      }
    },
  );
});
