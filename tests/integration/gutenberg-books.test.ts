import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase } from "../../common/db/create.ts";
import { listCharacters } from "../../common/db/characters.ts";
import { REPO_ROOT, runEntry } from "../support/process.ts";

/**
 * The four Project Gutenberg files of ../shared/books, as readers download them (Sherlock Holmes in
 * Windows-1252), through `npm run ingest` with the offline provider and embedded stores: the
 * character list a reader sees. A clone without ../shared skips this file.
 */

// Four whole books, War and Peace among them, one CLI process each.
setDefaultTimeout(180_000);

const BOOKS_DIR = join(REPO_ROOT, "..", "shared", "books");

/** Names of the Gutenberg wrapping that must never be a character or an alias. */
const GUTENBERG_NAMES = ["project gutenberg", "gutenberg", "david widger", "widger", "michael hart", "michael s. hart", "gregory b. newby", "gregory newby", "newby"];

interface Expected {
  file: string;
  /** The author and translators named in the header. */
  credited: string[];
  /** Each main character, as the set of names any one of which identifies them. */
  main: Record<string, string[]>;
  /** Surnames a family shares, never a bare alias of one of them. */
  sharedSurnames: string[];
  /** Names that are not a character nor any character's alias. */
  never: string[];
}

const BOOKS: Expected[] = [
  {
    file: "pg1342_pride_and_prejudice.txt",
    credited: ["jane austen", "austen"],
    main: {
      Elizabeth: ["elizabeth bennet", "elizabeth", "lizzy"],
      Darcy: ["mr. darcy", "darcy", "fitzwilliam darcy"],
      Jane: ["jane", "jane bennet", "miss jane bennet"],
      Bingley: ["mr. bingley", "bingley", "charles bingley"],
      "Mr. Bennet": ["mr. bennet"],
      "Mrs. Bennet": ["mrs. bennet"],
      Wickham: ["wickham", "mr. wickham", "george wickham"],
      Collins: ["mr. collins", "collins", "william collins"],
      Lydia: ["lydia", "lydia bennet"],
      "Lady Catherine": ["lady catherine", "lady catherine de bourgh"],
      Charlotte: ["charlotte", "charlotte lucas"],
    },
    sharedSurnames: ["bennet", "lucas"],
    never: [],
  },
  {
    file: "pg1661_adventures_of_sherlock_holmes.txt",
    credited: ["arthur conan doyle", "conan doyle", "doyle"],
    main: {
      Holmes: ["sherlock holmes", "holmes", "mr. holmes", "sherlock"],
      Watson: ["watson", "dr. watson"],
      "Irene Adler": ["irene adler", "miss adler", "miss irene adler"],
      "the King of Bohemia": ["the king", "king of bohemia"],
      "Jabez Wilson": ["jabez wilson", "mr. jabez wilson"],
      "Mary Sutherland": ["mary sutherland", "miss sutherland", "miss mary sutherland"],
      "Mary Holder": ["mary holder", "miss mary holder", "miss holder"],
      Lestrade: ["lestrade", "mr. lestrade", "inspector lestrade"],
    },
    sharedSurnames: ["holder"],
    // "I wish to the Lord that I had shot him": an oath in another story, not Lord St. Simon.
    never: ["the lord", "the salesman"],
  },
  {
    file: "pg11_alices_adventures_in_wonderland.txt",
    credited: ["lewis carroll", "carroll"],
    main: {
      Alice: ["alice"],
      "the Rabbit": ["the rabbit", "the white rabbit"],
      "the Queen": ["the queen", "the queen of hearts"],
      "the Hatter": ["the hatter"],
      "the Duchess": ["the duchess"],
      "the Cat": ["the cat", "the cheshire cat"],
      "the Mock Turtle": ["the mock turtle", "mock turtle"],
      "the Gryphon": ["the gryphon"],
    },
    sharedSurnames: [],
    never: [],
  },
  {
    file: "pg2600_war_and_peace.txt",
    credited: ["leo tolstoy", "tolstoy", "louise maude", "aylmer maude", "maude"],
    main: {
      Pierre: ["pierre", "pierre bezúkhov", "count pierre"],
      Natasha: ["natásha", "natásha rostóva"],
      "Prince Andrew": ["prince andrew", "andrew bolkónski"],
      Nicholas: ["nicholas rostóv"],
      "Princess Mary": ["princess mary", "mary bolkónskaya"],
      Sonya: ["sónya"],
    },
    sharedSurnames: ["rostóva"],
    // "On seeing Natásha Pierre grew animated": two people side by side, not a name.
    never: ["natásha pierre"],
  },
];

const STREET = /\b(street|road|square|lane|terrace|avenue|place)$/i;
const key = (name: string) => name.normalize("NFC").replace(/\s+/g, " ").trim().toLowerCase();

const present = BOOKS.filter((b) => existsSync(join(BOOKS_DIR, b.file)));
if (present.length < BOOKS.length) console.warn(`gutenberg-books: skipped ${BOOKS.length - present.length} of 4 books: ${BOOKS_DIR} is not in this clone`);

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "gutenberg-books-"));
});
afterAll(async () => {
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** Ingests one file through the CLI (no LLM gateway: the offline provider) and reads back its characters. */
async function ingestCharacters(file: string) {
  const run = await runEntry("ingest/cli.ts", { DATA_DIR: dataDir }, 170_000, [join(BOOKS_DIR, file)]);
  expect({ exitCode: run.exitCode, stderr: run.exitCode === 0 ? "" : run.stderr }).toEqual({ exitCode: 0, stderr: "" });
  const bookId = /^book ([0-9a-f-]{36}):/m.exec(`${run.stderr}\n${run.stdout}`)?.[1];
  if (!bookId) throw new Error(`no book id in the CLI's output:\n${run.stdout}`);
  const db = await createDatabase({ driver: "pglite", dataDir: join(dataDir, "pg") });
  try {
    return (await listCharacters(db, bookId)).map((c) => ({ name: c.name, names: [c.name, ...(c.aliases ?? [])].map(key) }));
  } finally {
    await db.close();
  }
}

describe.skipIf(present.length === 0)("the Project Gutenberg files of ../shared/books, ingested as downloaded", () => {
  for (const book of present) {
    test(`${book.file}: no Gutenberg or credited name is a character, each main character is one character, and no street or shared surname is an alias`, async () => {
      const characters = await ingestCharacters(book.file);
      const all = characters.flatMap((c) => c.names.map((n) => ({ character: c.name, n })));
      const forbidden = [...GUTENBERG_NAMES, ...book.credited];
      expect(all.filter(({ n }) => forbidden.some((f) => n === f || n.includes(` ${f}`) || n.startsWith(`${f} `) || n.includes("gutenberg")))).toEqual([]);
      expect(all.filter(({ n }) => STREET.test(n) || book.sharedSurnames.includes(n) || book.never.includes(n))).toEqual([]);
      const found = Object.fromEntries(
        Object.entries(book.main).map(([who, names]) => [who, characters.filter((c) => c.names.some((n) => names.includes(n))).map((c) => c.name)]),
      );
      // Each main character found, and found once: not missing, not split in two.
      const once = Object.fromEntries(Object.entries(found).map(([who, list]) => [who, list.length === 1]));
      expect({ found, once }).toEqual({ found, once: Object.fromEntries(Object.keys(book.main).map((who) => [who, true])) });
      // And no two of them are one character (Mary Sutherland and Mary Holder).
      const owners = Object.values(found).map((list) => list[0]);
      expect(new Set(owners).size).toBe(owners.length);
    });
  }
});
