import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFile, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase } from "../../common/db/create.ts";
import { type Database, DatabaseError, type DatabaseErrorCode } from "../../common/db/index.ts";
import { MIGRATIONS_DIR, MigrationError, migrate, readMigrations } from "../../common/db/migrate.ts";
import { createNeonDatabase } from "../../common/db/neon.ts";
import { PGLITE_SHARED_BUFFERS } from "../../common/db/pglite-options.ts";
import { createPgliteDatabase, type PgliteDatabaseOptions } from "../../common/db/pglite.ts";
import { createPostgresDatabase } from "../../common/db/postgres.ts";
import * as fr from "../../common/db/frontend-rows.ts";
import * as positions from "../../common/db/reading-positions.ts";
import { type Character, LANGUAGES, type ProcessingStatus } from "../../common/contract/rows.ts";
import { getBook } from "../../common/db/books.ts";
import { getIngestion, setProcessingStatus } from "../../common/db/ingestions.ts";
import { getCharacter, listCharacters, saveCharacters } from "../../common/db/characters.ts";
import { MESSAGE_COUNT_MAX, appendExchange, getRecentMessages, getSession, getSessionWithRecentMessages, setSessionSummary } from "../../common/db/sessions.ts";
import { getPreferences, getReaderState } from "../../common/db/reader-state.ts";
import { insertFrontendRows } from "../support/frontend-schema.ts";
import { type TestDatabase, createTestDatabase, probePostgres } from "../support/postgres.ts";
import { closedPort } from "../support/redis.ts";
import { startNeonBridge, type NeonBridge } from "../../dev/edge/neon-bridge.ts";
import { startPgliteServer, type PgliteServer } from "../../dev/edge/pglite-server.ts";

const SETUP_TIMEOUT_MS = 60_000;
const FIXTURES_DIR = join(import.meta.dir, "..", "fixtures", "db");

/** One adapter as the contract sees it. */
interface AdapterUnderTest {
  driver: Database["driver"];
  /** A new, empty database. */
  open(): Promise<Database>;
  /** A second connection to db's database, as another process starting at the same time would open. */
  connectAgain(db: Database): Promise<Database>;
  /** Closes and drops whatever open() created. */
  dispose(): Promise<void>;
}

async function expectDatabaseError(promise: Promise<unknown>, code: DatabaseErrorCode): Promise<DatabaseError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DatabaseError);
  expect((error as DatabaseError).code).toBe(code);
  return error as DatabaseError;
}

/** A Database whose transactions fail at their nth statement, as a connection dropped mid-way would. */
/** A migrations folder holding the real migrations plus the named fixture files (or given contents). */
async function migrationsWith(extra: Record<string, string | null>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "migrations-"));
  for (const name of await readdir(MIGRATIONS_DIR)) await copyFile(join(MIGRATIONS_DIR, name), join(dir, name));
  for (const [name, content] of Object.entries(extra)) {
    if (content === null) await copyFile(join(FIXTURES_DIR, name), join(dir, name));
    else await writeFile(join(dir, name), content);
  }
  return dir;
}

/** Tests of one adapter beyond the contract, given the database the contract opened and migrated. */
type AdapterTests = (db: () => Database) => void;

function databaseContract(name: string, makeTarget: () => AdapterUnderTest, adapterTests?: AdapterTests): void {
  describe(name, () => {
    let target: AdapterUnderTest;
    let db: Database;
    let firstRuns: string[][];
    const tempDirs: string[] = [];

    beforeAll(async () => {
      target = makeTarget();
      db = await target.open();
      const other = await target.connectAgain(db);
      firstRuns = await Promise.all([migrate(db), migrate(other)]);
      await other.close();
    }, SETUP_TIMEOUT_MS);

    afterAll(async () => {
      await target?.dispose();
      for (const dir of tempDirs) await rm(dir, { recursive: true, force: true });
    }, SETUP_TIMEOUT_MS);

    async function fixtureMigrations(extra: Record<string, string | null>): Promise<string> {
      const dir = await migrationsWith(extra);
      tempDirs.push(dir);
      return dir;
    }

    async function bookWithCharacters(names: string[]) {
      const book = await fr.insertBook(db, { title: "Pride and Prejudice", author: "Jane Austen" });
      const { characters } = await saveCharacters(
        db,
        book.id,
        names.map((n, i) => ({ name: n, importance: names.length - i })),
      );
      return { book, characters };
    }

    test("the adapter reports which driver it is", () => {
      expect(db.driver).toBe(target.driver);
    });

    adapterTests?.(() => db);

    describe("migrations", () => {
      test("two connections migrating an empty database at once apply every file exactly once, in order", async () => {
        const files = (await readMigrations()).map((m) => m.name);
        expect(firstRuns.flat().sort()).toEqual(files);
        const recorded = await db.query<{ name: string }>("SELECT name FROM backend_schema_migrations ORDER BY version");
        expect(recorded.map((r) => r.name).filter((n) => files.includes(n))).toEqual(files);
      });

      test("migrating a current schema applies nothing", async () => {
        expect(await migrate(db)).toEqual([]);
      });

      test("a new migration file is applied once, on the next run only", async () => {
        const dir = await fixtureMigrations({ "0900_fixture_widgets.sql": null });
        const first = await migrate(db, { directory: dir });
        const second = await migrate(db, { directory: dir });
        expect([...first, ...second]).toContain("0900_fixture_widgets.sql");
        expect(second).toEqual([]);
        expect(await db.query("SELECT id, label FROM fixture_widgets")).toEqual([{ id: 1, label: "first" }]);
      });

      test("a migration that fails leaves none of its changes and is not recorded", async () => {
        const dir = await fixtureMigrations({ "0900_fixture_widgets.sql": null, "0901_fixture_broken.sql": null });
        const error = await migrate(db, { directory: dir }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(MigrationError);
        expect((error as Error).message).toContain("0901_fixture_broken.sql");
        expect(await db.query("SELECT id FROM fixture_widgets")).toEqual([{ id: 1 }]);
        expect(await db.query("SELECT to_regclass('fixture_gadgets') AS t")).toEqual([{ t: null }]);
        expect(await db.query("SELECT 1 FROM backend_schema_migrations WHERE version = '0901'")).toEqual([]);
      });

      test("a migration file edited after it was applied is refused", async () => {
        await migrate(db, { directory: await fixtureMigrations({ "0900_fixture_widgets.sql": null }) });
        const edited = await fixtureMigrations({ "0900_fixture_widgets.sql": "CREATE TABLE fixture_widgets (id bigint);" });
        const error = await migrate(db, { directory: edited }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(MigrationError);
        expect((error as Error).message).toContain("0900_fixture_widgets.sql was changed");
      });
    });

    describe("queries and types", () => {
      test("positional parameters bind text, integers, uuids, booleans, dates and undefined as NULL", async () => {
        const id = crypto.randomUUID();
        const at = new Date("2024-02-29T12:34:56.789Z");
        const [row] = await db.query("SELECT $1::text AS t, $2::int AS i, $3::uuid AS u, $4::boolean AS b, $5::timestamptz AS d, $6::text AS n", [
          "O'Brien; DROP TABLE books",
          42,
          id,
          false,
          at,
          undefined,
        ]);
        expect(row).toEqual({ t: "O'Brien; DROP TABLE books", i: 42, u: id, b: false, d: at, n: null });
      });

      test("every driver returns the same JavaScript types for the same SQL", async () => {
        const [row] = await db.query(
          `SELECT count(*) AS n, 9007199254740991::int8 AS big, 2.5::numeric AS num, sum(x) AS total,
                  now() AS at, '{"a":[1,"two",null]}'::jsonb AS doc, '[1,2]'::jsonb AS list,
                  gen_random_uuid() AS id, true AS flag, pg_sleep(0) AS nothing
           FROM generate_series(1, 3) AS x`,
        );
        expect(row).toMatchObject({ n: 3, big: 9007199254740991, num: 2.5, total: 6, flag: true, nothing: null });
        expect(row!.at).toBeInstanceOf(Date);
        expect(row!.doc).toEqual({ a: [1, "two", null] });
        expect(row!.list).toEqual([1, 2]);
        expect(row!.id).toMatch(/^[0-9a-f-]{36}$/);
      });

      test("objects and arrays bound to jsonb parameters are stored as JSON", async () => {
        const [row] = await db.query("SELECT $1::jsonb AS doc, $2::jsonb AS list, jsonb_typeof($2) AS kind", [
          { nested: { ok: true }, n: 1 },
          ["a", "b"],
        ]);
        expect(row).toEqual({ doc: { nested: { ok: true }, n: 1 }, list: ["a", "b"], kind: "array" });
      });

      test("exec runs several statements at once", async () => {
        await db.exec("CREATE TABLE exec_probe (n int); INSERT INTO exec_probe VALUES (1), (2); INSERT INTO exec_probe VALUES (3)");
        expect(await db.query("SELECT sum(n) AS s FROM exec_probe")).toEqual([{ s: 6 }]);
      });

      test("query refuses several statements at once", async () => {
        const error = await db.query("SELECT 1 AS a; SELECT 2 AS b").catch((e: unknown) => e);
        expect(error).toBeInstanceOf(DatabaseError);
      });

      test("a statement with no result rows returns an empty list", async () => {
        expect(await db.query("UPDATE books SET title = title WHERE false")).toEqual([]);
      });
    });

    describe("transactions", () => {
      test("a transaction that resolves is committed and returns fn's result", async () => {
        const key = `committed ${crypto.randomUUID()}`;
        const result = await db.transaction(async (tx) => {
          const [row] = await tx.query<{ key: string }>("INSERT INTO settings (key, value) VALUES ($1, '1'::jsonb) RETURNING key", [key]);
          return row!.key;
        });
        expect(result).toBe(key);
        expect(await db.query("SELECT value FROM settings WHERE key = $1", [key])).toEqual([{ value: 1 }]);
      });

      test("a transaction whose fn throws is rolled back and the same error is rethrown", async () => {
        const title = `rolled back ${crypto.randomUUID()}`;
        const thrown = new Error("changed my mind");
        const caught = await db
          .transaction(async (tx) => {
            await tx.query("INSERT INTO settings (key, value) VALUES ($1, '1'::jsonb)", [title]);
            throw thrown;
          })
          .catch((e: unknown) => e);
        expect(caught).toBe(thrown);
        expect(await db.query("SELECT key FROM settings WHERE key = $1", [title])).toEqual([]);
      });

      test("a failing statement inside a transaction rolls back the earlier ones and surfaces as a DatabaseError", async () => {
        const title = `half done ${crypto.randomUUID()}`;
        await expectDatabaseError(
          db.transaction(async (tx) => {
            await tx.query("INSERT INTO settings (key, value) VALUES ($1, '1'::jsonb)", [title]);
            await tx.query("INSERT INTO books (title) VALUES (NULL)");
          }),
          "not_null_violation",
        );
        expect(await db.query("SELECT key FROM settings WHERE key = $1", [title])).toEqual([]);
      });
    });

    describe("errors", () => {
      test("a duplicate key is a unique_violation", async () => {
        const book = await fr.insertBook(db, { title: "Emma" });
        const error = await expectDatabaseError(fr.insertBook(db, { id: book.id, title: "Emma again" }), "unique_violation");
        expect(error.sqlState).toBe("23505");
      });

      test("a reference to a missing row is a foreign_key_violation", async () => {
        await expectDatabaseError(
          db.query("INSERT INTO characters (book_id, name) VALUES ($1, 'Nobody')", [crypto.randomUUID()]),
          "foreign_key_violation",
        );
      });

      test("a value a CHECK constraint refuses is a check_violation", async () => {
        await expectDatabaseError(fr.insertBook(db, { title: "" }), "check_violation");
        const book = await fr.insertBook(db, { title: "Emma" });
        await expectDatabaseError(
          setProcessingStatus(db, book.id, "finished" as ProcessingStatus),
          "check_violation",
        );
      });

      test("a missing required value is a not_null_violation", async () => {
        await expectDatabaseError(db.query("INSERT INTO books (title) VALUES ($1)", [null]), "not_null_violation");
      });

      test("a malformed value is invalid_input", async () => {
        await expectDatabaseError(db.query("SELECT $1::uuid", ["not-a-uuid"]), "invalid_input");
      });
    });

    describe("the spec's tables", () => {
      test("every frontend-shaped insert of SPEC.md's resources succeeds on the schema the backend creates", async () => {
        await insertFrontendRows(db);
      });

      test("a book inserted as the frontend uploads it gets the spec's defaults", async () => {
        const id = crypto.randomUUID();
        await db.query(
          "INSERT INTO books (id, title, slug, author, description, language, page_count, file_path) VALUES ($1, 'Emma', $2, 'Jane Austen', 'A matchmaker in Highbury.', 'English', 474, $3)",
          [id, `emma-${id}`, `books/${id}/emma.txt`],
        );
        const [row] = await db.query("SELECT status, processing_status, is_public, is_free FROM books WHERE id = $1", [id]);
        expect(row).toEqual({ status: "approved", processing_status: "pending", is_public: true, is_free: true });
        const userId = crypto.randomUUID();
        await fr.addToLibrary(db, userId, id);
        expect(await db.query("SELECT reading_status, current_page FROM user_library WHERE user_id = $1", [userId])).toEqual([
          { reading_status: "unread", current_page: 0 },
        ]);
      });

      test("the spec's constraints refuse what the frontend's forms refuse", async () => {
        const insert = (fields: { title?: string; author?: string; description?: string; language?: string }) =>
          db.query("INSERT INTO books (title, slug, author, description, language) VALUES ($1, $2, $3, $4, $5)", [
            fields.title ?? "Emma",
            crypto.randomUUID(),
            fields.author ?? "Jane Austen",
            fields.description ?? "A matchmaker in Highbury.",
            fields.language ?? "English",
          ]);
        await expectDatabaseError(insert({ author: "" }), "check_violation");
        await expectDatabaseError(insert({ description: "Too short" }), "check_violation");
        await expectDatabaseError(insert({ language: "French" }), "check_violation");
        for (const language of LANGUAGES) await insert({ language });
      });
    });

    describe("books and ingestion", () => {
      test("a book can be read back with what ingestion needs", async () => {
        const book = await fr.insertBook(db, { title: "Alice's Adventures in Wonderland", author: "Lewis Carroll" });
        expect(book).toEqual({
          id: book.id,
          title: "Alice's Adventures in Wonderland",
          author: "Lewis Carroll",
          description: "Alice's Adventures in Wonderland, added as a text file.",
          language: "English",
          filePath: null,
          processingStatus: "pending",
        });
      });

      test("an unknown or malformed book id finds nothing", async () => {
        expect(await getBook(db, crypto.randomUUID())).toBeNull();
        expect(await getBook(db, "42")).toBeNull();
      });

      test("processing status moves through ingestion; attempts, the error and the chunk count are kept in our own table", async () => {
        const book = await fr.insertBook(db, { title: "War and Peace" });
        const [before] = await db.query<{ updated_at: Date }>("SELECT updated_at FROM books WHERE id = $1", [book.id]);
        expect(await getIngestion(db, book.id)).toBeNull();
        expect(await setProcessingStatus(db, book.id, "processing")).toBe(true);
        expect(await setProcessingStatus(db, book.id, "failed", { error: "download timed out" })).toBe(true);
        expect(await getBook(db, book.id)).toMatchObject({ processingStatus: "failed" });
        expect(await getIngestion(db, book.id)).toMatchObject({ attempts: 1, lastError: "download timed out", chunkCount: null });
        await setProcessingStatus(db, book.id, "processing");
        await setProcessingStatus(db, book.id, "completed", { chunkCount: 42 });
        expect(await getBook(db, book.id)).toMatchObject({ processingStatus: "completed" });
        const record = await getIngestion(db, book.id);
        expect(record).toMatchObject({ attempts: 2, lastError: null, chunkCount: 42 });
        expect(record!.finishedAt).toBeInstanceOf(Date);
        // Only processing_status of the frontend's row is written.
        expect(await db.query("SELECT updated_at FROM books WHERE id = $1", [book.id])).toEqual([before!]);
        expect(await setProcessingStatus(db, crypto.randomUUID(), "completed")).toBe(false);
      });

      test("a completed book stays completed while it is re-ingested and when that fails; the failure is recorded in our table", async () => {
        const book = await fr.insertBook(db, { title: "Middlemarch" });
        await setProcessingStatus(db, book.id, "processing");
        await setProcessingStatus(db, book.id, "completed", { chunkCount: 7 });
        expect(await setProcessingStatus(db, book.id, "processing")).toBe(true);
        expect((await getBook(db, book.id))?.processingStatus).toBe("completed");
        await setProcessingStatus(db, book.id, "failed", { error: "download failed: file_url answered HTTP 404" });
        expect((await getBook(db, book.id))?.processingStatus).toBe("completed");
        expect(await getIngestion(db, book.id)).toMatchObject({ attempts: 2, lastError: "download failed: file_url answered HTTP 404", chunkCount: 7 });
      });

      test("adding a book to a library twice keeps one entry", async () => {
        const book = await fr.insertBook(db, { title: "Emma" });
        const userId = crypto.randomUUID();
        await fr.addToLibrary(db, userId, book.id);
        await fr.addToLibrary(db, userId, book.id);
        expect(await db.query("SELECT count(*) AS n FROM user_library WHERE user_id = $1", [userId])).toEqual([{ n: 1 }]);
      });
    });

    describe("characters", () => {
      test("saving characters stores them with their profile and returns them in the given order", async () => {
        const book = await fr.insertBook(db, { title: "Pride and Prejudice" });
        const { characters: saved } = await saveCharacters(db, book.id, [
          { name: "Mr. Darcy", aliases: ["Darcy", "Fitzwilliam"], importance: 5, profileJson: { traits: ["proud"] } },
          { name: "Elizabeth Bennet", aliases: ["Lizzy"], importance: 9, color: "#aa3366", emoji: "📚", systemPrompt: "I am Elizabeth." },
        ]);
        expect(saved.map((c) => c.name)).toEqual(["Mr. Darcy", "Elizabeth Bennet"]);
        expect(await getCharacter(db, saved[1]!.id)).toMatchObject({
          bookId: book.id,
          aliases: ["Lizzy"],
          color: "#aa3366",
          emoji: "📚",
          avatarUrl: null,
          systemPrompt: "I am Elizabeth.",
          importance: 9,
          profileJson: null,
          retiredAt: null,
        });
        expect((await getCharacter(db, saved[0]!.id))!.profileJson).toEqual({ traits: ["proud"] });
        expect((await listCharacters(db, book.id)).map((c) => c.name)).toEqual(["Elizabeth Bennet", "Mr. Darcy"]);
      });

      test("re-ingesting keeps the ids of characters still present, and every character a reader used", async () => {
        const { book, characters } = await bookWithCharacters(["Elizabeth Bennet", "Mr. Darcy", "Mr. Collins", "Mrs. Bennet", "Lydia"]);
        const [lizzy, , collins, mrsBennet, lydia] = characters;
        const userId = crypto.randomUUID();
        const kept = await fr.createSession(db, { userId, characterId: lizzy!.id });
        const withCollins = await fr.createSession(db, { userId, characterId: collins!.id });
        await appendExchange(db, withCollins.id, "Will you dance?", "I am not in the habit of dancing.", "I am not…");
        await fr.upsertPreferences(db, { userId, characterId: mrsBennet!.id, relationshipMode: "parent" });

        const again = await saveCharacters(db, book.id, [
          { name: "Elizabeth Bennet", description: "Second of five sisters", importance: 10 },
          { name: "Mr. Darcy" },
          { name: "Jane Bennet" },
        ]);

        expect(again.characters[0]).toMatchObject({ id: lizzy!.id, description: "Second of five sisters", importance: 10 });
        expect(again.characters[1]!.id).toBe(characters[1]!.id);
        expect(again).toMatchObject({ retired: 2, removed: 1 });
        expect((await listCharacters(db, book.id)).map((c) => c.name).sort()).toEqual(["Elizabeth Bennet", "Jane Bennet", "Mr. Darcy"]);
        expect(await getSession(db, kept.id)).not.toBeNull();
        // The session with a character no longer found, its messages and the preferences all stay.
        expect(await getSession(db, withCollins.id)).toMatchObject({ characterId: collins!.id, messageCount: 1 });
        expect(await getRecentMessages(db, withCollins.id, 10)).toHaveLength(2);
        expect(await getCharacter(db, collins!.id)).toMatchObject({ name: "Mr. Collins", retiredAt: expect.any(Date) });
        expect(await getPreferences(db, userId, mrsBennet!.id)).toMatchObject({ relationshipMode: "parent" });
        // Nobody had used Lydia: she is gone.
        expect(await getCharacter(db, lydia!.id)).toBeNull();

        // Found again in a later run: no longer retired, same id.
        const third = await saveCharacters(db, book.id, [{ name: "Mr. Collins" }]);
        expect(third.characters[0]).toMatchObject({ id: collins!.id, retiredAt: null });
      });

      test("a character found but not written this time keeps what the previous run wrote", async () => {
        const book = await fr.insertBook(db, { title: "Persuasion" });
        const { characters } = await saveCharacters(db, book.id, [{ name: "Anne Elliot", systemPrompt: "I am Anne." }, { name: "Captain Wentworth" }]);
        const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });
        await saveCharacters(db, book.id, [{ name: "Captain Wentworth" }], { alsoFound: ["Anne Elliot", "Captain Wentworth"] });
        expect(await getCharacter(db, characters[0]!.id)).toMatchObject({ systemPrompt: "I am Anne.", retiredAt: null });
        expect(await getSession(db, session.id)).not.toBeNull();
      });

      test("saving an empty list removes every unused character of that book only", async () => {
        const { book } = await bookWithCharacters(["Emma Woodhouse"]);
        const { book: other } = await bookWithCharacters(["Mr. Knightley"]);
        expect(await saveCharacters(db, book.id, [])).toEqual({ characters: [], retired: 0, removed: 1 });
        expect(await listCharacters(db, book.id)).toEqual([]);
        expect(await listCharacters(db, other.id)).toHaveLength(1);
      });

      test("a character list naming someone twice is refused and changes nothing", async () => {
        const { book } = await bookWithCharacters(["Emma Woodhouse"]);
        await expectDatabaseError(
          saveCharacters(db, book.id, [{ name: "Harriet Smith" }, { name: "Harriet Smith" }]),
          "unique_violation",
        );
        expect((await listCharacters(db, book.id)).map((c) => c.name)).toEqual(["Emma Woodhouse"]);
      });

      test("a failed save leaves the previous characters in place", async () => {
        const { book } = await bookWithCharacters(["Emma Woodhouse", "Mr. Knightley"]);
        await expectDatabaseError(saveCharacters(db, book.id, [{ name: "Emma Woodhouse", color: "red" }]), "check_violation");
        expect((await listCharacters(db, book.id)).map((c) => c.name).sort()).toEqual(["Emma Woodhouse", "Mr. Knightley"]);
      });
    });

    describe("chat sessions and messages", () => {
      test("a session belongs to its character's book", async () => {
        const { book, characters } = await bookWithCharacters(["Sherlock Holmes"]);
        const userId = crypto.randomUUID();
        const session = await fr.createSession(db, { userId, characterId: characters[0]!.id });
        expect(session).toMatchObject({ userId, bookId: book.id, characterId: characters[0]!.id, messageCount: 0, preview: null });
        expect(await getSession(db, session.id)).toEqual(session);
        expect(await getSession(db, "not-a-session")).toBeNull();
      });

      test("each exchange adds both messages, the question ordered before its reply by created_at, and counts one exchange", async () => {
        const { characters } = await bookWithCharacters(["Alice"]);
        const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });

        const first = await appendExchange(db, session.id, "Who are you?", "I hardly know, sir.", "I hardly know");
        const second = await appendExchange(db, session.id, "Where are you going?", "Down the rabbit hole!", "Down the rabbit hole");

        expect(first).toMatchObject({ messageCount: 1, preview: "I hardly know" });
        expect(second).toMatchObject({ messageCount: 2, preview: "Down the rabbit hole" });
        expect(second!.updatedAt.getTime()).toBeGreaterThanOrEqual(session.updatedAt.getTime());
        const recent = await getRecentMessages(db, session.id, 3);
        expect(recent.map((m) => [m.role, m.content])).toEqual([
          ["assistant", "I hardly know, sir."],
          ["user", "Where are you going?"],
          ["assistant", "Down the rabbit hole!"],
        ]);
        // The frontend's own query: created_at alone gives the conversation's order, with no ties.
        const shown = await db.query<{ content: string; same_time: boolean }>(
          `SELECT content, count(*) OVER (PARTITION BY created_at) > 1 AS same_time
             FROM messages WHERE session_id = $1 ORDER BY created_at`,
          [session.id],
        );
        expect(shown).toEqual(
          ["Who are you?", "I hardly know, sir.", "Where are you going?", "Down the rabbit hole!"].map((content) => ({ content, same_time: false })),
        );
      });

      test("a message the frontend inserts directly (session_id, role, content) is part of the history", async () => {
        const { characters } = await bookWithCharacters(["Alice"]);
        const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });
        await appendExchange(db, session.id, "Who are you?", "I hardly know, sir.", "I hardly know");
        // A reader's next message comes later than the reply; the embedded database's clock ticks in milliseconds.
        await Bun.sleep(2);
        await db.query("INSERT INTO messages (session_id, role, content) VALUES ($1, 'user', 'Are you still there?')", [session.id]);
        expect((await getRecentMessages(db, session.id, 10)).map((m) => m.content)).toEqual([
          "Who are you?",
          "I hardly know, sir.",
          "Are you still there?",
        ]);
      });

      test("reading positions: chunk ends, first appearances, checkpoints and lines are stored and read back; a re-run replaces a character's checkpoints and lines", async () => {
        const { book, characters } = await bookWithCharacters(["Mara", "The Stranger"]);
        const [mara, stranger] = characters as [Character, Character];
        expect(await positions.getBookReadingPositions(db, book.id)).toBeNull();
        await positions.saveBookReadingPositions(db, book.id, { chunkEnds: [0.25, 0.5, 1], checkpoints: [0.25, 0.5, 0.75] });
        await positions.saveBookReadingPositions(db, book.id, { chunkEnds: [0.125, 0.5, 0.75, 1], checkpoints: [0.5] });
        expect(await positions.getBookReadingPositions(db, book.id)).toEqual({ chunkEnds: [0.125, 0.5, 0.75, 1], checkpoints: [0.5] });

        const early = { position: 0.25, profileJson: { voice: "wary", quotes: ["Who goes there?"] }, systemPrompt: "I am Mara, as of the first quarter." };
        const later = { position: 0.5, profileJson: { voice: "warmer" }, systemPrompt: "I am Mara, half-way." };
        const lines = [
          { position: 0.1, text: "Who goes there?" },
          { position: 0.55, text: "I was wrong about you, and I say so." },
        ];
        await positions.saveCharacterKnowledge(db, [
          { characterId: mara.id, firstAppearance: 0, checkpoints: [later, early], lines },
          { characterId: stranger.id, firstAppearance: 0.62, checkpoints: [], lines: [] },
        ]);
        expect(await positions.getCharacterKnowledge(db, mara.id)).toEqual({ firstAppearance: 0, checkpoints: [early, later] });
        expect(await positions.getCharacterLines(db, mara.id)).toEqual(lines);
        expect(await positions.getCharacterKnowledge(db, stranger.id)).toEqual({ firstAppearance: 0.62, checkpoints: [] });
        expect(await positions.getCharacterLines(db, stranger.id)).toEqual([]);

        // A second run where the half-way pass failed: the old half-way persona must not survive it.
        await positions.saveCharacterKnowledge(db, [{ characterId: mara.id, firstAppearance: 0.01, checkpoints: [early], lines: lines.slice(0, 1) }]);
        expect(await positions.getCharacterKnowledge(db, mara.id)).toEqual({ firstAppearance: 0.01, checkpoints: [early] });
        expect(await positions.getCharacterLines(db, mara.id)).toEqual(lines.slice(0, 1));
        expect(await positions.getCharacterKnowledge(db, stranger.id)).toEqual({ firstAppearance: 0.62, checkpoints: [] });
        expect(await positions.getCharacterKnowledge(db, "not-a-uuid")).toEqual({ firstAppearance: null, checkpoints: [] });
        expect(await positions.getCharacterLines(db, "not-a-uuid")).toEqual([]);
        await expectDatabaseError(positions.saveCharacterKnowledge(db, [{ characterId: mara.id, firstAppearance: 1.5, checkpoints: [], lines: [] }]), "check_violation");
        // A row of another shape (written by hand, or by a later version) yields only its well-formed lines, in book order.
        await db.query("UPDATE character_lines SET lines = $2::jsonb WHERE character_id = $1", [mara.id, [{ position: 0.9, text: "Late." }, { position: "x", text: 1 }, { position: 0.2, text: "Early." }, { position: 7, text: "Past the end." }]]);
        expect(await positions.getCharacterLines(db, mara.id)).toEqual([{ position: 0.2, text: "Early." }, { position: 0.9, text: "Late." }]);

        // Both go with their character, and the positions with their book.
        await db.query("DELETE FROM characters WHERE id = $1", [mara.id]);
        expect(await positions.getCharacterKnowledge(db, mara.id)).toEqual({ firstAppearance: null, checkpoints: [] });
        expect(await positions.getCharacterLines(db, mara.id)).toEqual([]);
        await db.query("DELETE FROM books WHERE id = $1", [book.id]);
        expect(await positions.getBookReadingPositions(db, book.id)).toBeNull();
      });

      test("the reader's page in the book, the book's page count and the reader's preferences are read in one statement", async () => {
        const book = await fr.insertBook(db, { title: "Emma", author: "Jane Austen", pageCount: 474 });
        const { characters } = await saveCharacters(db, book.id, [{ name: "Emma", importance: 1 }]);
        const userId = crypto.randomUUID();
        const ids = { userId, characterId: characters[0]!.id, bookId: book.id };
        expect(await getReaderState(db, ids, true)).toEqual({ currentPage: null, pageCount: 474, preferences: null });
        await fr.addToLibrary(db, userId, book.id);
        await db.query("UPDATE user_library SET current_page = 120 WHERE user_id = $1 AND book_id = $2", [userId, book.id]);
        await fr.upsertPreferences(db, { userId, characterId: characters[0]!.id, relationshipMode: "friend", speechModifiers: ["talk_less"] });
        expect(await getReaderState(db, ids, true)).toEqual({
          currentPage: 120,
          pageCount: 474,
          preferences: await getPreferences(db, userId, characters[0]!.id),
        });
        expect(await getReaderState(db, ids, false)).toEqual({ currentPage: 120, pageCount: 474, preferences: null });
        // Another reader's library row is not this reader's position.
        await fr.addToLibrary(db, crypto.randomUUID(), book.id);
        await db.query("UPDATE user_library SET current_page = 300 WHERE user_id <> $1 AND book_id = $2", [userId, book.id]);
        expect(await getReaderState(db, ids, false)).toMatchObject({ currentPage: 120 });
        expect(await getReaderState(db, { ...ids, userId: "not-a-user" }, true)).toEqual({ currentPage: null, pageCount: null, preferences: null });
      });

      test("the same statement brings a session's head: whose it is, its message count and summary, or null when there is none", async () => {
        const book = await fr.insertBook(db, { title: "Persuasion", author: "Jane Austen" });
        const { characters } = await saveCharacters(db, book.id, [{ name: "Anne", importance: 1 }]);
        const userId = crypto.randomUUID();
        const ids = { userId, characterId: characters[0]!.id, bookId: book.id };
        const session = await fr.createSession(db, { userId, characterId: characters[0]!.id });
        expect((await getReaderState(db, ids, false, session.id)).session).toEqual({
          id: session.id,
          userId,
          characterId: characters[0]!.id,
          bookId: book.id,
          messageCount: 0,
          summary: null,
          hasMessages: false,
        });
        // A message message_count does not count (the frontend's own row) is still seen.
        await db.query("INSERT INTO messages (session_id, role, content) VALUES ($1, 'user', 'Hello?')", [session.id]);
        expect((await getReaderState(db, ids, false, session.id)).session).toMatchObject({ messageCount: 0, hasMessages: true });
        expect((await getReaderState(db, ids, false, crypto.randomUUID())).session).toBeNull();
        expect((await getReaderState(db, ids, false, "not-a-session")).session).toBeNull();
        expect(await getReaderState(db, ids, false)).not.toHaveProperty("session");
      });

      test("a session whose message_count is at the column's largest value still saves its exchanges; the count stays there", async () => {
        const { characters } = await bookWithCharacters(["Alice"]);
        const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });
        await db.query("UPDATE chat_sessions SET message_count = $2 WHERE id = $1", [session.id, MESSAGE_COUNT_MAX - 1]);
        const last = await appendExchange(db, session.id, "One more?", "One more.", "One more.");
        expect(last).toMatchObject({ messageCount: MESSAGE_COUNT_MAX, previousCount: MESSAGE_COUNT_MAX - 1 });
        const past = await appendExchange(db, session.id, "And another?", "Still here.", "Still here.");
        expect(past).toMatchObject({ messageCount: MESSAGE_COUNT_MAX, previousCount: MESSAGE_COUNT_MAX, preview: "Still here." });
        expect((await getRecentMessages(db, session.id, 10)).map((m) => m.content)).toEqual(["One more?", "One more.", "And another?", "Still here."]);
      });

      test.each([["the largest timestamp", "294276-12-31 23:59:59.999999+00"], ["infinity", "infinity"], ["a year ahead", null]])(
        "a message stamped %s does not order later exchanges: they are stamped by the clock, in order, and saved",
        async (_, stamp) => {
          const { characters } = await bookWithCharacters(["Alice"]);
          const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });
          await db.query(
            "INSERT INTO messages (session_id, role, content, created_at) VALUES ($1, 'user', 'From the future', COALESCE($2::timestamptz, now() + interval '1 year'))",
            [session.id, stamp],
          );
          const first = await appendExchange(db, session.id, "Who are you?", "I hardly know, sir.", "I hardly know");
          const second = await appendExchange(db, session.id, "Where are you going?", "Down the rabbit hole!", "Down the rabbit hole");
          // Each save says how many messages the database keeps after it: the stray one.
          expect([first?.stampedAfter, second?.stampedAfter]).toEqual([1, 1]);
          const rows = await db.query<{ content: string; near_now: boolean; same_time: boolean }>(
            `SELECT content, created_at BETWEEN now() - interval '1 hour' AND now() + interval '1 hour' AS near_now,
                    count(*) OVER (PARTITION BY created_at) > 1 AS same_time
               FROM messages WHERE session_id = $1 ORDER BY created_at`,
            [session.id],
          );
          // The frontend's order: the new messages by the clock, in order, none tied; the stray stamp stays last.
          expect(rows).toEqual([
            ...["Who are you?", "I hardly know, sir.", "Where are you going?", "Down the rabbit hole!"].map((content) => ({ content, near_now: true, same_time: false })),
            { content: "From the future", near_now: false, same_time: false },
          ]);
        },
      );

      test("a message stamped within the lead bound ahead of the clock still orders the next exchange after it", async () => {
        const { characters } = await bookWithCharacters(["Alice"]);
        const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });
        await db.query("INSERT INTO messages (session_id, role, content, created_at) VALUES ($1, 'user', 'A minute ahead', now() + interval '1 minute')", [session.id]);
        expect((await appendExchange(db, session.id, "Who are you?", "I hardly know, sir.", "I hardly know"))?.stampedAfter).toBe(0);
        const shown = await db.query<{ content: string }>("SELECT content FROM messages WHERE session_id = $1 ORDER BY created_at", [session.id]);
        expect(shown.map((r) => r.content)).toEqual(["A minute ahead", "Who are you?", "I hardly know, sir."]);
      });

      test("saving an exchange again with the same message ids (a retry after a lost answer) writes nothing and answers the session", async () => {
        const { characters } = await bookWithCharacters(["Alice"]);
        const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });
        const ids = { userMessageId: crypto.randomUUID(), assistantMessageId: crypto.randomUUID() };
        const first = await appendExchange(db, session.id, "Who are you?", "I hardly know, sir.", "I hardly know", ids);
        const again = await appendExchange(db, session.id, "Who are you?", "I hardly know, sir.", "I hardly know", ids);
        expect(first).toMatchObject({ messageCount: 1, previousCount: 0 });
        expect(again).toEqual({ ...first!, previousCount: null });
        expect((await getRecentMessages(db, session.id, 10)).map((m) => [m.id, m.content])).toEqual([
          [ids.userMessageId, "Who are you?"],
          [ids.assistantMessageId, "I hardly know, sir."],
        ]);
      });

      test("a session is read with its last messages, oldest first, and its summary, in one statement", async () => {
        const { characters } = await bookWithCharacters(["Alice"]);
        const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });
        expect(await getSessionWithRecentMessages(db, session.id, 3)).toEqual({ ...session, summary: null, recentMessages: [] });

        await appendExchange(db, session.id, "Who are you?", "I hardly know, sir.", "I hardly know");
        const saved = await appendExchange(db, session.id, "Where are you going?", "Down the rabbit hole!", "Down the rabbit hole");
        await setSessionSummary(db, session.id, "Alice met a reader.");
        const { previousCount: _, stampedAfter: __, ...savedSession } = saved!;
        expect(await getSessionWithRecentMessages(db, session.id, 3)).toEqual({
          ...savedSession,
          summary: "Alice met a reader.",
          recentMessages: [
            { role: "assistant", content: "I hardly know, sir." },
            { role: "user", content: "Where are you going?" },
            { role: "assistant", content: "Down the rabbit hole!" },
          ],
        });
        expect(await getSessionWithRecentMessages(db, crypto.randomUUID(), 3)).toBeNull();
        expect(await getSessionWithRecentMessages(db, "not-a-session", 3)).toBeNull();
      });

      test("an exchange that fails part-way writes nothing", async () => {
        const { characters } = await bookWithCharacters(["Alice"]);
        const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });
        await appendExchange(db, session.id, "Hello", "Curiouser and curiouser!", "Curiouser");

        // The reply's row is refused after the reader's row and the session's count were written.
        await db.exec(`
          CREATE FUNCTION refuse_reply() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            IF NEW.content = 'Never written' THEN RAISE EXCEPTION 'reply refused (injected)'; END IF;
            RETURN NEW;
          END $$;
          CREATE TRIGGER refuse_reply BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION refuse_reply();
        `);
        try {
          await expectDatabaseError(appendExchange(db, session.id, "Lost?", "Never written", "Never"), "other");
        } finally {
          await db.exec("DROP TRIGGER refuse_reply ON messages; DROP FUNCTION refuse_reply();");
        }

        expect(await getSession(db, session.id)).toMatchObject({ messageCount: 1, preview: "Curiouser" });
        expect((await getRecentMessages(db, session.id, 10)).map((m) => m.content)).toEqual(["Hello", "Curiouser and curiouser!"]);
      });

      test("an exchange for a session that does not exist writes nothing and answers null", async () => {
        const missing = crypto.randomUUID();
        expect(await appendExchange(db, missing, "Hello?", "…", "…")).toBeNull();
        expect(await db.query("SELECT count(*) AS n FROM messages WHERE session_id = $1", [missing])).toEqual([{ n: 0 }]);
      });

      test("storing a summary leaves the frontend's session row alone", async () => {
        const { characters } = await bookWithCharacters(["Alice"]);
        const session = await fr.createSession(db, { userId: crypto.randomUUID(), characterId: characters[0]!.id });
        expect(await setSessionSummary(db, session.id, "Alice met a white rabbit.")).toBe(true);
        expect(await setSessionSummary(db, session.id, "Alice met a white rabbit and a hatter.")).toBe(true);
        expect(await getSession(db, session.id)).toEqual(session);
        expect((await getSessionWithRecentMessages(db, session.id, 1))?.summary).toBe("Alice met a white rabbit and a hatter.");
        expect(await setSessionSummary(db, crypto.randomUUID(), "nobody")).toBe(false);
      });
    });

    describe("preferences", () => {
      test("a reader without preferences for a character gets none", async () => {
        const { characters } = await bookWithCharacters(["Alice"]);
        expect(await getPreferences(db, crypto.randomUUID(), characters[0]!.id)).toBeNull();
      });

      test("preferences are read as the frontend stored them, every relationship mode allowed", async () => {
        const { characters } = await bookWithCharacters(["Mr. Darcy"]);
        for (const mode of ["stranger", "friend", "sibling", "parent", "child", "partner", "custom"]) {
          const stored = {
            userId: crypto.randomUUID(),
            characterId: characters[0]!.id,
            relationshipMode: mode,
            customRelationship: mode === "custom" ? "my fencing master" : null,
            speechModifiers: ["be_formal", "talk_less"],
            behavioralModifiers: ["be_cold"],
            preferenceSummary: "Spar with me.",
          };
          await fr.upsertPreferences(db, stored);
          expect(await getPreferences(db, stored.userId, stored.characterId)).toEqual(stored);
        }
      });

      test("a relationship mode or modifier the spec does not list is a check_violation", async () => {
        const { characters } = await bookWithCharacters(["Mr. Darcy"]);
        const key = { userId: crypto.randomUUID(), characterId: characters[0]!.id };
        await expectDatabaseError(fr.upsertPreferences(db, { ...key, relationshipMode: "nemesis" }), "check_violation");
        await expectDatabaseError(fr.upsertPreferences(db, { ...key, speechModifiers: ["shout"] }), "check_violation");
        await expectDatabaseError(fr.upsertPreferences(db, { ...key, behavioralModifiers: ["be_sly"] }), "check_violation");
      });
    });
  });
}

// ---------------------------------------------------------------------------------------------

/** A pooled adapter on throwaway databases of the live server: one per open(). */
function serverTarget(
  driver: "postgres" | "neon",
  adminUrl: string,
  connect: (url: string) => Promise<Database>,
  cleanup: () => Promise<void> = async () => {},
): AdapterUnderTest {
  const databases: TestDatabase[] = [];
  const connections: Database[] = [];
  const urls = new Map<Database, string>();
  const track = async (url: string) => {
    const db = await connect(url);
    connections.push(db);
    urls.set(db, url);
    return db;
  };
  return {
    driver,
    async open() {
      const created = await createTestDatabase(adminUrl);
      databases.push(created);
      return track(created.url);
    },
    connectAgain: (db) => track(urls.get(db)!),
    async dispose() {
      await Promise.allSettled(connections.map((c) => c.close()));
      for (const d of databases) await d.drop();
      await cleanup();
    },
  };
}

function pgliteTarget(options: PgliteDatabaseOptions): () => AdapterUnderTest {
  return () => {
    let db: Database | undefined;
    return {
      driver: "pglite",
      open: async () => (db = await createPgliteDatabase(options)),
      // One process, one connection: the second "connection" is the same database, closed by dispose.
      connectAgain: async (same) => ({ ...same, close: async () => {} }),
      dispose: async () => db?.close(),
    };
  };
}

/** Checked on the databases the contract opens rather than on two more: each PGlite start is an initdb of seconds. */
const smallBufferCache: AdapterTests = (db) => {
  test("the embedded database keeps a small buffer cache", async () => {
    expect(await db().query("SELECT current_setting('shared_buffers') AS s")).toEqual([{ s: PGLITE_SHARED_BUFFERS }]);
  });
};

databaseContract("PGlite (in memory)", pgliteTarget({}), smallBufferCache);
databaseContract("PGlite in a worker thread", pgliteTarget({ thread: true }), smallBufferCache);

/**
 * The embedded Postgres as the edge on a laptop serves it (npm run edge:*): PGlite over the Postgres
 * protocol (dev/edge/pglite-server.ts), one server per database opened, reached by the edge API's
 * Neon driver through the Neon bridge and by the worker's Bun SQL client directly.
 */
function pgliteServerTarget(driver: "postgres" | "neon", connect: (server: PgliteServer, bridge: NeonBridge) => Promise<Database>): () => AdapterUnderTest {
  return () => {
    const servers = new Map<Database, PgliteServer>();
    const connections: Database[] = [];
    const bridge = startNeonBridge();
    const track = async (server: PgliteServer) => {
      const db = await connect(server, bridge);
      servers.set(db, server);
      connections.push(db);
      return db;
    };
    return {
      driver,
      open: async () => track(await startPgliteServer()),
      connectAgain: (db) => track(servers.get(db)!),
      async dispose() {
        await Promise.allSettled(connections.map((c) => c.close()));
        await bridge.stop();
        await Promise.allSettled([...new Set(servers.values())].map((s) => s.stop()));
      },
    };
  };
}

databaseContract(
  "PGlite over the Postgres protocol via the Neon driver over the WebSocket bridge",
  pgliteServerTarget("neon", async (server, bridge) => createDatabase({ driver: "neon", url: server.url, wsProxy: bridge.address })),
);
databaseContract(
  "PGlite over the Postgres protocol via the Neon driver with connections per request, statements over HTTP",
  pgliteServerTarget("neon", async (server, bridge) => createNeonDatabase({ url: server.url, wsProxy: bridge.address, httpEndpoint: bridge.httpEndpoint, connections: "per-request" })),
);
databaseContract(
  "PGlite over the Postgres protocol via Bun SQL",
  pgliteServerTarget("postgres", async (server) => createDatabase({ driver: "postgres", url: server.url })),
);

const postgres = await probePostgres();
if (!postgres.reachable) console.warn(`db contract: skipping the Postgres and Neon variants: ${postgres.reason}`);

if (postgres.reachable) {
  databaseContract("Postgres via Bun SQL", () =>
    serverTarget("postgres", postgres.url, (url) => createDatabase({ driver: "postgres", url })),
  );

  let bridge: NeonBridge | undefined;
  databaseContract("Postgres via the Neon driver over a WebSocket bridge", () => {
    bridge = startNeonBridge();
    const wsProxy = bridge.address;
    return serverTarget(
      "neon",
      postgres.url,
      (url) => createDatabase({ driver: "neon", url, wsProxy }),
      () => bridge!.stop(),
    );
  });

  // workerd: no connection outlives its request; a query outside any request's scope has one of its own.
  let perRequestBridge: NeonBridge | undefined;
  databaseContract("Postgres via the Neon driver with connections per request", () => {
    perRequestBridge = startNeonBridge();
    const wsProxy = perRequestBridge.address;
    return serverTarget(
      "neon",
      postgres.url,
      async (url) => createNeonDatabase({ url, wsProxy, connections: "per-request" }),
      () => perRequestBridge!.stop(),
    );
  });

  // workerd against Neon: a single statement is one HTTP request to the SQL endpoint, no connection opened.
  let httpBridge: NeonBridge | undefined;
  databaseContract("Postgres via the Neon driver with connections per request, statements over HTTP", () => {
    httpBridge = startNeonBridge();
    const { address: wsProxy, httpEndpoint } = httpBridge;
    return serverTarget(
      "neon",
      postgres.url,
      async (url) => createNeonDatabase({ url, wsProxy, httpEndpoint, connections: "per-request" }),
      () => httpBridge!.stop(),
    );
  });

  // Deno against Neon: a shared pool for transactions, single statements over HTTP.
  let sharedHttpBridge: NeonBridge | undefined;
  databaseContract("Postgres via the Neon driver with a shared pool, statements over HTTP", () => {
    sharedHttpBridge = startNeonBridge();
    const { address: wsProxy, httpEndpoint } = sharedHttpBridge;
    return serverTarget(
      "neon",
      postgres.url,
      async (url) => createNeonDatabase({ url, wsProxy, httpEndpoint, statementsOverHttp: true }),
      () => sharedHttpBridge!.stop(),
    );
  });

  test("with a shared pool and statementsOverHttp, a statement is one request to the HTTP endpoint and a transaction uses the pool", async () => {
    const testDb = await createTestDatabase(postgres.url);
    const bridge = startNeonBridge();
    const db = createNeonDatabase({ url: testDb.url, wsProxy: bridge.address, httpEndpoint: bridge.httpEndpoint, statementsOverHttp: true });
    const { sent, restore } = recordFetches();
    try {
      expect((await db.query<{ n: number }>("SELECT 1 AS n"))[0]!.n).toBe(1);
      expect(sent).toEqual([bridge.httpEndpoint]);
      expect(await db.transaction(async (tx) => (await tx.query<{ n: number }>("SELECT 2 AS n"))[0]!.n)).toBe(2);
      expect(sent).toHaveLength(1);
    } finally {
      restore();
      await db.close();
      await bridge.stop();
      await testDb.drop();
    }
  });

  describe("the Neon driver with connections per request", () => {
    let testDb: TestDatabase;
    let scopeBridge: NeonBridge;
    beforeAll(async () => {
      testDb = await createTestDatabase(postgres.url);
      scopeBridge = startNeonBridge();
    }, SETUP_TIMEOUT_MS);
    afterAll(async () => {
      await scopeBridge.stop();
      await testDb.drop();
    });

    const backend = async (db: Database) => (await db.query<{ pid: number }>("SELECT pg_backend_pid() AS pid"))[0]!.pid;
    const backendAlive = async (db: Database, pid: number) =>
      (await db.query<{ n: number }>("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1", [pid]))[0]!.n > 0;

    test("a request's queries share its connection, which closes when the request's scope ends", async () => {
      const db = createNeonDatabase({ url: testDb.url, wsProxy: scopeBridge.address, connections: "per-request" });
      const observer = createPostgresDatabase({ url: testDb.url });
      try {
        const scope = db.openScope();
        const [first, second] = await scope.run(async () => [await backend(db), await backend(db)]);
        expect(second).toBe(first!);
        await scope.end();
        // After the end, the scope's late work (a fold, a retried write) still reaches the database, on a connection of its own.
        expect(await scope.run(() => backend(db))).not.toBe(first!);
        for (let i = 0; await backendAlive(observer, first!); i++) {
          if (i > 100) throw new Error(`the scope's connection (backend ${first}) is still open`);
          await Bun.sleep(50);
        }
      } finally {
        await observer.close();
        await db.close();
      }
    });

    test("with an HTTP endpoint a statement is one request to it and opens no connection; a transaction still gets one", async () => {
      const db = createNeonDatabase({ url: testDb.url, wsProxy: scopeBridge.address, httpEndpoint: scopeBridge.httpEndpoint, connections: "per-request" });
      const { sent, restore } = recordFetches();
      try {
        const scope = db.openScope();
        const pids = await scope.run(async () => [await backend(db), await backend(db)]);
        expect(sent).toEqual([scopeBridge.httpEndpoint, scopeBridge.httpEndpoint]);
        // The bridge answers each from its own pool: no connection of the scope's stays behind the statements.
        expect(pids[0]).toBeGreaterThan(0);
        expect(await scope.run(() => db.transaction(async (tx) => (await tx.query<{ n: number }>("SELECT 2 AS n"))[0]!.n))).toBe(2);
        expect(sent).toHaveLength(2);
        await scope.end();
      } finally {
        restore();
        await db.close();
      }
    });

    test("queries outside any scope each get a connection of their own, closed after it", async () => {
      const db = createNeonDatabase({ url: testDb.url, wsProxy: scopeBridge.address, connections: "per-request" });
      try {
        const first = await backend(db);
        expect(await backend(db)).not.toBe(first);
      } finally {
        await db.close();
      }
    });
  });
} else {
  describe.skip("Postgres via Bun SQL", () => test.skip(postgres.reason, () => {}));
  describe.skip("Postgres via the Neon driver over a WebSocket bridge", () => test.skip(postgres.reason, () => {}));
}

describe("PGlite on disk", () => {
  let dataDir: string;

  /** `bun run migrate` as a user runs it: nothing configured but the data dir. */
  async function runMigrateCommand(env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
    const child = Bun.spawn([process.execPath, "run", "migrate"], {
      cwd: join(import.meta.dir, "..", ".."),
      env: { PATH: process.env.PATH ?? "", ...env },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    return { code, stdout, stderr };
  }

  let firstRun: Awaited<ReturnType<typeof runMigrateCommand>>;

  // initdb takes seconds, so the data dir the command creates is the one the persistence test reopens.
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "pglite-"));
    firstRun = await runMigrateCommand({ DATA_DIR: dataDir });
  }, SETUP_TIMEOUT_MS);
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  test("bun run migrate creates the schema in the data dir once and then reports it up to date", async () => {
    expect(firstRun.code).toBe(0);
    expect(firstRun.stdout).toContain("applied 0001_initial.sql");
    const second = await runMigrateCommand({ DATA_DIR: dataDir });
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("schema is up to date");
    expect(second.stdout).not.toContain("applied");
  });

  test("bun run migrate with a malformed DATABASE_URL names the variable and fails", async () => {
    const result = await runMigrateCommand({ DATA_DIR: dataDir, DATABASE_URL: "mysql://db/app" });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("DATABASE_URL");
  });

  test("data written to a data dir survives closing and reopening it", async () => {
    const config = { driver: "pglite", dataDir: join(dataDir, "pg") } as const;
    const first = await createDatabase(config);
    expect(first.driver).toBe("pglite");
    expect(await migrate(first)).toEqual([]);
    const book = await fr.insertBook(first, { title: "Sense and Sensibility" });
    await first.close();

    const reopened = await createDatabase(config);
    try {
      expect(await getBook(reopened, book.id)).toEqual(book);
    } finally {
      await reopened.close();
    }
  });
});

describe("unreachable servers", () => {
  test("Bun SQL reports a server that is down as a connection error", async () => {
    const db = createPostgresDatabase({ url: `postgres://postgres@127.0.0.1:${closedPort()}/test`, connectTimeoutSeconds: 2 });
    try {
      await expectDatabaseError(db.query("SELECT 1"), "connection");
    } finally {
      await db.close();
    }
  });

  test("the Neon driver reports a proxy that is down as a connection error", async () => {
    const db = createNeonDatabase({
      url: "postgres://postgres@127.0.0.1:5432/test",
      wsProxy: `127.0.0.1:${closedPort()}`,
      connectTimeoutSeconds: 2,
    });
    try {
      await expectDatabaseError(db.query("SELECT 1"), "connection");
    } finally {
      await db.close();
    }
  });
});

/** Records the URL of every fetch made until `restore` (the Neon driver's HTTP statements). */
function recordFetches(): { sent: string[]; restore(): void } {
  const sent: string[] = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) => {
    sent.push(String(input instanceof Request ? input.url : input));
    return realFetch(input, init);
  }) as typeof fetch;
  return { sent, restore: () => void (globalThis.fetch = realFetch) };
}
