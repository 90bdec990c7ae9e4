import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase } from "../../common/db/create.ts";
import type { Database, Row } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import { getIngestion } from "../../common/db/ingestions.ts";
import { saveCharacters } from "../../common/db/characters.ts";
import { appendExchange, MESSAGE_COUNT_MAX } from "../../common/db/sessions.ts";
import { SchemaError } from "../../common/contract/frontend-columns.ts";
import { createLogger } from "../../common/log.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { BookRejectedError } from "../../ingest/errors.ts";
import { runPipeline } from "../../ingest/pipeline.ts";
import { startWorker } from "../../ingest/jobs/queue-consumer.ts";
import { buildTestApp } from "../support/app.ts";
import { readSse, scriptGateway } from "../support/chat.ts";
import { createFrontendSchema, FRONTEND_SCHEMA_FILE } from "../support/frontend-schema.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";
import { freePort, runEntry } from "../support/process.ts";
import { startNeonBridge, type NeonBridge } from "../../dev/edge/neon-bridge.ts";
import {
  ENGLISH_BOOK,
  FIXTURES,
  TEST_PIPELINE_OPTIONS,
  createIngestEnv,
  eventually,
  startBookServer,
  startScriptedGateway,
  type BookServer,
  type ScriptedGateway,
} from "../fixtures/ingest/harness.ts";

/**
 * The backend dropped onto a database the frontend made first (tests/fixtures/db/frontend-schema.sql:
 * the spec's fields only, the frontend's own types, enums, defaults and cascading foreign keys), on
 * the live Postgres through both production drivers. Every row the frontend writes here is written
 * with its own SQL, and every check reads the tables the way the frontend reads them.
 */

setDefaultTimeout(90_000);

const postgres = await probePostgres();
if (!postgres.reachable) console.warn(`frontend database: skipping, ${postgres.reason}`);

const FRONTEND_TABLES = ["books", "user_library", "chat_sessions", "user_preferences", "purchases", "settings", "profiles"];

/** Each frontend table's columns with type, default and nullability, to show the backend changed nothing. */
async function frontendColumns(db: Database): Promise<Row[]> {
  return db.query(
    `SELECT table_name, column_name, data_type, udt_name, column_default, is_nullable
       FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name IN (SELECT jsonb_array_elements_text($1::jsonb))
      ORDER BY table_name, ordinal_position`,
    [FRONTEND_TABLES],
  );
}

async function frontendConstraints(db: Database): Promise<Row[]> {
  return db.query(
    `SELECT conrelid::regclass::text AS table_name, conname, pg_get_constraintdef(oid) AS definition
       FROM pg_constraint WHERE conrelid::regclass::text IN (SELECT jsonb_array_elements_text($1::jsonb))
      ORDER BY 1, 2`,
    [FRONTEND_TABLES],
  );
}

/** A reader signs up and uploads a book, as the frontend's auth and upload route write it. */
async function frontendUploads(db: Database, fileName: string): Promise<{ userId: string; bookId: string }> {
  const userId = crypto.randomUUID();
  await db.query("INSERT INTO profiles (id) VALUES ($1)", [userId]);
  const [book] = await db.query<{ id: string }>(
    `INSERT INTO books (title, slug, author, description, language, page_count, cover_image_url, file_path, category_id,
                        uploader_id, status, processing_status, is_public, is_free)
     VALUES ('The Keeper''s Ledger', $1, 'A. Tester', 'A lighthouse keeper''s ledger and the people in it.', 'English', 12,
             'https://cdn.example/covers/ledger.jpg', $2, 1, $3, 'approved', 'pending', true, true)
     RETURNING id`,
    [`the-keepers-ledger-${userId.slice(0, 8)}`, `books/${userId}/${fileName}`, userId],
  );
  await db.query("INSERT INTO user_library (user_id, book_id, reading_status, current_page) VALUES ($1, $2, 'unread', 0)", [userId, book!.id]);
  return { userId, bookId: book!.id };
}

function onFrontendDatabase(adminUrl: string, name: string, connect: (url: string) => Promise<Database>, teardown: () => void = () => {}) {
  describe(`on a database the frontend made, via ${name}`, () => {
    let testDb: TestDatabase;
    let db: Database;
    let books: BookServer;
    let before: { columns: Row[]; constraints: Row[] };

    beforeAll(async () => {
      testDb = await createTestDatabase(adminUrl);
      const setup = await createDatabase({ driver: "postgres", url: testDb.url });
      await createFrontendSchema(setup);
      before = { columns: await frontendColumns(setup), constraints: await frontendConstraints(setup) };
      await setup.close();
      db = await connect(testDb.url);
      books = startBookServer();
    });
    afterAll(async () => {
      books?.stop();
      await db?.close();
      await testDb?.drop();
      teardown();
    });

    test("migrating creates the backend's own tables and leaves every frontend table exactly as it was", async () => {
      await migrate(db);
      await migrate(db);
      expect(await frontendColumns(db)).toEqual(before.columns);
      expect(await frontendConstraints(db)).toEqual(before.constraints);
      const ours = await db.query<{ t: string | null }>(
        "SELECT to_regclass(name) AS t FROM (VALUES ('book_ingestions'), ('book_sources'), ('chat_session_summaries'), ('backend_schema_migrations')) AS v (name)",
      );
      expect(ours.every((r) => r.t !== null)).toBe(true);
      // The platform's characters table got the backend's columns, its own untouched.
      const characterColumns = await db.query<{ column_name: string }>(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'characters'",
      );
      expect(characterColumns.map((c) => c.column_name)).toEqual(expect.arrayContaining(["aliases", "importance", "retired_at", "updated_at"]));
    });

    test("upload → POST /character/processing → worker → completed → the frontend's session → streamed reply → messages and counters", async () => {
      await migrate(db);
      const gateway = startScriptedGateway();
      const kv = createMemoryKeyValueStore();
      const env = await createIngestEnv({ gateway, books, db, kv });
      const worker = startWorker(env.deps, { minPollMs: 10, maxPollMs: 50, pipeline: TEST_PIPELINE_OPTIONS });
      const app = await buildTestApp({ db, kv, llm: env.deps.llm, vectorIndex: env.deps.vectorIndex, textIndex: env.deps.textIndex });
      try {
        const { userId, bookId } = await frontendUploads(db, ENGLISH_BOOK);
        const accepted = await app.postJson("/character/processing", { book_id: bookId, file_url: books.url(ENGLISH_BOOK), user_id: userId });
        expect(accepted.status).toBe(202);

        await eventually(async () => {
          const [row] = await db.query<{ processing_status: string }>("SELECT processing_status FROM books WHERE id = $1", [bookId]);
          return row?.processing_status === "completed";
        }, "the book to be completed");
        const characters = await db.query<{ id: string; name: string }>(
          "SELECT id, name FROM characters WHERE book_id = $1 ORDER BY name",
          [bookId],
        );
        expect(characters.map((c) => c.name)).toEqual(expect.arrayContaining(["Clara", "Tobias Finch"]));
        const clara = characters.find((c) => c.name === "Clara")!;

        // POST /api/chat/sessions: the frontend creates the session with its own insert.
        const [session] = await db.query<{ id: string }>(
          "INSERT INTO chat_sessions (user_id, character_id, book_id) VALUES ($1, $2, $3) RETURNING id",
          [userId, clara.id, bookId],
        );
        scriptGateway(gateway);
        const res = await app.postJson("/character/chat", {
          user_id: userId,
          character_id: clara.id,
          book_id: bookId,
          session_id: session!.id,
          user_message: "What did you write in the ledger?",
        });
        expect(res.status).toBe(200);
        const { events } = await readSse(res);
        const done = events.at(-1) as { done?: boolean; full_response?: string };
        expect(done.done).toBe(true);

        // GET /api/chat/session/[sessionId] and GET /api/chat/recent, as the frontend queries them.
        const messages = await db.query<{ role: string; content: string }>(
          "SELECT role, content FROM messages WHERE session_id = $1 ORDER BY created_at",
          [session!.id],
        );
        expect(messages).toEqual([
          { role: "user", content: "What did you write in the ledger?" },
          { role: "assistant", content: done.full_response! },
        ]);
        const [counters] = await db.query<{ message_count: number; preview: string; updated: boolean }>(
          "SELECT message_count, preview, updated_at > created_at AS updated FROM chat_sessions WHERE id = $1",
          [session!.id],
        );
        expect(counters).toMatchObject({ message_count: 1, updated: true });
        expect(counters!.preview.endsWith("…")).toBe(true);
        const [book] = await db.query<{ processing_status: string; updated_at: Date; created_at: Date }>(
          "SELECT processing_status, updated_at, created_at FROM books WHERE id = $1",
          [bookId],
        );
        // Only processing_status of the frontend's book row was written.
        expect(book!.updated_at).toEqual(book!.created_at);
      } finally {
        await worker.stop();
        await app.settle();
        gateway.stop();
        await env.close();
      }
    });

    test("schema-valid rows that once broke a session (message_count at int4's largest, messages stamped infinity or at the largest timestamp) still take exchanges", async () => {
      await migrate(db);
      const { userId, bookId } = await frontendUploads(db, ENGLISH_BOOK);
      const { characters } = await saveCharacters(db, bookId, [{ name: "Clara", importance: 1 }]);
      const session = async (setup: (id: string) => Promise<unknown>) => {
        const [row] = await db.query<{ id: string }>(
          "INSERT INTO chat_sessions (user_id, character_id, book_id) VALUES ($1, $2, $3) RETURNING id",
          [userId, characters[0]!.id, bookId],
        );
        await setup(row!.id);
        return row!.id;
      };
      const full = await session((id) => db.query("UPDATE chat_sessions SET message_count = 2147483647 WHERE id = $1", [id]));
      expect(await appendExchange(db, full, "Still there?", "Always.", "Always.")).toMatchObject({ messageCount: MESSAGE_COUNT_MAX });
      for (const stamp of ["infinity", "294276-12-31 23:59:59.999999+00"]) {
        const stray = await session((id) =>
          db.query("INSERT INTO messages (session_id, role, content, created_at) VALUES ($1, 'user', 'stray', $2::timestamptz)", [id, stamp]),
        );
        await appendExchange(db, stray, "Who are you?", "Clara.", "Clara.");
        await appendExchange(db, stray, "And the ledger?", "Kept.", "Kept.");
        const shown = await db.query<{ content: string }>("SELECT content FROM messages WHERE session_id = $1 ORDER BY created_at", [stray]);
        expect(shown.map((m) => m.content)).toEqual(["Who are you?", "Clara.", "And the ledger?", "Kept.", "stray"]);
        expect(await db.query("SELECT 1 FROM messages WHERE session_id = $1 AND created_at > now() + interval '1 hour' AND content <> 'stray'", [stray])).toEqual([]);
      }
    });

    describe("re-ingesting a book never deletes what a reader made", () => {
      let gateway: ScriptedGateway;
      let workDir: string;
      let env: Awaited<ReturnType<typeof createIngestEnv>>;
      let bookId: string;
      let userId: string;
      let original: string;
      const ingest = async (text: string) => {
        const path = join(workDir, `${crypto.randomUUID()}.txt`);
        await writeFile(path, text);
        return runPipeline(env.deps, { bookId, source: { path } }, TEST_PIPELINE_OPTIONS);
      };
      /** A session with two saved exchanges' worth of messages and the reader's preferences, for each character. */
      const readerData = async (characterId: string) => {
        const [session] = await db.query<{ id: string }>(
          "INSERT INTO chat_sessions (user_id, character_id, book_id, message_count) VALUES ($1, $2, $3, 1) RETURNING id",
          [userId, characterId, bookId],
        );
        await db.query(
          "INSERT INTO messages (session_id, role, content) VALUES ($1, 'user', 'Hello?'), ($1, 'assistant', 'Good evening.')",
          [session!.id],
        );
        await db.query(
          `INSERT INTO user_preferences (user_id, character_id, relationship_mode, speech_modifiers)
           VALUES ($1, $2, 'friend', '["talk_less"]'::jsonb)`,
          [userId, characterId],
        );
        return session!.id;
      };
      const stillThere = async (characterId: string, sessionId: string) => ({
        character: (await db.query("SELECT 1 FROM characters WHERE id = $1", [characterId])).length,
        session: (await db.query("SELECT 1 FROM chat_sessions WHERE id = $1", [sessionId])).length,
        messages: (await db.query("SELECT 1 FROM messages WHERE session_id = $1", [sessionId])).length,
        preferences: (await db.query("SELECT 1 FROM user_preferences WHERE character_id = $1 AND user_id = $2", [characterId, userId])).length,
      });
      const intact = { character: 1, session: 1, messages: 2, preferences: 1 };

      beforeAll(async () => {
        await migrate(db);
        gateway = startScriptedGateway();
        workDir = await mkdtemp(join(tmpdir(), "editions-"));
        env = await createIngestEnv({ gateway, books, db });
        ({ bookId, userId } = await frontendUploads(db, ENGLISH_BOOK));
        original = await Bun.file(join(FIXTURES, ENGLISH_BOOK)).text();
        await ingest(original);
      });
      afterAll(async () => {
        gateway?.stop();
        await env?.close();
        await rm(workDir, { recursive: true, force: true });
      });

      const character = async (name: string) =>
        (await db.query<{ id: string; system_prompt: string }>("SELECT id, system_prompt FROM characters WHERE book_id = $1 AND name = $2", [bookId, name]))[0]!;

      test("an edition in which a character is renamed keeps the old character with its sessions, messages and preferences", async () => {
        const tobias = await character("Tobias Finch");
        const session = await readerData(tobias.id);
        const result = await ingest(original.replaceAll("Tobias Finch", "Tobias Quill").replaceAll("Finch", "Quill"));
        expect(result.characters.map((c) => c.character.name)).not.toContain("Tobias Finch");
        expect(await stillThere(tobias.id, session)).toEqual(intact);
        const [kept] = await db.query<{ retired: boolean }>("SELECT retired_at IS NOT NULL AS retired FROM characters WHERE id = $1", [tobias.id]);
        expect(kept!.retired).toBe(true);
        expect((await db.query<{ processing_status: string }>("SELECT processing_status FROM books WHERE id = $1", [bookId]))[0]!.processing_status).toBe("completed");
      });

      test("a second ingestion in which one character's profile call fails keeps that character as it was", async () => {
        const clara = await character("Clara");
        const session = await readerData(clara.id);
        gateway.override.extract = (input) => (input.character.name === "Clara" ? { status: 503, message: "overloaded" } : undefined);
        try {
          const result = await ingest(original);
          expect(result.characters.map((c) => c.character.name)).not.toContain("Clara");
        } finally {
          gateway.override.extract = undefined;
        }
        expect(await stillThere(clara.id, session)).toEqual(intact);
        expect((await character("Clara")).system_prompt).toBe(clara.system_prompt);
        expect((await db.query<{ processing_status: string }>("SELECT processing_status FROM books WHERE id = $1", [bookId]))[0]!.processing_status).toBe("completed");
      });
    });

    test("a frontend table without a column the backend needs stops migration with one line naming it", async () => {
      await db.exec("ALTER TABLE chat_sessions RENAME COLUMN preview TO last_preview");
      try {
        const error = await migrate(db).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(SchemaError);
        expect((error as Error).message).toBe("table chat_sessions has no column preview, which the backend needs (text)");
      } finally {
        await db.exec("ALTER TABLE chat_sessions RENAME COLUMN last_preview TO preview");
      }
    });
  });
}

/**
 * SPEC shows processing_status `pending` and `completed` only; a frontend column may accept nothing
 * else. Each variant is the frontend's schema with that one column changed.
 */
const STATUS_COLUMNS = [
  { kind: "an enum of the spec's two values", accepts: false, warnings: 1, change: (sql: string) => sql.replace("ENUM ('pending', 'processing', 'completed', 'failed')", "ENUM ('pending', 'completed')") },
  {
    kind: "text with CHECK (processing_status IN ('pending', 'completed'))",
    accepts: false,
    warnings: 1,
    change: (sql: string) =>
      sql.replace("processing_status book_processing_status NOT NULL DEFAULT 'pending'", "processing_status text NOT NULL DEFAULT 'pending' CHECK (processing_status IN ('pending', 'completed'))"),
  },
  {
    kind: "text with a CHECK over two columns, which only the write reveals",
    accepts: false,
    // Each value is found refused at its first write.
    warnings: 2,
    change: (sql: string) =>
      sql.replace(
        "processing_status book_processing_status NOT NULL DEFAULT 'pending'",
        "processing_status text NOT NULL DEFAULT 'pending', CHECK (processing_status IN ('pending', 'completed') OR title IS NULL)",
      ),
  },
  { kind: "plain text", accepts: true, warnings: 0, change: (sql: string) => sql.replace("processing_status book_processing_status NOT NULL DEFAULT 'pending'", "processing_status text NOT NULL DEFAULT 'pending'") },
];

function onRestrictedStatusColumns(name: string, open: () => Promise<{ db: Database; drop: () => Promise<void> }>) {
  describe(`a books.processing_status column that may refuse processing and failed, via ${name}`, () => {
    let books: BookServer;
    let gateway: ScriptedGateway;
    let workDir: string;
    beforeAll(async () => {
      books = startBookServer();
      gateway = startScriptedGateway();
      workDir = await mkdtemp(join(tmpdir(), "status-column-"));
      await writeFile(join(workDir, "not-text.txt"), new Uint8Array([0x66, 0x6f, 0x6f, 0xff, 0xfe, 0x00, 0x01]));
    });
    afterAll(async () => {
      books?.stop();
      gateway?.stop();
      await rm(workDir, { recursive: true, force: true });
    });

    test.each(STATUS_COLUMNS)("$kind: start-up works, a book completes, a failing one ends pending where failed is refused", async ({ accepts, warnings: expectedWarnings, change }) => {
      const { db, drop } = await open();
      const warnings: string[] = [];
      const logger = createLogger({ level: "warn", write: (line) => warnings.push(line) });
      const env = await createIngestEnv({ gateway, books, db });
      env.deps.logger = logger;
      try {
        await db.exec(change(await Bun.file(FRONTEND_SCHEMA_FILE).text()));
        // Start-up: migrations and the schema check pass whatever the column accepts.
        await migrate(db);
        const { bookId } = await frontendUploads(db, ENGLISH_BOOK);
        const status = async (id: string) => (await db.query<{ s: string }>("SELECT processing_status::text AS s FROM books WHERE id = $1", [id]))[0]!.s;

        let whileRunning: Promise<string> | undefined;
        const result = await runPipeline(env.deps, { bookId, source: { path: join(FIXTURES, ENGLISH_BOOK) } }, {
          ...TEST_PIPELINE_OPTIONS,
          onProgress: (event) => void (event.phase === "booknlp" && (whileRunning ??= status(bookId))),
        });
        expect(result.index.chunks).toBeGreaterThan(0);
        expect(await whileRunning).toBe(accepts ? "processing" : "pending");
        expect(await status(bookId)).toBe("completed");

        const failing = await frontendUploads(db, "not-text.txt");
        const error = await runPipeline(env.deps, { bookId: failing.bookId, source: { path: join(workDir, "not-text.txt") } }, TEST_PIPELINE_OPTIONS).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BookRejectedError);
        expect(await status(failing.bookId)).toBe(accepts ? "failed" : "pending");
        expect((await getIngestion(db, failing.bookId))?.lastError).toMatch(/^file is not text/);

        const refusals = warnings.filter((w) => w.includes("processing_status does not accept"));
        expect(refusals).toHaveLength(expectedWarnings);
        if (!accepts) expect(refusals.at(-1)).toContain('refused="processing, failed"');
      } finally {
        await env.close();
        await drop();
      }
    });
  });
}

onRestrictedStatusColumns("PGlite", async () => {
  const db = await createPgliteDatabase();
  return { db, drop: () => db.close() };
});

if (postgres.reachable) {
  onRestrictedStatusColumns("Bun SQL", async () => {
    const testDb = await createTestDatabase(postgres.url);
    const db = await createDatabase({ driver: "postgres", url: testDb.url });
    return {
      db,
      drop: async () => {
        await db.close();
        await testDb.drop();
      },
    };
  });

  onFrontendDatabase(postgres.url, "Bun SQL", (url) => createDatabase({ driver: "postgres", url }));
  let bridge: NeonBridge | undefined;
  onFrontendDatabase(
    postgres.url,
    "the Neon driver",
    (url) => {
      bridge = startNeonBridge();
      return createDatabase({ driver: "neon", url, wsProxy: bridge.address });
    },
    () => bridge?.stop(),
  );

  describe("start-up on a frontend database the backend cannot work with", () => {
    let testDb: TestDatabase;
    beforeAll(async () => {
      testDb = await createTestDatabase(postgres.url);
      const setup = await createDatabase({ driver: "postgres", url: testDb.url });
      await setup.exec(await Bun.file(FRONTEND_SCHEMA_FILE).text());
      await setup.exec("ALTER TABLE books DROP COLUMN file_path");
      await setup.close();
    });
    afterAll(async () => testDb?.drop());

    test.each(["api/server.ts", "ingest/worker.ts"])("%s exits with one line naming the table and column", async (entry) => {
      const dataDir = await mkdtemp(join(tmpdir(), "schema-stop-"));
      try {
        const port = String(await freePort());
        const result = await runEntry(entry, { DATA_DIR: dataDir, DATABASE_URL: testDb.url, PORT: port, METRICS_PORT: port });
        expect(result.exitCode).toBe(1);
        expect(result.stderr.trim()).toBe("database schema error: table books has no column file_path, which the backend needs (text)");
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    });
  });
} else {
  describe.skip("on a database the frontend made", () => test.skip(postgres.reason, () => {}));
}
