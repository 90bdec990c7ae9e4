/**
 * The spoiler guard on workerd, the Workers runtime, where an isolate has 128 MB in all:
 * `bun bench/spoiler-guard-edge.ts [--mb 51] [--books 10] [--cache-mb N]`.
 *
 * The real app, as `wrangler deploy` would upload it, served by workerd alone on the edge drivers
 * (bench/chat.ts, edgeStores), with its V8 inspector open. Each of `--books` books gets the guard data
 * ingestion stores for one large book (the non-repeating text of bench/large-book.ts: War and Peace,
 * then copies of it with each paragraph's words shuffled); a reader at 50 % then chats with a
 * character of each book in turn, so the API's guard cache loads them one by one until it is full
 * (SPOILER_GUARD_CACHE_MB: the edge's default, or `--cache-mb`) and evicts the oldest after. Reported after each turn: the
 * isolate's memory as V8 counts it (its heap, and the ArrayBuffers outside it, where the indexes'
 * arrays live), once a full garbage collection has run, and workerd's resident memory.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { DEFAULT_EDGE_SPOILER_GUARD_CACHE_MB } from "../common/config-defaults.ts";
import { createSession, insertBook } from "../common/db/frontend-rows.ts";
import { saveCharacters } from "../common/db/characters.ts";
import { saveBookReadingPositions } from "../common/db/reading-positions.ts";
import { saveSpoilerGuard } from "../common/db/spoiler-guards.ts";
import { buildShingleIndex } from "../ingest/spoiler-guard/shingles.ts";
import { extractWork } from "../ingest/book/book-text.ts";
import { freePort } from "../tests/support/process.ts";
import { apiRuntime, edgeStores, startGatewayProcess, withChatApi } from "./chat.ts";
import { answerHelp, generatedNovel, machineHeader, markdownTable, memoryOf, nonRepeatingText, openInspector, SHARED_BOOKS_DIR } from "./support.ts";

answerHelp(
  "usage: bun bench/spoiler-guard-edge.ts [--mb 51] [--books 10] [--cache-mb N]\n\nThe API on workerd with its spoiler-guard cache filled by large books: the isolate's memory after each.",
);
const { values } = parseArgs({ args: process.argv.slice(2), options: { mb: { type: "string", default: "51" }, books: { type: "string", default: "10" }, "cache-mb": { type: "string", default: String(DEFAULT_EDGE_SPOILER_GUARD_CACHE_MB) } } });
const cacheMb = Number(values["cache-mb"]);
const bytes = Number(values.mb) * 1e6;
const bookCount = Number(values.books);
const MiB = 2 ** 20;

const warAndPeace = join(SHARED_BOOKS_DIR, "pg2600_war_and_peace.txt");
const text = existsSync(warAndPeace) ? nonRepeatingText(extractWork(readFileSync(warAndPeace, "utf8")).text, bytes) : generatedNovel(bytes);
const index = buildShingleIndex(text);
const stored = index.encode();

const gateway = await startGatewayProcess();
try {
  const stores = await edgeStores(gateway.indexesURL);
  if (typeof stores === "string") throw new Error(`Postgres and Redis are needed: ${stores}`);
  const runtime = apiRuntime("workerd-bundle");
  const inspectorPort = await freePort();
  const rows: string[][] = [];
  await withChatApi(stores, gateway.baseURL, 1, { ...runtime, start: (env) => runtime.start({ ...env, SPOILER_GUARD_CACHE_MB: String(cacheMb) }, { inspectorPort }) }, async ({ url, pid }) => {
    const inspector = await openInspector(inspectorPort);
    const db = await stores.open("");
    try {
      const measure = async (label: string, turnMs?: number) => {
        // workerd runs an inspector's collection when a request next enters the isolate.
        const collected = inspector.send("HeapProfiler.collectGarbage").then(() => true);
        await fetch(`${url}/health`);
        const swept = await Promise.race([collected, Bun.sleep(5_000).then(() => false)]);
        const heap = (await inspector.send("Runtime.getHeapUsage")) as { usedSize: number; totalSize: number; backingStorageSize?: number };
        const rss = (await memoryOf(pid)).rss / MiB;
        const outside = heap.backingStorageSize ?? NaN;
        rows.push([
          swept ? label : `${label} (no collection)`,
          turnMs === undefined ? "–" : turnMs.toFixed(0),
          (heap.usedSize / MiB).toFixed(1),
          (outside / MiB).toFixed(1),
          ((heap.usedSize + outside) / MiB).toFixed(1),
          (heap.totalSize / MiB).toFixed(1),
          rss.toFixed(0),
        ]);
      };
      await measure("the app, started");
      for (let i = 1; i <= bookCount; i++) {
        const book = await insertBook(db, { title: `Large book ${i}`, processingStatus: "completed" });
        const [character] = (await saveCharacters(db, book.id, [{ name: "Anna Scherer", description: "A hostess.", systemPrompt: "I am Anna Scherer.", importance: 10 }])).characters;
        await saveBookReadingPositions(db, book.id, { chunkEnds: [0.25, 0.5, 0.75, 1], checkpoints: [] });
        await saveSpoilerGuard(db, book.id, { characters: [], shingles: stored });
        const userId = crypto.randomUUID();
        const session = await createSession(db, { userId, characterId: character!.id });
        const started = performance.now();
        const res = await fetch(`${url}/character/chat`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ user_id: userId, character_id: character!.id, book_id: book.id, session_id: session.id, user_message: "Who came to the soirée?", reading_position: 0.5 }),
        });
        const body = await res.text();
        if (!res.ok || !body.includes('"done":true')) throw new Error(`chat on book ${i} answered ${res.status}: ${body.slice(0, 300)}`);
        await measure(`book ${i} guarded`, performance.now() - started);
      }
    } finally {
      inspector.close();
      await db.close();
    }
  });
  console.log(
    [
      machineHeader(),
      "",
      `Each book: ${(Buffer.byteLength(text) / 1e6).toFixed(1)} MB of text, its shingle index ${index.size} keys (window ${index.window}), ${(index.bytes / MiB).toFixed(1)} MiB in memory, ${(stored.length / 1e6).toFixed(1)} MB stored. SPOILER_GUARD_CACHE_MB=${cacheMb}. A Worker's isolate: 128 MB.`,
      "",
      markdownTable(["after", "turn ms", "V8 heap used MiB", "ArrayBuffers outside it MiB", "isolate total MiB", "V8 heap reserved MiB", "workerd RSS MiB"], rows),
    ].join("\n"),
  );
} finally {
  gateway.stop();
}
