import { describe, expect, test } from "bun:test";
import MiniSearch from "minisearch";
import { readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { InvalidBookIdError } from "../../common/embedded-store.ts";
import { createLogger } from "../../common/log.ts";
import { createEmbeddedTextIndex, LOAD_SLICE_CHUNKS } from "../../common/text-index/embedded.ts";
import { TOKENIZER_VERSION, tokenize } from "../../common/text-index/tokenize.ts";
import type { IndexedChunk } from "../../common/contract/search.ts";
import { tempDirs } from "../support/temp-dirs.ts";

const freshDir = tempDirs("embedded-text-");

const BOOK = "0f8fad5b-d9cb-469f-a165-70867728950e";
const URDU_BOOK = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

const passages: IndexedChunk[] = [
  { chunkIndex: 0, text: "The old lighthouse keeper climbed the spiral stairs every night to trim the wick of the great lamp." },
  { chunkIndex: 1, text: "Margaret baked bread at dawn; the smell of warm loaves drifted down the cobbled lane to the harbour." },
  { chunkIndex: 2, text: "A storm tore the sails of the fishing fleet, and three boats never came back to the harbour." },
  { chunkIndex: 3, text: "Doctor Hale wrote letters to his sister in London, complaining about the damp and the gossip." },
  { chunkIndex: 4, text: "The children found a brass telescope in the attic and watched ships on the horizon all afternoon." },
  { chunkIndex: 5, text: "At the village fair, Margaret's cherry pie won first prize, to the baker's visible annoyance." },
  { chunkIndex: 6, text: "The keeper's journal recorded wind, tide and every ship that passed the rocks below the lighthouse." },
  { chunkIndex: 7, text: "In winter the harbour froze, and the fishermen mended their nets by the fire in the tavern." },
];

const urduPassages: IndexedChunk[] = [
  { chunkIndex: 0, text: "اُردُو پاکستان کی قومی زبان ہے اور برصغیر میں کروڑوں لوگ اسے بولتے ہیں۔" },
  { chunkIndex: 1, text: "لاہور کے پرانے شہر میں بادشاہی مسجد اپنی خوبصورتی کے لیے مشہور ہے۔" },
  { chunkIndex: 2, text: "بارش کے موسم میں کسان اپنے کھیتوں میں دھان کی فصل بوتے ہیں۔" },
  { chunkIndex: 3, text: "علامہ اقبال نے اپنی شاعری میں نوجوانوں کو خودی کا پیغام دیا۔" },
];

async function indexed(chunks: readonly IndexedChunk[] = passages, book = BOOK) {
  const dir = await freshDir();
  const index = createEmbeddedTextIndex({ dir });
  await index.upsert(book, chunks);
  return { dir, index };
}

describe("embedded BM25 index", () => {
  test.each([
    ["lighthouse keeper lamp", 0],
    ["bread loaves dawn", 1],
    ["storm sails boats", 2],
    ["Doctor Hale letter to his sister", 3],
    ["telescope attic", 4],
    ["who won the prize for cherry pie", 5],
    ["keeper journal tide", 6],
    ["frozen harbour nets tavern", 7],
  ])("ranks the passage that answers %p first", async (query, expected) => {
    const { index } = await indexed();
    const hits = await index.search(BOOK, query);
    expect(hits[0]?.chunkIndex).toBe(expected);
    expect(hits[0]?.text).toBe(passages[expected]!.text);
    for (let i = 1; i < hits.length; i++) expect(hits[i]!.score).toBeLessThanOrEqual(hits[i - 1]!.score);
  });

  test("ranks a chunk that names a rare word above chunks that only share common ones", async () => {
    const { index } = await indexed();
    const hits = await index.search(BOOK, "harbour telescope");
    expect(hits[0]?.chunkIndex).toBe(4);
    expect(hits.map((h) => h.chunkIndex).sort()).toEqual([1, 2, 4, 7]);
  });

  test("matches regardless of case, accents, possessives and plurals", async () => {
    const { index } = await indexed([
      { chunkIndex: 0, text: "They met at the CAFÉ on the corner." },
      { chunkIndex: 1, text: "Natasha's letter arrived on Tuesday." },
      { chunkIndex: 2, text: "The Rostovs gave a ball for their stories." },
    ]);
    expect((await index.search(BOOK, "cafe"))[0]?.chunkIndex).toBe(0);
    expect((await index.search(BOOK, "natasha letters"))[0]?.chunkIndex).toBe(1);
    expect((await index.search(BOOK, "Rostov story"))[0]?.chunkIndex).toBe(2);
  });

  test("finds Urdu text for an Urdu query, with or without diacritics and Arabic-keyboard letters", async () => {
    const { index } = await indexed(urduPassages, URDU_BOOK);
    expect((await index.search(URDU_BOOK, "اردو زبان"))[0]?.chunkIndex).toBe(0);
    expect((await index.search(URDU_BOOK, "بادشاہی مسجد"))[0]?.chunkIndex).toBe(1);
    // Arabic-keyboard kaf and yeh, a tatweel, a zabar: each alone must still find the passage
    for (const variant of ["كسان", "کھيتوں", "کھیـــتوں", "فَصل"]) {
      expect((await index.search(URDU_BOOK, variant)).map((h) => h.chunkIndex)).toEqual([2]);
    }
    expect((await index.search(URDU_BOOK, "اقبال کی شاعری"))[0]?.chunkIndex).toBe(3);
    expect(await index.search(URDU_BOOK, "lighthouse")).toEqual([]);
  });

  test("cuts text in any script into words, and scripts without spaces too", () => {
    expect(tokenize("Pierre's LETTERS to the Rostovs")).toEqual(["pierre", "letter", "rostov"]);
    expect(tokenize("اُردُو زبان۔")).toEqual(["اردو", "زبان"]);
    expect(tokenize("Лев Толстой написал «Войну и мир»")).toEqual(["лев", "толстои", "написал", "воину", "и", "мир"]);
    expect(tokenize("我爱北京")).toContain("北京");
    expect(tokenize("ｆｕｌｌ－ｗｉｄｔｈ ۱۸۱۲")).toEqual(["full", "width", "1812"]);
    expect(tokenize("the and of")).toEqual([]);
  });

  test("returns at most `limit` hits, ten by default", async () => {
    const chunks = Array.from({ length: 14 }, (_, i) => ({ chunkIndex: i, text: `ship number ${i}` }));
    const { index } = await indexed(chunks);
    expect(await index.search(BOOK, "ship")).toHaveLength(10);
    expect(await index.search(BOOK, "ship", { limit: 3 })).toHaveLength(3);
    expect(await index.search(BOOK, "ship", { limit: 0 })).toEqual([]);
  });

  test("never returns chunks past maxChunkIndex", async () => {
    const { index } = await indexed();
    const hits = await index.search(BOOK, "harbour lighthouse", { maxChunkIndex: 2 });
    expect(hits.map((h) => h.chunkIndex).sort()).toEqual([0, 1, 2]);
    expect(await index.search(BOOK, "tavern", { maxChunkIndex: 6 })).toEqual([]);
  });

  test("upserting a chunk again replaces it instead of adding a copy", async () => {
    const { index } = await indexed();
    await index.upsert(BOOK, [{ chunkIndex: 4, text: "A parrot learned to whistle sea shanties." }]);
    await index.upsert(BOOK, [
      { chunkIndex: 4, text: "A parrot learned to whistle." },
      { chunkIndex: 4, text: "A parrot learned to sing sea shanties." },
    ]);
    expect(await index.count(BOOK)).toBe(8);
    expect(await index.search(BOOK, "telescope")).toEqual([]);
    expect(await index.search(BOOK, "whistle")).toEqual([]);
    expect(await index.search(BOOK, "shanties")).toEqual([
      { chunkIndex: 4, text: "A parrot learned to sing sea shanties.", score: expect.any(Number) },
    ]);
  });

  test("a new index on the same folder finds what an earlier one stored, and can replace it", async () => {
    const { dir, index } = await indexed();
    const before = await index.search(BOOK, "harbour keeper");
    await index.close?.();
    expect((await readdir(dir)).sort()).toEqual([`${BOOK}.bm25.log`, `${BOOK}.stamp`]);

    const reopened = createEmbeddedTextIndex({ dir });
    expect(await reopened.count(BOOK)).toBe(8);
    expect(await reopened.search(BOOK, "harbour keeper")).toEqual(before);
    await reopened.upsert(BOOK, [{ chunkIndex: 0, text: "The lamp went dark forever." }]);

    const third = createEmbeddedTextIndex({ dir });
    expect(await third.count(BOOK)).toBe(8);
    expect(await third.search(BOOK, "spiral")).toEqual([]);
    expect((await third.search(BOOK, "lamp dark"))[0]?.chunkIndex).toBe(0);
  });

  test("reads a whole-index snapshot an earlier version wrote, with the log written after it on top", async () => {
    const dir = await freshDir();
    const earlier = new MiniSearch({ idField: "id", fields: ["text"], storeFields: ["text", "chunkIndex"], tokenize, processTerm: (term: string) => term });
    earlier.addAll(passages.map((p) => ({ id: `${BOOK}:${p.chunkIndex}`, ...p })));
    await writeFile(join(dir, `${BOOK}.bm25.json`), JSON.stringify({ format: 1, tokenizer: TOKENIZER_VERSION, index: earlier }));
    const index = createEmbeddedTextIndex({ dir });
    expect((await index.search(BOOK, "telescope"))[0]?.chunkIndex).toBe(4);
    await index.upsert(BOOK, [{ chunkIndex: 4, text: "The telescope was sold at auction." }]);
    expect(await index.count(BOOK)).toBe(8);
    expect((await index.search(BOOK, "auction"))[0]?.chunkIndex).toBe(4);
    await index.deleteBook(BOOK);
    expect(await readdir(dir)).toEqual([]);
  });

  test("after a crash mid-write keeps every batch written before it", async () => {
    const { dir } = await indexed();
    const index = createEmbeddedTextIndex({ dir });
    await index.upsert(BOOK, [{ chunkIndex: 8, text: "A torn batch about zeppelins." }]);
    const path = join(dir, `${BOOK}.bm25.log`);
    const bytes = await Bun.file(path).bytes();
    await writeFile(path, bytes.subarray(0, bytes.length - 5));

    const warnings: string[] = [];
    const reopened = createEmbeddedTextIndex({ dir, logger: createLogger({ write: (line) => warnings.push(line) }) });
    expect(await reopened.count(BOOK)).toBe(8);
    expect(await reopened.search(BOOK, "zeppelins")).toEqual([]);
    expect(warnings.join()).toContain("torn or corrupt tail");
    await reopened.upsert(BOOK, [{ chunkIndex: 9, text: "Balloons over the harbour." }]);
    expect((await createEmbeddedTextIndex({ dir }).search(BOOK, "balloons"))[0]?.chunkIndex).toBe(9);
  });

  test("another process's re-ingestion of a book is served at once, not the passages it loaded before", async () => {
    const { dir, index: worker } = await indexed();
    const api = createEmbeddedTextIndex({ dir });
    expect((await api.search(BOOK, "telescope"))[0]?.chunkIndex).toBe(4);

    await worker.deleteBook(BOOK);
    await worker.upsert(BOOK, [{ chunkIndex: 0, text: "The telescope was sold at auction." }]);
    expect((await api.search(BOOK, "telescope")).map((h) => h.text)).toEqual(["The telescope was sold at auction."]);
    expect(await api.count(BOOK)).toBe(1);
    await worker.close?.();
    expect(await api.count(BOOK)).toBe(1);

    await worker.deleteBook(BOOK);
    expect(await api.search(BOOK, "telescope")).toEqual([]);
  });

  test("serves books it had to drop from memory by reading them again", async () => {
    const dir = await freshDir();
    const index = createEmbeddedTextIndex({ dir, maxCachedBytes: 1 });
    await index.upsert(BOOK, passages);
    await index.upsert(URDU_BOOK, urduPassages);
    expect((await index.search(BOOK, "telescope"))[0]?.chunkIndex).toBe(4);
    expect((await index.search(URDU_BOOK, "مسجد"))[0]?.chunkIndex).toBe(1);
    await index.close?.();
    const reopened = createEmbeddedTextIndex({ dir });
    expect(await reopened.count(BOOK)).toBe(8);
    expect(await reopened.count(URDU_BOOK)).toBe(4);
  });

  test("get returns the stored chunks by index in the order asked, the latest version of each, skipping unknown ones", async () => {
    const { dir, index } = await indexed();
    await index.upsert(BOOK, [{ chunkIndex: 4, text: "A parrot learned to whistle." }]);
    expect(await index.get(BOOK, [6, 4, 99, 0, 4])).toEqual([
      { chunkIndex: 6, text: passages[6]!.text },
      { chunkIndex: 4, text: "A parrot learned to whistle." },
      { chunkIndex: 0, text: passages[0]!.text },
    ]);
    expect(await createEmbeddedTextIndex({ dir }).get(BOOK, [1])).toEqual([{ chunkIndex: 1, text: passages[1]!.text }]);
    expect(await index.get(URDU_BOOK, [0])).toEqual([]);
    expect(await index.get(BOOK, [])).toEqual([]);
  });

  test("get refuses more than ten indexes, or indexes that are not whole numbers, before reading anything", async () => {
    const { index } = await indexed();
    await expect(index.get(BOOK, Array.from({ length: 11 }, (_, i) => i))).rejects.toBeInstanceOf(RangeError);
    await expect(index.get(BOOK, [-1])).rejects.toBeInstanceOf(RangeError);
    await expect(index.get(BOOK, [1.5])).rejects.toBeInstanceOf(RangeError);
  });

  test("a book that was never indexed has no hits and a count of zero", async () => {
    const index = createEmbeddedTextIndex({ dir: await freshDir() });
    expect(await index.search(BOOK, "harbour")).toEqual([]);
    expect(await index.count(BOOK)).toBe(0);
  });

  test("parallel upserts to one book lose no documents", async () => {
    const { dir, index } = await indexed([]);
    await Promise.all(
      Array.from({ length: 20 }, (_, b) =>
        index.upsert(BOOK, Array.from({ length: 5 }, (_, i) => ({ chunkIndex: b * 5 + i, text: `word${b * 5 + i} common` }))),
      ),
    );
    expect(await index.count(BOOK)).toBe(100);
    const reopened = createEmbeddedTextIndex({ dir });
    expect(await reopened.count(BOOK)).toBe(100);
    expect((await reopened.search(BOOK, "word77"))[0]?.chunkIndex).toBe(77);
  });

  test("deleting a book removes its documents from memory and disk", async () => {
    const { dir, index } = await indexed();
    await index.upsert(URDU_BOOK, urduPassages);
    await index.deleteBook(BOOK);
    expect(await index.search(BOOK, "harbour")).toEqual([]);
    expect(await index.count(BOOK)).toBe(0);
    expect(await createEmbeddedTextIndex({ dir }).count(BOOK)).toBe(0);
    expect((await readdir(dir)).filter((name) => name.startsWith(BOOK))).toEqual([]);
    expect(await createEmbeddedTextIndex({ dir }).count(URDU_BOOK)).toBe(4);
  });

  test("a book loading lets other work run after every few chunks, not after a whole stored batch", async () => {
    const dir = await freshDir();
    const chunks = Array.from({ length: 256 }, (_, i) => ({ chunkIndex: i, text: `${passages[i % passages.length]!.text} (copy ${i})` }));
    // One stored batch, as an ingestion writes 64 chunks or more at a time.
    await createEmbeddedTextIndex({ dir }).upsert(BOOK, chunks);
    const fresh = createEmbeddedTextIndex({ dir });
    let turns = 0;
    let loading = true;
    const other = (async () => {
      while (loading) await new Promise((resolve) => setImmediate(resolve)).then(() => turns++);
    })();
    const hits = await fresh.search(BOOK, "lighthouse");
    loading = false;
    await other;
    expect(hits.length).toBeGreaterThan(0);
    // The other work got a turn at least once per slice of the load.
    expect(turns).toBeGreaterThanOrEqual(chunks.length / LOAD_SLICE_CHUNKS);
  });

  test("once a book's load has outlasted one search's wait, later searches do not wait for it again", async () => {
    const dir = await freshDir();
    const chunks = Array.from({ length: 4096 }, (_, i) => ({ chunkIndex: i, text: `${passages[i % passages.length]!.text} (copy ${i})` }));
    await createEmbeddedTextIndex({ dir }).upsert(BOOK, chunks);
    const impatient = createEmbeddedTextIndex({ dir, maxLoadWaitMs: 5 });
    let loading = 0;
    expect(await impatient.search(BOOK, "lighthouse", { onLoading: () => loading++ })).toEqual([]);
    // The next search answers within a turn or two of the event loop, while the load goes on.
    let turns = 0;
    let answered = false;
    const other = (async () => {
      while (!answered) await new Promise((resolve) => setImmediate(resolve)).then(() => turns++);
    })();
    expect(await impatient.search(BOOK, "lighthouse", { onLoading: () => loading++ })).toEqual([]);
    answered = true;
    await other;
    expect(loading).toBe(2);
    expect(turns).toBeLessThanOrEqual(2);
    expect(await impatient.count(BOOK)).toBe(chunks.length);
  });

  test("refuses book ids that could reach outside its folder", async () => {
    const dir = await freshDir();
    const index = createEmbeddedTextIndex({ dir: join(dir, "text") });
    for (const bad of ["../escape", "a/b", "..", "", "/etc/passwd", "a.b"]) {
      await expect(index.upsert(bad, passages)).rejects.toBeInstanceOf(InvalidBookIdError);
      await expect(index.search(bad, "harbour")).rejects.toBeInstanceOf(InvalidBookIdError);
      await expect(index.count(bad)).rejects.toBeInstanceOf(InvalidBookIdError);
      await expect(index.get(bad, [0])).rejects.toBeInstanceOf(InvalidBookIdError);
      await expect(index.deleteBook(bad)).rejects.toBeInstanceOf(InvalidBookIdError);
    }
    expect(await readdir(dir)).toEqual([]);
  });
});
