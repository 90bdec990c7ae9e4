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
import type { ChatDoneEvent, ChatEvent, ProcessingAccepted, ProcessingRequest } from "../../common/contract/schemas.ts";
import { LOCAL_FILES_PATH, localFilePath } from "../../api/local-file.ts";
import { SAMPLE_BOOK } from "../../ingest/sample-book.ts";
import { parseSseEvents } from "../support/chat.ts";
import { logLines, runPrintedCurl, startDemo, START_ENTRY } from "../support/npm-start.ts";
import { freePort, runEntry, startService } from "../support/process.ts";
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

type OpenApiPaths = { paths: Record<string, { post?: { requestBody: { content: Record<string, { example?: unknown; schema: { example?: unknown } }> } } }> };

async function processingExample(apiUrl: string): Promise<{ paths: string[]; example: ProcessingRequest }> {
  const doc = (await (await fetch(`${apiUrl}/docs/json`)).json()) as OpenApiPaths;
  const media = doc.paths["/character/processing"]!.post!.requestBody.content["application/json"]!;
  // What Swagger UI fills in: the media type's example, else the schema's.
  return { paths: Object.keys(doc.paths), example: (media.example ?? media.schema.example) as ProcessingRequest };
}

function submit(apiUrl: string, request: ProcessingRequest): Promise<Response> {
  return fetch(`${apiUrl}/character/processing`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request) });
}

/** Waits (up to a generous deadline, not a timing assertion) for a JSON log line that matches. */
async function logLine(service: Parameters<typeof logLines>[0], matches: (line: ReturnType<typeof logLines>[number]) => boolean) {
  for (let i = 0; i < 1_200; i++) {
    const found = logLines(service).find(matches);
    if (found) return found;
    await Bun.sleep(50);
  }
  throw new Error(`no such log line:\n${service.logs()}`);
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

  test("Swagger UI's processing example, posted as is, answers 202 and the worker re-ingests the sample in place: same book, same characters, the session still answers", async () => {
    if (!first) throw new Error("the first start failed");
    const { service, ready } = await startDemo(dataDir);
    let jobId: string;
    try {
      const { paths, example } = await processingExample(ready.api);
      expect(example).toEqual({ book_id: SAMPLE_BOOK.id, user_id: LOCAL_USER_ID, file_url: `${ready.api}${localFilePath(SAMPLE_BOOK.path)}` });
      // The file's route is a local convenience, not part of the documented API.
      expect(paths.filter((p) => p.startsWith(LOCAL_FILES_PATH))).toEqual([]);
      expect(await (await fetch(example.file_url)).text()).toBe(await Bun.file(SAMPLE_BOOK.path).text());

      const res = await submit(ready.api, example);
      const accepted = (await res.json()) as ProcessingAccepted;
      expect({ status: res.status, book: accepted.data.book_id }).toEqual({ status: 202, book: SAMPLE_BOOK.id });
      jobId = accepted.job_id;
      const ingested = await logLine(service, (l) => (l.msg === "book ingested" || l.msg === "job failed" || l.msg === "job dead-lettered") && l.job_id === jobId);
      expect(ingested).toMatchObject({ msg: "book ingested", book_id: SAMPLE_BOOK.id, characters: SAMPLE_SPEAKERS.length });

      expect(ready.chat).toMatchObject({ session_id: first.sessionId, character_id: first.characterId });
      expectStreamedReply(parseSseEvents(await runPrintedCurl(ready.curl!)));
    } finally {
      expect(await service.stop("SIGINT")).toBe(0);
    }
    await withEmbeddedDatabase(async (db) => {
      expect(await db.query("SELECT id FROM books")).toEqual([{ id: SAMPLE_BOOK.id }]);
      expect(await db.query("SELECT completed_job_id FROM book_ingestions WHERE book_id = $1", [SAMPLE_BOOK.id])).toEqual([{ completed_job_id: jobId }]);
      const characters = await db.query<{ id: string; name: string }>("SELECT id, name FROM characters WHERE book_id = $1", [SAMPLE_BOOK.id]);
      expect(characters.map((c) => c.name).sort()).toEqual([...SAMPLE_SPEAKERS].sort());
      expect(characters.map((c) => c.id)).toContain(first!.characterId);
      const [session] = await db.query<{ message_count: number }>("SELECT message_count FROM chat_sessions WHERE id = $1", [first!.sessionId]);
      expect(session!.message_count).toBe(3);
    });
  });
});

/** A loopback address of the API itself, the one `npm start` on loopback serves the sample from. */
function selfFileUrl(apiUrl: string): string {
  return `${apiUrl}${localFilePath(SAMPLE_BOOK.path)}`;
}

test("npm start with HOST=0.0.0.0 serves no book file, refuses a loopback file_url and keeps the made-up processing example", async () => {
  const open = await mkdtemp(join(tmpdir(), "npm-start-network-"));
  try {
    const { service, ready } = await startDemo(open, { HOST: "0.0.0.0" });
    try {
      expect(ready.chat).toMatchObject({ book_id: SAMPLE_BOOK.id });
      const { example } = await processingExample(ready.api);
      expect(new URL(example.file_url).hostname).toBe("books.example.com");
      expect((await fetch(selfFileUrl(ready.api))).status).toBe(404);
      const res = await submit(ready.api, { book_id: SAMPLE_BOOK.id, user_id: LOCAL_USER_ID, file_url: selfFileUrl(ready.api) });
      expect({ status: res.status, body: await res.json() }).toEqual({ status: 422, body: { error: "file_url host is not a public address" } });
    } finally {
      expect(await service.stop("SIGINT")).toBe(0);
    }
  } finally {
    await rm(open, { recursive: true, force: true });
  }
});

test("npm run api (a deployment) serves no book file and refuses a loopback file_url, even for a book it has", async () => {
  const deployed = await mkdtemp(join(tmpdir(), "npm-run-api-"));
  try {
    const book = await (async () => {
      const db = await createPgliteDatabase({ dataDir: join(deployed, "pg") });
      try {
        await migrate(db);
        return await insertBook(db, { title: SAMPLE_BOOK.title });
      } finally {
        await db.close();
      }
    })();
    const api = await startService("api/server.ts", { DATA_DIR: deployed, LOG_LEVEL: "warn" });
    try {
      const { paths, example } = await processingExample(api.url);
      expect(paths.filter((p) => p.startsWith(LOCAL_FILES_PATH))).toEqual([]);
      expect(new URL(example.file_url).hostname).toBe("books.example.com");
      expect((await fetch(selfFileUrl(api.url))).status).toBe(404);
      const res = await submit(api.url, { book_id: book.id, user_id: LOCAL_USER_ID, file_url: selfFileUrl(api.url) });
      expect({ status: res.status, body: await res.json() }).toEqual({ status: 422, body: { error: "file_url host is not a public address" } });
    } finally {
      expect(await api.stop()).toBe(0);
    }
  } finally {
    await rm(deployed, { recursive: true, force: true });
  }
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
