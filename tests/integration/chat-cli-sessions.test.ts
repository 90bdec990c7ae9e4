import { afterAll, beforeAll, beforeEach, expect, setDefaultTimeout, test } from "bun:test";
import { findLocalChat, LOCAL_USER_ID, LocalChoiceError, openLocalChat } from "../../common/local/sessions.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import type { Character } from "../../common/contract/rows.ts";
import { setProcessingStatus } from "../../common/db/ingestions.ts";
import { saveCharacters } from "../../common/db/characters.ts";
import { createSession, insertBook } from "../../common/db/frontend-rows.ts";

// A fresh embedded Postgres runs initdb.
setDefaultTimeout(60_000);

const OTHER_USER_ID = "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f7a";

let db: Database;
beforeAll(async () => {
  db = await createPgliteDatabase();
  await migrate(db);
});
afterAll(async () => {
  await db.close();
});

interface Library {
  older: { id: string; characters: Character[] };
  newer: { id: string; characters: Character[] };
}
let library: Library;

async function completedBook(title: string, characters: { name: string; aliases?: string[]; importance: number }[]) {
  const book = await insertBook(db, { title });
  await setProcessingStatus(db, book.id, "completed");
  return { id: book.id, characters: (await saveCharacters(db, book.id, characters)).characters };
}

beforeEach(async () => {
  await db.exec("DELETE FROM books; DELETE FROM user_library;");
  const older = await completedBook("The Mending Room", [
    { name: "Ottilie", aliases: ["Ottilie Marsh", "Miss Marsh"], importance: 200 },
    { name: "Jonah", aliases: ["Jonah Pike"], importance: 150 },
  ]);
  // created_at orders "newest"; now() is per transaction, so give the second book a later one.
  await db.query("UPDATE books SET created_at = now() - interval '1 hour' WHERE id = $1", [older.id]);
  const newer = await completedBook("Harbour Lights", [
    { name: "Captain Reyes", importance: 90 },
    { name: "Elinor", aliases: ["Elinor Vance"], importance: 120 },
  ]);
  await insertBook(db, { title: "Still Processing" });
  library = { older, newer };
});

test("with no session yet, the newest ingested book and its most important character are chosen, and the session is created once", async () => {
  const chat = await openLocalChat(db);
  expect(chat).toMatchObject({
    user_id: LOCAL_USER_ID,
    book_id: library.newer.id,
    book_title: "Harbour Lights",
    character_name: "Elinor",
    message_count: 0,
  });
  expect((await openLocalChat(db)).session_id).toBe(chat.session_id);
  expect(await db.query("SELECT user_id, book_id FROM user_library")).toEqual([{ user_id: LOCAL_USER_ID, book_id: library.newer.id }]);
  expect(await db.query("SELECT id FROM chat_sessions")).toHaveLength(1);
});

test("a book is chosen by id or by title in any case, a character by name or alias in any case", async () => {
  expect(await openLocalChat(db, { book: library.older.id })).toMatchObject({ book_id: library.older.id, character_name: "Ottilie" });
  expect(await openLocalChat(db, { book: "the mending ROOM", character: "jonah pike" })).toMatchObject({ character_name: "Jonah" });
  expect(await openLocalChat(db, { book: "Harbour Lights", character: "captain reyes" })).toMatchObject({ character_name: "Captain Reyes" });
});

test("left unchosen, the book and character are those of the last session used", async () => {
  const jonah = await openLocalChat(db, { book: "The Mending Room", character: "Jonah" });
  expect(await openLocalChat(db)).toEqual(jonah);
  await openLocalChat(db, { book: "Harbour Lights" });
  // Back in the first book without naming a character: the one last talked to there, not the most important.
  expect((await openLocalChat(db, { book: "The Mending Room" })).character_name).toBe("Jonah");
});

test("another reader's sessions are never picked", async () => {
  await createSession(db, { userId: OTHER_USER_ID, characterId: library.older.characters[1]!.id });
  expect(await findLocalChat(db)).toBeNull();
  expect((await openLocalChat(db)).book_id).toBe(library.newer.id);
});

test("a book and a character are found whatever the case, by alias, without a leading \"The\", or by a longer or shorter form of a name", async () => {
  const picks: [string, string, string][] = [
    ["the mending room", "OTTILIE", "Ottilie"],
    ["Mending Room", "miss marsh", "Ottilie"],
    ["mending room", "Pike", "Jonah"],
    ["The Mending Room", "Jonah the apprentice", "Jonah"],
    [library.older.id, "  jonah  pike ", "Jonah"],
  ];
  for (const [book, character, name] of picks) {
    const chat = await openLocalChat(db, { book, character });
    expect({ book, character, picked: chat.character_name, title: chat.book_title }).toEqual({ book, character, picked: name, title: "The Mending Room" });
  }
});

test("a choice that names nothing lists what can be chosen instead", async () => {
  const book = await openLocalChat(db, { book: "Moby-Dick" }).catch((err: unknown) => err);
  expect(book).toBeInstanceOf(LocalChoiceError);
  expect((book as Error).message).toBe(
    `no ingested book has the id or title "Moby-Dick". Books you can chat about:\n  Harbour Lights (${library.newer.id})\n  The Mending Room (${library.older.id})`,
  );
  const character = await openLocalChat(db, { book: "The Mending Room", character: "Hester" }).catch((err: unknown) => err);
  expect((character as Error).message).toBe(
    '"The Mending Room" has no character called "Hester". Its characters:\n  Ottilie (Ottilie Marsh, Miss Marsh)\n  Jonah (Jonah Pike)',
  );
  await db.exec("DELETE FROM books;");
  await expect(openLocalChat(db)).rejects.toThrow("no book has been ingested yet: add one with `npm run ingest -- <file.txt>`");
  expect(await db.query("SELECT id FROM chat_sessions")).toEqual([]);
});

test("on a database shared with the frontend, a new session is made only with --write-frontend-tables; an existing one is found without it", async () => {
  const shared: Database = { ...db, driver: "postgres" };
  const before = await db.query("SELECT id FROM chat_sessions");
  const refused = await openLocalChat(shared, { book: library.older.id, character: "Jonah" }).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(LocalChoiceError);
  expect((refused as Error).message).toContain("pass --write-frontend-tables");
  expect(await db.query("SELECT id FROM chat_sessions")).toEqual(before);

  const made = await openLocalChat(shared, { book: library.older.id, character: "Jonah" }, { writeFrontendTables: true });
  expect(made).toMatchObject({ character_name: "Jonah", message_count: 0 });
  expect((await openLocalChat(shared, { book: library.older.id, character: "Jonah" })).session_id).toBe(made.session_id);
});
