import { afterAll, describe, expect, test } from "bun:test";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DEFAULT_HISTORY_MESSAGES, HISTORY_CHARS, HISTORY_MESSAGE_CHARS } from "../../api/playground/index.ts";
import { addToLibrary, createSession, insertBook } from "../../common/db/frontend-rows.ts";
import { saveBookReadingPositions } from "../../common/db/reading-positions.ts";
import { appendExchange } from "../../common/db/sessions.ts";
import { saveCharacters } from "../../common/db/characters.ts";
import { LOCAL_USER_ID } from "../../common/local/sessions.ts";
import type { Database } from "../../common/db/index.ts";
import { createEmbeddedTextIndex } from "../../common/text-index/embedded.ts";
import type { TextIndex } from "../../common/text-index/index.ts";
import { buildTestApp } from "../support/app.ts";
import { openEmbeddedDatabase } from "../support/embedded-stores.ts";
import { REPO_ROOT } from "../support/process.ts";
import { tempDirs } from "../support/temp-dirs.ts";

const freshDir = tempDirs("playground-");

const INDEXED = [
  { chunkIndex: 0, text: "The lighthouse keeper climbed the stairs." },
  { chunkIndex: 1, text: "Margaret baked bread at dawn." },
  { chunkIndex: 2, text: "A storm tore the sails of the fleet." },
];

// One embedded database for the file's apps (each of their own would start one: an initdb of seconds);
// every test writes its own books, sessions and messages and reads them by their ids.
let sharedDb: Promise<Database> | undefined;
afterAll(async () => {
  await (await sharedDb)?.close();
});

async function playground(textIndex: TextIndex) {
  return buildTestApp({ db: await (sharedDb ??= openEmbeddedDatabase()), textIndex, playground: {} });
}

/** A book row as the frontend could write it, with `filePath` in its file_path column. */
async function bookRow(db: Awaited<ReturnType<typeof playground>>["deps"]["db"], filePath: string): Promise<string> {
  const id = crypto.randomUUID();
  await db.query("INSERT INTO books (id, title, slug, author, description, language, file_path) VALUES ($1, 'Harbour Tales', $2, 'A. Writer', 'Tales of a harbour town and the people who keep its lighthouse.', 'English', $3)", [id, `harbour-${id}`, filePath]);
  return id;
}

describe("the chat page's passages", () => {
  test.each([
    ["the project's package.json (a relative path)", async () => "package.json", () => readFile(join(REPO_ROOT, "package.json"), "utf8")],
    ["/proc/self/environ", async () => "/proc/self/environ", () => readFile("/proc/self/environ", "utf8")],
    [
      "another book's file",
      async () => {
        const path = join(await freshDir(), "other-book.txt");
        await writeFile(path, "The other book's secret ending: the butler did it, in the library, with the candlestick.");
        return path;
      },
      async () => "the butler did it",
    ],
  ])("a row whose file_path names %s gets the indexed passages and never a byte of that file", async (_, pathOf, contentOf) => {
    const textIndex = createEmbeddedTextIndex({ dir: await freshDir() });
    const t = await playground(textIndex);
    const bookId = await bookRow(t.deps.db, await pathOf());
    await textIndex.upsert(bookId, INDEXED);

    const res = await t.request(`/playground/passages?book_id=${bookId}&chunks=2,0,1,7`);
    expect(res.status).toBe(200);
    const body = await res.text();
    expect(JSON.parse(body)).toEqual({
      passages: [
        { chunk_index: 2, text: INDEXED[2]!.text },
        { chunk_index: 0, text: INDEXED[0]!.text },
        { chunk_index: 1, text: INDEXED[1]!.text },
        { chunk_index: 7, text: null },
      ],
    });
    const content = await contentOf();
    for (const line of content.split(/[\n\0]/).filter((l) => l.trim().length > 12)) expect(body).not.toContain(JSON.stringify(line.trim()).slice(1, -1));
  });

  test("a book with a readable file but nothing in the index shows passage numbers only, the file unread", async () => {
    const textIndex = createEmbeddedTextIndex({ dir: await freshDir() });
    const t = await playground(textIndex);
    const bookId = await bookRow(t.deps.db, "package.json");
    const res = await t.request(`/playground/passages?book_id=${bookId}&chunks=0,1`);
    expect(await res.json()).toEqual({ passages: [{ chunk_index: 0, text: null }, { chunk_index: 1, text: null }] });
  });

  test("at most ten passages are looked up, and an index too large for a chunk number is a 400", async () => {
    const asked: number[][] = [];
    const textIndex = createEmbeddedTextIndex({ dir: await freshDir() });
    const t = await playground({ ...textIndex, get: (bookId, indexes) => (asked.push([...indexes]), textIndex.get(bookId, indexes)) });
    const bookId = await bookRow(t.deps.db, "package.json");
    const many = Array.from({ length: 25 }, (_, i) => i).join(",");
    const res = await t.request(`/playground/passages?book_id=${bookId}&chunks=${many}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { passages: unknown[] }).passages).toHaveLength(10);
    expect(asked).toEqual([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]);
    const huge = await t.request(`/playground/passages?book_id=${bookId}&chunks=99999999999999999999`);
    expect([huge.status, await huge.json()]).toEqual([400, { error: "query must be ?book_id=<uuid>&chunks=<n>[,<n>…][&reading_position=<0-1>]" }]);
  });

  /** A book of three indexed chunks ending at 30 %, 60 % and the end, on 10 pages. */
  async function positionedBook(withPositions = true) {
    const asked: number[][] = [];
    const textIndex = createEmbeddedTextIndex({ dir: await freshDir() });
    const t = await playground({ ...textIndex, get: (bookId, indexes) => (asked.push([...indexes]), textIndex.get(bookId, indexes)) });
    const bookId = await bookRow(t.deps.db, "package.json");
    await t.deps.db.query("UPDATE books SET page_count = 10 WHERE id = $1", [bookId]);
    await textIndex.upsert(bookId, INDEXED);
    if (withPositions) await saveBookReadingPositions(t.deps.db, bookId, { chunkEnds: [0.3, 0.6, 1], checkpoints: [] });
    const passages = async (query: string) => {
      const res = await t.request(`/playground/passages?book_id=${bookId}&chunks=0,1,2${query}`);
      expect(res.status).toBe(200);
      return ((await res.json()) as { passages: { chunk_index: number; text: string | null; past_position?: true }[] }).passages.map((p) =>
        p.past_position ? `${p.chunk_index}: withheld` : `${p.chunk_index}: ${p.text === null ? "none" : "text"}`,
      );
    };
    return { t, bookId, asked, passages };
  }

  test.each([
    ["no position anywhere: the whole book", "", null, ["0: text", "1: text", "2: text"]],
    ["the page's position, 50 %", "&reading_position=0.5", null, ["0: text", "1: withheld", "2: withheld"]],
    ["the page's position, 0.6 exactly", "&reading_position=0.6", null, ["0: text", "1: text", "2: withheld"]],
    ["the page's position before the first chunk ends", "&reading_position=0.1", null, ["0: withheld", "1: withheld", "2: withheld"]],
    ["the page's position, the end", "&reading_position=1", null, ["0: text", "1: text", "2: text"]],
    ["the local reader's library page 4 of 10", "", 4, ["0: text", "1: withheld", "2: withheld"]],
    ["the page's position over the library's", "&reading_position=0.9", 4, ["0: text", "1: text", "2: withheld"]],
  ])("a passage past the reader's position is withheld, as the chat withholds it: %s", async (_, query, libraryPage, expected) => {
    const { t, bookId, asked, passages } = await positionedBook();
    if (libraryPage !== null) {
      await addToLibrary(t.deps.db, LOCAL_USER_ID, bookId);
      await t.deps.db.query("UPDATE user_library SET current_page = $3 WHERE user_id = $1 AND book_id = $2", [LOCAL_USER_ID, bookId, libraryPage]);
    }
    expect(await passages(query)).toEqual(expected);
    // A withheld passage is not even looked up.
    expect(asked.flat()).toEqual(expected.filter((p) => !p.endsWith("withheld")).map((p) => Number(p.split(":")[0])));
  });

  test("a book ingested before positions were recorded shows no passage to a reader part-way through; a bad position is a 400", async () => {
    const { t, bookId, passages } = await positionedBook(false);
    expect(await passages("&reading_position=0.9")).toEqual(["0: withheld", "1: withheld", "2: withheld"]);
    expect(await passages("")).toEqual(["0: text", "1: text", "2: text"]);
    for (const bad of ["1.5", "-0.1", "abc", ""]) expect((await t.request(`/playground/passages?book_id=${bookId}&chunks=0&reading_position=${bad}`)).status).toBe(400);
  });
});

describe("the chat page's address", () => {
  /** The relative paths the page fetches, as written in it (`playground/books`, `character/chat`, …). */
  function fetchedPaths(html: string): string[] {
    return [...html.matchAll(/fetch\(["`]([a-z/]+)/g)].map((m) => m[1]!);
  }

  test.each(["/playground", "/playground/"])("opened at %s, every relative fetch of the page reaches a route", async (address) => {
    const t = await playground(createEmbeddedTextIndex({ dir: await freshDir() }));
    let url = new URL(address, "http://localhost");
    let res = await t.request(url.pathname);
    if (res.status === 301) {
      url = new URL(res.headers.get("location")!, url);
      res = await t.request(url.pathname);
    }
    expect(res.status).toBe(200);
    const paths = fetchedPaths(await res.text());
    expect(paths).toEqual(expect.arrayContaining(["playground/books", "playground/session", "playground/passages", "character/chat"]));
    for (const path of paths) {
      const target = new URL(path, url).pathname;
      const method = path === "playground/books" || path === "playground/passages" ? "GET" : "POST";
      const answer = await t.request(target, method === "GET" ? {} : { method, headers: { "content-type": "application/json" }, body: "{}" });
      expect({ target, status: answer.status }).not.toEqual({ target, status: 404 });
      expect(target).toStartWith(`/${path.split("/")[0]}`);
    }
  });
});

/** A completed book with one character, and the local reader's session with it. */
async function localReaderSession() {
  const t = await playground(createEmbeddedTextIndex({ dir: await freshDir() }));
  const book = await insertBook(t.deps.db, { title: "Harbour Tales", processingStatus: "completed" });
  const {
    characters: [character],
  } = await saveCharacters(t.deps.db, book.id, [{ name: "Maren", systemPrompt: "I am Maren." }]);
  const mine = await createSession(t.deps.db, { userId: LOCAL_USER_ID, characterId: character!.id });
  return { t, character: character!, mine };
}

describe("the chat page's earlier messages", () => {
  test("the local reader's session answers its last 50 messages in order; another reader's session is a 404 and a malformed id a 400", async () => {
    const { t, character, mine } = await localReaderSession();
    const theirs = await createSession(t.deps.db, { userId: crypto.randomUUID(), characterId: character.id });
    for (let i = 0; i < 30; i++) await appendExchange(t.deps.db, mine.id, `Question ${i}?`, `Answer ${i}.`, "");
    await appendExchange(t.deps.db, theirs.id, "A private question?", "A private answer.", "");

    const res = await t.request(`/playground/messages?session_id=${mine.id}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { message_count: number; messages: { role: string; content: string }[] };
    expect(body.message_count).toBe(30);
    expect(body.messages).toHaveLength(DEFAULT_HISTORY_MESSAGES);
    expect(body.messages.slice(0, 2)).toEqual([{ role: "user", content: "Question 5?" }, { role: "assistant", content: "Answer 5." }]);
    expect(body.messages.at(-1)).toEqual({ role: "assistant", content: "Answer 29." });

    const other = await t.request(`/playground/messages?session_id=${theirs.id}`);
    expect([other.status, await other.json()]).toEqual([404, { error: "no such local session" }]);
    const bad = await t.request("/playground/messages?session_id=not-a-uuid");
    expect([bad.status, await bad.json()]).toEqual([400, { error: "query must be ?session_id=<uuid>[&limit=<1-50>]" }]);
  });

  test("rows the frontend wrote of any length: each message is cut, the answer stays within its bound, and ?limit= takes fewer", async () => {
    const { t, mine } = await localReaderSession();
    const huge = "x".repeat(1_000_000);
    for (let i = 0; i < 25; i++) await appendExchange(t.deps.db, mine.id, `${i}${huge}`, `Answer ${i}.`, "");

    const res = await t.request(`/playground/messages?session_id=${mine.id}`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.length).toBeLessThan(HISTORY_CHARS + 10_000);
    const { messages } = JSON.parse(text) as { messages: { role: string; content: string; truncated?: true }[] };
    expect(messages.at(-1)).toEqual({ role: "assistant", content: "Answer 24." });
    expect(messages.at(-2)).toEqual({ role: "user", content: `24${"x".repeat(HISTORY_MESSAGE_CHARS - 2)}`, truncated: true });
    expect(messages.length).toBeLessThan(DEFAULT_HISTORY_MESSAGES);

    const two = await t.request(`/playground/messages?session_id=${mine.id}&limit=2`);
    expect(((await two.json()) as { messages: unknown[] }).messages).toHaveLength(2);
    for (const limit of ["0", "51", "x"]) expect((await t.request(`/playground/messages?session_id=${mine.id}&limit=${limit}`)).status).toBe(400);
  });
});
