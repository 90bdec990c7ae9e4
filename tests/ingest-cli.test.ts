import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase } from "../common/db/create.ts";
import { createTestDatabase, probePostgres } from "./support/postgres.ts";
import { REPO_ROOT } from "./support/process.ts";
import { ENGLISH_BOOK, FIXTURES, listFiles, startScriptedGateway, type ScriptedGateway } from "./fixtures/ingest/harness.ts";

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
  expect(stdout).toMatch(/time: download [\d.]+ s, booknlp [\d.]+ s, extract [\d.]+ s, prompt [\d.]+ s, index [\d.]+ s, total [\d.]+ s/);
  const backups = await listFiles(join(dataDir, "prompts"));
  expect(backups).toHaveLength(3);
  expect(backups.some((f) => f.endsWith("/clara.md"))).toBe(true);
});

test("ingesting the same file again updates the book it made instead of adding a copy", async () => {
  const env = { DATA_DIR: dataDir, LLM_GATEWAY_URL: gateway.baseURL };
  const again = await ingest([join(FIXTURES, ENGLISH_BOOK), "--title", "Another title", "--max-characters", "3"], env);
  expect(again.exitCode).toBe(0);
  expect(again.stderr).toMatch(/this file was ingested before as book [0-9a-f-]{36} \("The Keeper's Ledger"\): updating that book/);
  expect(again.stdout).toStartWith("The Keeper's Ledger: 3 characters, ");
  const db = await createDatabase({ driver: "pglite", dataDir: join(dataDir, "pg") });
  try {
    expect(await db.query("SELECT title FROM books")).toEqual([{ title: "The Keeper's Ledger" }]);
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

test("on a database shared with the frontend, bun run ingest adds no books row unless given --write-frontend-tables", async () => {
  const postgres = await probePostgres();
  if (!postgres.reachable) return void console.warn(`skipping the shared-database case: ${postgres.reason}`);
  const database = await createTestDatabase(postgres.url);
  try {
    const { exitCode, stderr } = await ingest([join(FIXTURES, ENGLISH_BOOK)], { DATA_DIR: dataDir, DATABASE_URL: database.url });
    expect(exitCode).toBe(2);
    expect(stderr).toContain("pass --write-frontend-tables");
    const db = await createDatabase({ driver: "postgres", url: database.url });
    try {
      expect(await db.query("SELECT id FROM books")).toEqual([]);
    } finally {
      await db.close();
    }
  } finally {
    await database.drop();
  }
});
