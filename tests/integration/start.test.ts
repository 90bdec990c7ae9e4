import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LOCAL_USER_ID } from "../../common/local/sessions.ts";
import { createDatabase } from "../../common/db/create.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import { FRONTEND_WRITES_FLAG, insertBook } from "../../common/db/frontend-rows.ts";
import type { ChatDoneEvent, ChatEvent } from "../../common/contract/schemas.ts";
import { SAMPLE_BOOK } from "../../ingest/sample-book.ts";
import { parseSseEvents } from "../support/chat.ts";
import { logLines, runPrintedCurl, startDemo, START_ENTRY } from "../support/npm-start.ts";
import { freePort, runEntry } from "../support/process.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";

// Each step starts a real process; the first start runs initdb for the embedded Postgres.
setDefaultTimeout(180_000);

const SAMPLE_SPEAKERS = ["Ottilie", "Jonah", "Mr. Crane"];

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "npm-start-"));
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

function expectStreamedReply(events: ChatEvent[]): ChatDoneEvent {
  expect(events.length).toBeGreaterThan(1);
  const done = events.at(-1)!;
  if (!("done" in done)) throw new Error(`the stream did not end with done: ${JSON.stringify(done)}`);
  const tokens = events.slice(0, -1).map((e) => {
    if (!("token" in e)) throw new Error(`not a token event: ${JSON.stringify(e)}`);
    return e.token;
  });
  expect(tokens.join("")).toBe(done.full_response);
  expect(done.full_response.trim()).not.toBe("");
  expect(done.sources.length).toBeGreaterThan(0);
  return done;
}

async function withEmbeddedDatabase<T>(use: (db: Database) => Promise<T>): Promise<T> {
  const db = await createPgliteDatabase({ dataDir: join(dataDir, "pg") });
  try {
    return await use(db);
  } finally {
    await db.close();
  }
}

describe("npm start with nothing configured", () => {
  let first: { sessionId: string; characterId: string; reply: string } | undefined;

  test("ingests the sample story, then prints a curl that streams an in-character reply; Ctrl-C stops it cleanly", async () => {
    const { service, ready } = await startDemo(dataDir);
    try {
      const messages = logLines(service).map((l) => l.msg);
      expect(messages).toContain("LLM gateway not configured: offline provider (deterministic, no model)");
      expect(messages.indexOf("sample story ingested")).toBeGreaterThan(-1);
      expect(messages.indexOf("sample story ingested")).toBeLessThan(messages.indexOf("ready"));

      const chat = ready.chat!;
      expect(chat).toMatchObject({ user_id: LOCAL_USER_ID, book_id: SAMPLE_BOOK.id, book_title: SAMPLE_BOOK.title, message_count: 0 });
      expect(SAMPLE_SPEAKERS).toContain(chat.character_name);
      expect(ready.docs).toBe(`${ready.api}/docs`);
      expect(ready.curl).toStartWith(`curl -N ${ready.api}/character/chat -H 'content-type: application/json' -d '`);

      const done = expectStreamedReply(parseSseEvents(await runPrintedCurl(ready.curl!)));
      first = { sessionId: chat.session_id, characterId: chat.character_id, reply: done.full_response };
    } finally {
      expect(await service.stop("SIGINT")).toBe(0);
    }
    const messages = logLines(service).map((l) => l.msg);
    expect(messages).toContain("worker stopped");
    expect(messages.at(-1)).toBe("stopped");
    expect(existsSync(join(dataDir, "text", `${SAMPLE_BOOK.id}.bm25.log`))).toBe(true);
    expect(existsSync(join(dataDir, "local-control.json"))).toBe(false);

    await withEmbeddedDatabase(async (db) => {
      const [character] = await db.query<{ name: string; system_prompt: string }>("SELECT name, system_prompt FROM characters WHERE id = $1", [
        first!.characterId,
      ]);
      // Offline, the reply opens with the character's own lines, which its persona quotes.
      const opening = first!.reply.split("\n\n")[0]!.slice(0, 40);
      expect(opening.length).toBe(40);
      expect(character!.system_prompt).toContain(opening);
      const [session] = await db.query<{ message_count: number }>("SELECT message_count FROM chat_sessions WHERE id = $1", [first!.sessionId]);
      expect(session!.message_count).toBe(1);
    });
  });

  test("a restart keeps the data: no second ingestion, the same session answers and its message count grows", async () => {
    if (!first) throw new Error("the first start failed");
    const { service, ready } = await startDemo(dataDir);
    try {
      const messages = logLines(service).map((l) => l.msg);
      expect(messages).not.toContain("sample story ingested");
      expect(messages).not.toContain("book ingested");
      expect(ready.chat).toMatchObject({ session_id: first.sessionId, character_id: first.characterId, message_count: 1 });

      const second = await runEntry(START_ENTRY, { PORT: String(await freePort()), DATA_DIR: dataDir });
      expect(second.exitCode).toBe(1);
      expect(second.stderr).toContain(`is using ${dataDir}; stop it first`);

      // `bun run ingest` on the same embedded database would write to a private copy: refused.
      const ingest = await runEntry("ingest/cli.ts", { DATA_DIR: dataDir }, undefined, ["ingest/sample/the-mending-room.txt"]);
      expect(ingest.exitCode).toBe(1);
      expect(ingest.stderr).toContain(`npm start is running on ${dataDir}`);
      // What it suggests works on this install: not POST /character/processing, which refuses local files.
      expect(ingest.stderr).not.toContain("/character/processing");
      expect(ingest.stderr).toContain("stop it first (Ctrl-C in its terminal), then run this again; at the next npm start the book is on the chat page");

      expectStreamedReply(parseSseEvents(await runPrintedCurl(ready.curl!)));
    } finally {
      expect(await service.stop("SIGTERM")).toBe(0);
    }
    await withEmbeddedDatabase(async (db) => {
      expect(await db.query("SELECT id FROM books")).toEqual([{ id: SAMPLE_BOOK.id }]);
      const [session] = await db.query<{ message_count: number }>("SELECT message_count FROM chat_sessions WHERE id = $1", [first!.sessionId]);
      expect(session!.message_count).toBe(2);
      expect(await db.query("SELECT role FROM messages ORDER BY created_at")).toHaveLength(4);
    });
  });
});

test("after a restart the banner lists the reader's own books beside the sample", async () => {
  const own = await mkdtemp(join(tmpdir(), "npm-start-own-"));
  try {
    const first = await startDemo(own);
    expect(await first.service.stop("SIGINT")).toBe(0);
    const ingest = await runEntry("ingest/cli.ts", { DATA_DIR: own }, undefined, ["tests/fixtures/ingest/the-keepers-ledger.txt", "--title", "The Keeper's Ledger"]);
    expect({ exitCode: ingest.exitCode, stderr: ingest.exitCode === 0 ? "" : ingest.stderr }).toEqual({ exitCode: 0, stderr: "" });
    const { service } = await startDemo(own);
    try {
      const banner = async () => {
        for (let i = 0; i < 200 && !service.output().stdout.includes("Ctrl-C stops the service"); i++) await Bun.sleep(50);
        return service.output().stdout;
      };
      expect(await banner()).toContain(`  Books        "The Keeper's Ledger", "${SAMPLE_BOOK.title}"\n`);
    } finally {
      expect(await service.stop("SIGINT")).toBe(0);
    }
  } finally {
    await rm(own, { recursive: true, force: true });
  }
});

test("a port already in use stops npm start with one line that says so", async () => {
  const taken = Bun.serve({ port: 0, fetch: () => new Response("someone else") });
  const ownDir = await mkdtemp(join(tmpdir(), "npm-start-port-"));
  try {
    const run = await runEntry(START_ENTRY, { PORT: String(taken.port), DATA_DIR: ownDir });
    expect(run.exitCode).toBe(1);
    expect(run.stderr.trimEnd().split("\n").at(-1)).toBe(`port ${taken.port} is in use: stop what listens there, or set PORT to another port`);
  } finally {
    await taken.stop(true);
    await rm(ownDir, { recursive: true, force: true });
  }
});

const postgres = await probePostgres();
if (!postgres.reachable) console.warn(`skipping npm start on Postgres: ${postgres.reason}`);

describe.skipIf(!postgres.reachable)("npm start on a configured Postgres", () => {
  let database: TestDatabase;
  let pgDataDir: string;
  beforeAll(async () => {
    database = await createTestDatabase(postgres.reachable ? postgres.url : "");
    pgDataDir = await mkdtemp(join(tmpdir(), "npm-start-pg-"));
  });
  afterAll(async () => {
    await database?.drop();
    await rm(pgDataDir, { recursive: true, force: true });
  });

  async function withDatabase<T>(use: (db: Database) => Promise<T>): Promise<T> {
    const db = await createDatabase({ driver: "postgres", url: database.url });
    try {
      return await use(db);
    } finally {
      await db.close();
    }
  }

  test("a database that already has books is left untouched", async () => {
    const other = await withDatabase(async (db) => {
      await migrate(db);
      return insertBook(db, { title: "Somebody Else's Catalogue", processingStatus: "completed" });
    });
    const { service, ready } = await startDemo(join(pgDataDir, "with-books"), { DATABASE_URL: database.url }, [FRONTEND_WRITES_FLAG]);
    try {
      expect(logLines(service).find((l) => l.msg === "sample story not added")).toMatchObject({ reason: "the database already has 1 book" });
      expect(ready.chat).toBeUndefined();
      expect(ready.curl).toBeUndefined();
    } finally {
      expect(await service.stop()).toBe(0);
    }
    await withDatabase(async (db) => {
      expect(await db.query("SELECT id FROM books")).toEqual([{ id: other.id }]);
      expect(await db.query("SELECT id FROM chat_sessions")).toEqual([]);
      await db.query("DELETE FROM books");
    });
  });

  test("without --write-frontend-tables an empty shared database gets nothing written to the frontend's tables", async () => {
    const { service, ready } = await startDemo(join(pgDataDir, "not-asked"), { DATABASE_URL: database.url });
    try {
      expect(logLines(service).find((l) => l.msg === "sample story not added")).toMatchObject({
        reason: `the database is shared with the frontend (pass ${FRONTEND_WRITES_FLAG} to add the sample story)`,
      });
      expect(ready.chat).toBeUndefined();
    } finally {
      expect(await service.stop()).toBe(0);
    }
    await withDatabase(async (db) => {
      for (const table of ["books", "user_library", "chat_sessions"]) expect(await db.query(`SELECT 1 FROM ${table}`)).toEqual([]);
    });
  });

  test("with --write-frontend-tables an empty database gets the sample story and a session the printed curl chats in", async () => {
    const { service, ready } = await startDemo(join(pgDataDir, "empty"), { DATABASE_URL: database.url }, [FRONTEND_WRITES_FLAG]);
    try {
      expect(logLines(service).find((l) => l.msg === "components")).toMatchObject({ database: "postgres" });
      expect(ready.chat).toMatchObject({ book_id: SAMPLE_BOOK.id, message_count: 0 });
      expectStreamedReply(parseSseEvents(await runPrintedCurl(ready.curl!)));
    } finally {
      expect(await service.stop()).toBe(0);
    }
  });
});
