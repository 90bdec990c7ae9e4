import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase } from "../../common/db/create.ts";
import { recordBookSource } from "../../common/db/books.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { sha256 } from "../../common/hash.ts";
import { createTestDatabase, probePostgres } from "../support/postgres.ts";
import { REPO_ROOT } from "../support/process.ts";
import { ENGLISH_BOOK, FIXTURES, URDU_BOOK, listFiles, startScriptedGateway, type ScriptedGateway } from "../fixtures/ingest/harness.ts";

// The CLI starts an embedded Postgres in a fresh data dir.
setDefaultTimeout(90_000);

let gateway: ScriptedGateway;
let dataDir: string;
beforeAll(async () => {
  gateway = startScriptedGateway();
  dataDir = await mkdtemp(join(tmpdir(), "ingest-cli-"));
});
async function ingest(args: string[], env: Record<string, string> = {}) {
  const proc = Bun.spawn([process.execPath, "ingest/cli.ts", ...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdout: "pipe",
    stderr: "pipe",
    timeout: 90_000,
  });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { exitCode, stdout, stderr };
}

afterAll(async () => {
  gateway.stop();
  await rm(dataDir, { recursive: true, force: true });
});

test("bun run ingest registers a local book, runs the pipeline and prints the characters it found", async () => {
  const { exitCode, stdout, stderr } = await ingest(
    [join(FIXTURES, ENGLISH_BOOK), "--title", "The Keeper's Ledger", "--author", "A. Tester", "--max-characters", "3"],
    { DATA_DIR: dataDir, LLM_GATEWAY_URL: gateway.baseURL },
  );
  expect({ exitCode, stderr: exitCode === 0 ? "" : stderr }).toEqual({ exitCode: 0, stderr: "" });
  expect(stdout).toStartWith("The Keeper's Ledger: 3 characters, ");
  for (const name of ["Clara", "Tobias Finch"]) expect(stdout).toContain(name);
  expect(stdout).toMatch(/\nspoiler-safe checkpoints: [1-9]\d* profiles and personas written\n/);
  expect(stdout).toMatch(/time: download [\d.]+ s, text [\d.]+ s, booknlp [\d.]+ s, extract [\d.]+ s, prompt [\d.]+ s, index [\d.]+ s, guard [\d.]+ s, total [\d.]+ s/);
  const backups = await listFiles(join(dataDir, "prompts"));
  expect(backups).toHaveLength(3);
  expect(backups.some((f) => f.endsWith("/clara.md"))).toBe(true);
});

test("ingesting the same file again updates the book it made instead of adding a copy, keeping the title and author it was given", async () => {
  const env = { DATA_DIR: dataDir, LLM_GATEWAY_URL: gateway.baseURL };
  const again = await ingest([join(FIXTURES, ENGLISH_BOOK), "--max-characters", "3"], env);
  expect(again.exitCode).toBe(0);
  expect(again.stderr).toMatch(/this text was ingested before as book [0-9a-f-]{36} \("The Keeper's Ledger"\): updating that book/);
  expect(again.stdout).toStartWith("The Keeper's Ledger: 3 characters, ");
  const db = await createDatabase({ driver: "pglite", dataDir: join(dataDir, "pg") });
  try {
    expect(await db.query("SELECT title, author FROM books")).toEqual([{ title: "The Keeper's Ledger", author: "A. Tester" }]);
    expect(await db.query("SELECT count(*)::int AS n FROM book_sources")).toEqual([{ n: 1 }]);
  } finally {
    await db.close();
  }
});

test("bun run ingest explains its usage and refuses bad arguments before touching any store", async () => {
  const none = await ingest([]);
  expect(none.exitCode).toBe(2);
  expect(none.stderr).toContain("usage: npm run ingest -- <book.txt>");
  const language = await ingest([join(FIXTURES, ENGLISH_BOOK), "--language", "French"]);
  expect([language.exitCode, language.stderr]).toEqual([2, "--language must be one of English, Urdu, both\n"]);
  const missing = await ingest([join(FIXTURES, "no-such-book.txt")]);
  expect(missing.exitCode).toBe(1);
  expect(missing.stderr).toContain("no such file");
});

test("on a database shared with the frontend, bun run ingest neither adds a books row nor replaces a book's title unless given --write-frontend-tables", async () => {
  const postgres = await probePostgres();
  if (!postgres.reachable) return void console.warn(`skipping the shared-database case: ${postgres.reason}`);
  const database = await createTestDatabase(postgres.url);
  const path = join(FIXTURES, ENGLISH_BOOK);
  const env = { DATA_DIR: dataDir, DATABASE_URL: database.url };
  const titles = async (add?: string) => {
    const db = await createDatabase({ driver: "postgres", url: database.url });
    try {
      // The frontend's own row for this text, as if it had been submitted before.
      if (add) await recordBookSource(db, (await insertBook(db, { title: add })).id, sha256(await Bun.file(path).text()));
      return (await db.query<{ title: string }>("SELECT title FROM books")).map((r) => r.title);
    } finally {
      await db.close();
    }
  };
  try {
    const { exitCode, stderr } = await ingest([path], env);
    expect(exitCode).toBe(2);
    expect(stderr).toContain("adding a book writes its books table: pass --write-frontend-tables");
    expect(await titles()).toEqual([]);

    expect(await titles("The Frontend's Title")).toEqual(["The Frontend's Title"]);
    const retitled = await ingest([path, "--title", "Another Title"], env);
    expect([retitled.exitCode, retitled.stderr]).toEqual([2, expect.stringContaining("replacing a book's title writes its books table: pass --write-frontend-tables to allow it, or leave out --title")]);
    expect(await titles()).toEqual(["The Frontend's Title"]);
  } finally {
    await database.drop();
  }
});

describe("real book files on the command line", () => {
  let own: string;
  beforeAll(async () => {
    own = await mkdtemp(join(tmpdir(), "ingest-cli-books-"));
  });
  afterAll(async () => {
    await rm(own, { recursive: true, force: true });
  });
  const env = () => ({ DATA_DIR: join(own, "data"), LLM_GATEWAY_URL: gateway.baseURL });
  const booksRows = async () => {
    const db = await createDatabase({ driver: "pglite", dataDir: join(own, "data", "pg") });
    try {
      return await db.query<{ id: string; title: string; author: string; language: string }>("SELECT id, title, author, language::text FROM books ORDER BY created_at");
    } finally {
      await db.close();
    }
  };

  test("a PDF renamed .txt fails with a one-line reason and a non-zero exit", async () => {
    const path = join(own, "scanned.txt");
    await Bun.write(path, "%PDF-1.5\n%\u00e2\u00e3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n");
    const { exitCode, stdout, stderr } = await ingest([path], env());
    expect(exitCode).toBe(1);
    expect(stdout).toBe("");
    expect(stderr.split("\n").filter((l) => l.startsWith("failed:"))).toEqual(["failed: file is a PDF document, not plain text"]);
  });

  test("a Windows-1252 Gutenberg file takes its title and author from its header, and no header name becomes a character", async () => {
    const story = (await Bun.file(join(FIXTURES, ENGLISH_BOOK)).text()).replaceAll("Clara laughed.", "Clara laughed. \u201cCaf\u00e9 first.\u201d");
    const file = [
      "The Project Gutenberg eBook of The Keeper's Ledger, by Ada Quill",
      "",
      "Title: The Keeper's Ledger",
      "",
      "Author: Ada Quill",
      "",
      "Produced by: David Widger",
      "",
      "*** START OF THE PROJECT GUTENBERG EBOOK THE KEEPER'S LEDGER ***",
      story,
      "*** END OF THE PROJECT GUTENBERG EBOOK THE KEEPER'S LEDGER ***",
      "Michael Hart and Dr. Gregory B. Newby of the Project Gutenberg Literary Archive Foundation.",
    ].join("\r\n");
    const path = join(own, "pg-ledger.txt");
    await Bun.write(path, Buffer.from(file.replaceAll("\u201c", "\x93").replaceAll("\u201d", "\x94"), "latin1"));
    const { exitCode, stdout, stderr } = await ingest([path, "--max-characters", "4"], env());
    expect({ exitCode, stderr: exitCode === 0 ? "" : stderr }).toEqual({ exitCode: 0, stderr: "" });
    expect(stdout).toStartWith("The Keeper's Ledger: ");
    for (const name of ["Clara", "Tobias Finch"]) expect(stdout).toContain(name);
    expect(stdout).not.toMatch(/Widger|Hart|Newby|Quill/);
    const rows = (await booksRows()).map(({ title, author }) => ({ title, author }));
    expect(rows).toContainEqual({ title: "The Keeper's Ledger", author: "Ada Quill" });
    expect(rows.map((r) => r.title)).not.toContain("pg-ledger");
  });

  test("an Urdu book registered without --language is ingested as Urdu, with a warning; --language urdu given again is stored", async () => {
    gateway.discoveries = [{ seenBy: "زینب", name: "زینب", aliases: [], quotes: ["کوئی تو یاد رکھے"] }];
    const path = join(FIXTURES, URDU_BOOK);
    const first = await ingest([path], env());
    expect({ exitCode: first.exitCode, stderr: first.exitCode === 0 ? "" : first.stderr }).toEqual({ exitCode: 0, stderr: "" });
    expect(first.stderr).toContain("the book is registered as English but its text is in Arabic script");
    expect(first.stdout).toMatch(/: 1 characters, /);
    expect(first.stdout).toContain("زینب");

    const again = await ingest([path, "--language", "urdu"], env());
    expect(again.exitCode).toBe(0);
    expect(again.stderr).toContain("its language: Urdu (was English)");
    expect(again.stderr).not.toContain("Arabic script");
    expect((await booksRows()).find((b) => b.title === "chiragh-wali-gali")?.language).toBe("Urdu");
  });

  test("a plain text that opens with its title and a by line is registered under them", async () => {
    const story = await Bun.file(join(FIXTURES, ENGLISH_BOOK)).text();
    await Bun.write(join(own, "harbour.txt"), `THE HARBOUR LEDGER\n\nby Ida Quarry\n\n${story.slice(story.indexOf("CHAPTER I"))}`);
    const { exitCode, stdout, stderr } = await ingest([join(own, "harbour.txt"), "--max-characters", "1"], env());
    expect({ exitCode, stderr: exitCode === 0 ? "" : stderr }).toEqual({ exitCode: 0, stderr: "" });
    expect(stderr).toMatch(/^book [0-9a-f-]{36}: The Harbour Ledger by Ida Quarry \(English\)$/m);
    expect(stdout).toStartWith("The Harbour Ledger: 1 characters, ");
    expect((await booksRows()).filter((b) => b.title.includes("Harbour")).map(({ title, author }) => ({ title, author }))).toEqual([{ title: "The Harbour Ledger", author: "Ida Quarry" }]);
  });

  test("--title and --author given again replace the book's, and say so; a run without them keeps what they set", async () => {
    const path = join(own, "harbour.txt");
    const replaced = await ingest([path, "--title", "The Harbour Book", "--author", "Ida M. Quarry", "--max-characters", "1"], env());
    expect(replaced.exitCode).toBe(0);
    expect(replaced.stderr).toContain('("The Harbour Ledger"): updating that book\nits title: The Harbour Book (was The Harbour Ledger)\nits author: Ida M. Quarry (was Ida Quarry)\n');
    expect(replaced.stdout).toStartWith("The Harbour Book: 1 characters, ");
    const row = async () => (await booksRows()).filter((b) => b.title.includes("Harbour")).map(({ title, author }) => ({ title, author }));
    expect(await row()).toEqual([{ title: "The Harbour Book", author: "Ida M. Quarry" }]);

    const kept = await ingest([path, "--max-characters", "1"], env());
    expect(kept.exitCode).toBe(0);
    expect(kept.stderr).toContain('("The Harbour Book"): updating that book\n');
    expect(kept.stderr).not.toMatch(/^its (title|author)/m);
    expect(kept.stdout).toStartWith("The Harbour Book: 1 characters, ");
    expect(await row()).toEqual([{ title: "The Harbour Book", author: "Ida M. Quarry" }]);
  });

  test("--delete removes a book by title with its characters, indexes and persona backups; an unknown one is refused", async () => {
    const before = await booksRows();
    const ledger = before.find((b) => b.title === "The Keeper's Ledger")!;
    expect(await listFiles(join(own, "data", "prompts", ledger.id))).not.toEqual([]);
    const deleted = await ingest(["--delete", "the keeper's ledger"], env());
    expect({ exitCode: deleted.exitCode, stderr: deleted.exitCode === 0 ? "" : deleted.stderr }).toEqual({ exitCode: 0, stderr: "" });
    expect(deleted.stdout).toMatch(new RegExp(`^deleted book ${ledger.id} \\("The Keeper's Ledger"\\): [1-9]\\d* characters, its indexes and persona backups\\n$`));
    expect((await booksRows()).map((b) => b.title)).toEqual(before.filter((b) => b.id !== ledger.id).map((b) => b.title));
    expect(await listFiles(join(own, "data", "prompts", ledger.id))).toEqual([]);
    const db = await createDatabase({ driver: "pglite", dataDir: join(own, "data", "pg") });
    try {
      expect(await db.query("SELECT count(*)::int AS n FROM characters WHERE book_id = $1", [ledger.id])).toEqual([{ n: 0 }]);
    } finally {
      await db.close();
    }
    const unknown = await ingest(["--delete", "No Such Book"], env());
    expect(unknown.exitCode).toBe(1);
    expect(unknown.stderr).toEndWith('no book has the id or title "No Such Book"\n');
  });
});

describe("what a run leaves behind, and what it says", () => {
  let own: string;
  beforeAll(async () => {
    own = await mkdtemp(join(tmpdir(), "ingest-cli-runs-"));
  });
  afterAll(async () => {
    await rm(own, { recursive: true, force: true });
  });
  const env = () => ({ DATA_DIR: join(own, "data"), LLM_GATEWAY_URL: gateway.baseURL });
  const titles = async () => {
    const db = await createDatabase({ driver: "pglite", dataDir: join(own, "data", "pg") });
    try {
      return (await db.query<{ title: string; status: string }>("SELECT title, processing_status::text AS status FROM books ORDER BY created_at")).map((r) => `${r.title} (${r.status})`);
    } finally {
      await db.close();
    }
  };
  const story = () => Bun.file(join(FIXTURES, ENGLISH_BOOK)).text();
  const utf16le = (text: string) => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, "utf16le")]);

  test("a run that fails adds no book: a file that is not text, and one whose text is not language", async () => {
    const pdf = join(own, "scan.txt");
    await Bun.write(pdf, "%PDF-1.5\n%\u00e2\u00e3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n");
    let seed = 3;
    const noise = join(own, "noise.txt");
    await Bun.write(noise, Uint8Array.from({ length: 50_000 }, () => 0x20 + ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % 95)));
    const first = await ingest([pdf], env());
    expect([first.exitCode, first.stderr.trim().split("\n").at(-1)]).toEqual([1, "failed: file is a PDF document, not plain text"]);
    const second = await ingest([noise], env());
    expect(second.exitCode).toBe(1);
    expect(second.stderr).toMatch(/\nfailed: the text is not language: only \d+% of its characters are letters/);
    expect(second.stderr).toMatch(/\nbook [0-9a-f-]{36} was not added\n$/);
    expect(await titles()).toEqual([]);
  });

  test("the same text in UTF-16 with CRLF lines is the book its UTF-8 copy made, not a second one", async () => {
    const text = await story();
    const utf8 = join(own, "ledger-utf8.txt");
    const wide = join(own, "ledger-utf16.txt");
    await Bun.write(utf8, text);
    await Bun.write(wide, utf16le(text.replaceAll("\n", "\r\n")));
    const first = await ingest([utf8, "--title", "The Ledger", "--max-characters", "1"], env());
    expect(first.exitCode).toBe(0);
    const again = await ingest([wide, "--max-characters", "1"], env());
    expect({ exitCode: again.exitCode, stderr: again.stderr }).toMatchObject({ exitCode: 0, stderr: expect.stringMatching(/this text was ingested before as book [0-9a-f-]{36} \("The Ledger"\): updating that book/) });
    expect(await titles()).toEqual(["The Ledger (completed)"]);
  });

  test("a book without dialogue says why it has no characters", async () => {
    // The story's narration only: every paragraph with a quotation mark taken out.
    const narration = (await story()).split("\n\n").filter((p) => !/["\u201c\u201d]/.test(p)).join("\n\n");
    const path = join(own, "narration.txt");
    await Bun.write(path, narration);
    const { exitCode, stdout, stderr } = await ingest([path, "--title", "Narration"], env());
    expect(exitCode).toBe(0);
    expect(stdout).toStartWith("Narration: 0 characters, ");
    expect(stderr).toContain("warning: no characters found: the text has no quoted speech, and characters are the people who speak");
  });

  test("a Gutenberg marker line inside the story keeps the story and says so", async () => {
    const text = await story();
    const middle = text.indexOf("CHAPTER II");
    const file = [
      "Title: The Quoted Ledger",
      "",
      "*** START OF THE PROJECT GUTENBERG EBOOK THE QUOTED LEDGER ***",
      text.slice(0, middle),
      "*** START OF THE PROJECT GUTENBERG EBOOK THE QUOTED LEDGER ***",
      "",
      text.slice(middle),
    ].join("\n");
    const path = join(own, "quoted.txt");
    await Bun.write(path, file);
    const { exitCode, stderr } = await ingest([path, "--max-characters", "3"], env());
    expect(exitCode).toBe(0);
    expect(stderr).toMatch(/warning: 1 Project Gutenberg marker line inside the file kept as text, at \d+%/);
    const db = await createDatabase({ driver: "pglite", dataDir: join(own, "data", "pg") });
    try {
      // Agnes speaks before the marker line, Tobias only after it: both are kept.
      const names = (await db.query<{ name: string }>("SELECT c.name FROM characters c JOIN books b ON b.id = c.book_id WHERE b.title = 'The Quoted Ledger'")).map((r) => r.name);
      expect(names).toEqual(expect.arrayContaining(["Agnes", "Tobias Finch"]));
    } finally {
      await db.close();
    }
  });
});

test("on a laptop's defaults the in-process store and the offline provider are noted in the log file only; with HOST opened to the network they are warnings in the terminal", async () => {
  const local = await mkdtemp(join(tmpdir(), "ingest-cli-notes-"));
  const network = await mkdtemp(join(tmpdir(), "ingest-cli-notes-"));
  try {
    const quiet = await ingest([join(FIXTURES, ENGLISH_BOOK), "--max-characters", "1"], { DATA_DIR: local });
    expect(quiet.exitCode).toBe(0);
    expect(quiet.stderr).not.toContain("key-value store");
    expect(quiet.stderr).not.toContain("offline provider");
    const log = await Bun.file(join(local, "ingest.log")).text();
    expect(log).toContain("key-value store: in-process");
    expect(log).toContain("offline provider");

    const loud = await ingest([join(FIXTURES, ENGLISH_BOOK), "--max-characters", "1"], { DATA_DIR: network, HOST: "0.0.0.0" });
    expect(loud.exitCode).toBe(0);
    expect(loud.stderr).toContain("warning: key-value store: in-process");
    expect(loud.stderr).toContain("warning: LLM gateway not configured: offline provider");
  } finally {
    await rm(local, { recursive: true, force: true });
    await rm(network, { recursive: true, force: true });
  }
});
