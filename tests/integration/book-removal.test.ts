import { afterAll, beforeAll, expect, test } from "bun:test";
import { saveCharacters } from "../../common/db/characters.ts";
import { createSession, insertBook } from "../../common/db/frontend-rows.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { createPgliteDatabase } from "../../common/db/pglite.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { bookCacheKey, characterCacheKey, knowledgeCacheKey, readingPositionsCacheKey, sessionCacheKey } from "../../common/contract/cache-keys.ts";
import { createEmbeddedTextIndex } from "../../common/text-index/embedded.ts";
import { createEmbeddedVectorIndex } from "../../common/vector/embedded.ts";
import { deleteBook } from "../../ingest/book-removal.ts";
import { tempDirs } from "../support/temp-dirs.ts";

// `npm run ingest -- --delete`: what a deleted book leaves in the key-value store.

const freshDir = tempDirs("book-removal-");
let db: Database;
beforeAll(async () => {
  db = await createPgliteDatabase();
  await migrate(db);
});
afterAll(async () => {
  await db?.close();
});

/** A book with two characters (one retired since), a session with each, and every chat cache entry of theirs filled. */
async function bookInUse(title: string, sessionsPerCharacter = 1) {
  const book = await insertBook(db, { title, processingStatus: "completed" });
  const { characters } = await saveCharacters(db, book.id, [
    { name: "Maren", systemPrompt: "I am Maren." },
    { name: "Tobias", systemPrompt: "I am Tobias." },
  ]);
  await db.query("UPDATE characters SET retired_at = now() WHERE id = $1", [characters[1]!.id]);
  const sessions = [];
  for (const character of characters) {
    for (let i = 0; i < sessionsPerCharacter; i++) sessions.push(await createSession(db, { userId: crypto.randomUUID(), characterId: character.id }));
  }
  const keys = [
    bookCacheKey(book.id),
    readingPositionsCacheKey(book.id),
    ...characters.flatMap((c) => [characterCacheKey(c.id), knowledgeCacheKey(c.id)]),
    ...sessions.map((s) => sessionCacheKey(s.id)),
  ];
  return { book, keys };
}

test("deleting a book deletes every chat cache entry of it: its sessions' conversations, its characters (retired ones too), its book and positions; another book's stay", async () => {
  const kv = createMemoryKeyValueStore();
  const doomed = await bookInUse("The Keeper's Ledger", 3);
  const kept = await bookInUse("Harbour Tales");
  for (const key of [...doomed.keys, ...kept.keys]) await kv.set(key, JSON.stringify({ messages: [{ role: "user", content: "something private" }] }), { ex: 3600 });
  const dir = await freshDir();
  const report = await deleteBook(
    {
      db,
      kv,
      config: { systemPromptStoragePath: dir },
      vectorIndex: createEmbeddedVectorIndex({ dir }),
      textIndex: createEmbeddedTextIndex({ dir }),
    },
    doomed.book.id,
  );
  expect(report.failed).toEqual([]);
  expect(doomed.keys.filter((key) => key.startsWith("chat:sess:"))).toHaveLength(6);
  expect(await kv.mget(doomed.keys)).toEqual(doomed.keys.map(() => null));
  expect((await kv.mget(kept.keys)).every((value) => value !== null)).toBe(true);
});
