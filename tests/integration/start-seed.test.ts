import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../common/config.ts";
import { getBook } from "../../common/db/books.ts";
import { listCharacters } from "../../common/db/characters.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { buildDeps, type Deps } from "../../common/deps.ts";
import { silentLogger } from "../../common/log.ts";
import { SAMPLE_BOOK, seedSampleBook } from "../../ingest/sample-book.ts";

// Two embedded Postgres data dirs are created (initdb).
setDefaultTimeout(90_000);

const folders: string[] = [];
const opened: Deps[] = [];
async function freshDeps(): Promise<Deps> {
  const dir = await mkdtemp(join(tmpdir(), "seed-"));
  folders.push(dir);
  const deps = await buildDeps(loadConfig({ DATA_DIR: dir }), { logger: silentLogger });
  opened.push(deps);
  return deps;
}
afterAll(async () => {
  for (const deps of opened) await deps.close();
  for (const dir of folders) await rm(dir, { recursive: true, force: true });
});

let deps: Deps;
beforeAll(async () => {
  deps = await freshDeps();
});

test("the sample story is an original text of a readable length with three speaking characters", async () => {
  const text = await readFile(SAMPLE_BOOK.path, "utf8");
  const words = text.split(/\s+/).filter(Boolean).length;
  expect(words).toBeGreaterThan(1500);
  expect(words).toBeLessThan(3000);
  expect(text).toContain("An original short story, written for this project");
  for (const tag of ["said Ottilie", "said Jonah", "said Mr. Crane"]) expect(text.split(tag).length - 1).toBeGreaterThan(5);
});

test("a first start cut short is resumed at the next one, and a completed sample is never ingested again", async () => {
  const stopped = new AbortController();
  stopped.abort(new Error("the service is stopping"));
  await expect(seedSampleBook(deps, { signal: stopped.signal })).rejects.toThrow();
  expect((await getBook(deps.db, SAMPLE_BOOK.id))?.processingStatus).not.toBe("completed");

  const resumed = await seedSampleBook(deps);
  expect(resumed.status).toBe("ingested");
  const book = await getBook(deps.db, SAMPLE_BOOK.id);
  expect(book).toMatchObject({ title: SAMPLE_BOOK.title, processingStatus: "completed", language: "English" });
  const characters = await listCharacters(deps.db, SAMPLE_BOOK.id);
  expect(characters.map((c) => c.name)).toEqual(["Ottilie", "Jonah", "Mr. Crane"]);
  expect(characters[0]!.aliases).toContain("Ottilie Marsh");

  expect(await seedSampleBook(deps)).toEqual({ status: "present" });
  expect((await listCharacters(deps.db, SAMPLE_BOOK.id)).map((c) => c.updatedAt)).toEqual(characters.map((c) => c.updatedAt));
});

test("a database that already holds a book gets no sample", async () => {
  const other = await freshDeps();
  const book = await insertBook(other.db, { title: "A Reader's Own Book" });
  expect(await seedSampleBook(other)).toEqual({ status: "skipped", reason: "the database already has 1 book" });
  expect(await other.db.query("SELECT id FROM books")).toEqual([{ id: book.id }]);
  expect(await other.db.query("SELECT id FROM characters")).toEqual([]);
});
