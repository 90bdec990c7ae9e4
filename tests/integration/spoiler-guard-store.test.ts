import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createSpoilerGuards } from "../../api/chat/spoiler-guard-cache.ts";
import type { Database } from "../../common/db/index.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { saveSpoilerGuard } from "../../common/db/spoiler-guards.ts";
import { createLogger } from "../../common/log.ts";
import { buildShingleIndex } from "../../ingest/spoiler-guard/shingles.ts";
import { guardCharacters } from "../../ingest/spoiler-guard/people.ts";
import { openEmbeddedDatabase } from "../support/embedded-stores.ts";

/** The API's reading of a book's guard row (api/chat/spoiler-guard-cache.ts) on the embedded database. */

const EARLY = "Mara Quill kept the lamp on Gull Rock through the long winter, trimming the wick each evening at dusk.";
const LATE = "The stranger said at last that he was Jonah, her brother, who had set the fire in the boathouse himself.";
const BOOK = `${EARLY} ${"The boats came back one by one, and the harbour slept. ".repeat(6)}${LATE} Silas Crane left on the morning tide.`;

let db: Database;
beforeAll(async () => {
  db = await openEmbeddedDatabase();
});
afterAll(() => db.close());

async function guardedBook(title: string) {
  const book = await insertBook(db, { title });
  const characters = guardCharacters(BOOK, [{ id: "silas", name: "Silas Crane", aliases: [] }]);
  const shingles = buildShingleIndex(BOOK).encode();
  await saveSpoilerGuard(db, book.id, { characters, shingles });
  return { bookId: book.id, storedChars: shingles.length };
}

function reply(guard: { push(d: string): { stop?: string }; end(): { stop?: string } }, text: string) {
  return guard.push(text).stop ?? guard.end().stop;
}

describe("the API's spoiler guard of a book", () => {
  test("checks a late passage and a late name", async () => {
    const { bookId } = await guardedBook("The Keeper's Ledger, guarded");
    const guards = createSpoilerGuards({ db, log: createLogger({ write: () => {} }) });
    expect(reply((await guards.guardFor(bookId, "mara", 0.3))!, `${LATE} `)).toBe("passage");
    expect(reply((await guards.guardFor(bookId, "mara", 0.3))!, "Silas Crane came. ")).toBe("name");
  });

  test("a stored index longer than the reader's bound is left in the database: names are still checked, and the log says why passages are not", async () => {
    const { bookId, storedChars } = await guardedBook("The Keeper's Ledger, an index beyond the bound");
    const lines: string[] = [];
    const guards = createSpoilerGuards({ db, log: createLogger({ write: (line) => lines.push(line) }), maxStoredChars: storedChars - 1 });
    const guard = (await guards.guardFor(bookId, "mara", 0.3))!;
    expect(reply(guard, `${LATE} `)).toBeUndefined();
    expect(reply((await guards.guardFor(bookId, "mara", 0.3))!, "Silas Crane came. ")).toBe("name");
    expect(lines.filter((l) => l.includes("beyond the bound"))).toHaveLength(1);
    expect(lines.join("\n")).toContain(`stored_chars=${storedChars}`);
  });
});
