import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { chunkTextToArray } from "../../common/chunking.ts";
import { createDatabase } from "../../common/db/create.ts";
import type { Database } from "../../common/db/index.ts";
import { migrate } from "../../common/db/migrate.ts";
import { getBook } from "../../common/db/books.ts";
import { listCharacters } from "../../common/db/characters.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { enqueueJob, queueKeys, type QueueKeys } from "../../common/queue.ts";
import { startWorker, type WorkerHandle } from "../../ingest/jobs/queue-consumer.ts";
import { metricValue } from "../support/app.ts";
import { parseSseEvents, requestsOfKind, scriptGateway, startChatHarness, type ChatHarness } from "../support/chat.ts";
import { createTestDatabase, probePostgres, type TestDatabase } from "../support/postgres.ts";
import {
  startPrivatePostgres,
  startPrivateRedis,
  unavailablePostgresServer,
  unavailableRedisServer,
  type PrivatePostgres,
  type PrivateRedis,
} from "../support/private-servers.ts";
import {
  ENGLISH_BOOK,
  FIXTURES,
  TEST_PIPELINE_OPTIONS,
  USER_ID,
  createIngestEnv,
  eventually,
  startBookServer,
  startScriptedGateway,
  type BookServer,
  type IngestEnv,
  type ScriptedGateway,
} from "../fixtures/ingest/harness.ts";

/**
 * The stores restarting under load: a Redis of our own killed and started again while readers chat
 * and while books are ingested, and a Postgres cluster of our own crashed and started again while a
 * book is ingested. The shared servers on 6379 and 5432 are never touched.
 *
 * The Redis here persists every write (append-only file, fsync always), as a managed Redis does: a
 * restart loses nothing. What is promised: every chat turn ends in `done` (saved) or an error event
 * (nothing saved), every session's message_count equals its `done` events, a lock a dead Redis could
 * not release is released once Redis is back, and every queued book completes once.
 */

setDefaultTimeout(240_000);

const postgres = await probePostgres();
const redisMissing = unavailableRedisServer();
const postgresServerMissing = unavailablePostgresServer();
const redisSkip = redisMissing ?? (postgres.reachable ? undefined : postgres.reason);
if (redisSkip) console.warn(`faults-restarts: the Redis restarts are skipped: ${redisSkip}`);
if (postgresServerMissing) console.warn(`faults-restarts: the Postgres restart is skipped: ${postgresServerMissing}`);

const SESSIONS = 8;
const TURNS_PER_SESSION = 12;

describe.skipIf(redisSkip !== undefined)("Redis restarted during chats", () => {
  let stores: RestartStores;
  let db: Database;
  let redis: PrivateRedis;
  let kv: KeyValueStore;
  let h: ChatHarness;

  beforeAll(async () => {
    if (!postgres.reachable) return;
    stores = await openRestartStores(postgres.url);
    ({ db, redis, kv } = stores);
    h = await startChatHarness({ db, kv });
  }, 120_000);
  afterAll(async () => {
    await h?.stop();
    await stores?.close();
  });

  test(`${SESSIONS} readers chatting through three Redis crashes: every turn ends in done or an error event, and the counts match`, async () => {
    // Slow enough replies that the crashes land mid-turn: while locking, streaming and saving.
    scriptGateway(h.gateway, { chat: { chunks: Array.from({ length: 12 }, (_, i) => `w${i} `), tokenDelayMs: 15 } });
    const sessions = await Promise.all(Array.from({ length: SESSIONS }, () => h.newSession()));
    const done = new Map<string, number>(sessions.map((s) => [s, 0]));
    const outcomes: Record<string, number> = {};
    let turnsFinished = 0;

    const reader = async (session: string) => {
      for (let turn = 0; turn < TURNS_PER_SESSION; turn++) {
        const res = await h.chat(session, `Turn ${turn} of ${session.slice(0, 8)}`);
        let outcome: string;
        if (res.status !== 200) outcome = `http ${res.status}`;
        else {
          const events = parseSseEvents(await res.text());
          const last = events.at(-1);
          if (last && "done" in last) {
            done.set(session, done.get(session)! + 1);
            outcome = "done";
          } else outcome = last && "code" in last ? `error ${last.code}` : "no final event";
        }
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        turnsFinished++;
        // A 429 means a lock a crash left behind: the reader comes back later, as a person would.
        if (outcome === "error 429") await Bun.sleep(250);
      }
    };

    const crashes = (async () => {
      for (const after of [SESSIONS * 2, SESSIONS * 5, SESSIONS * 10]) {
        await eventually(async () => turnsFinished >= after, `${after} turns to finish`, 120_000);
        await redis.kill();
        await Bun.sleep(300);
        await redis.start();
      }
    })();
    await Promise.all([...sessions.map(reader), crashes]);
    await h.app.settle();
    console.info(`faults-restarts: chats through 3 Redis crashes: ${JSON.stringify(outcomes)}`);

    expect(Object.keys(outcomes).filter((o) => !["done", "error 429", "error 502"].includes(o))).toEqual([]);
    expect(outcomes.done).toBeGreaterThan(SESSIONS * TURNS_PER_SESSION / 2);
    for (const session of sessions) {
      const [row] = await db.query<{ message_count: number }>("SELECT message_count FROM chat_sessions WHERE id = $1", [session]);
      const messages = await db.query<{ role: string }>("SELECT role FROM messages WHERE session_id = $1 ORDER BY created_at", [session]);
      expect({ session, count: row!.message_count }).toEqual({ session, count: done.get(session)! });
      expect(messages.map((m) => m.role)).toEqual(Array.from({ length: 2 * done.get(session)! }, (_, i) => (i % 2 ? "assistant" : "user")));
    }
    // A turn whose release met a dead Redis frees its lock once Redis is back (settle waited for that).
    for (const session of sessions) {
      for (const key of [`chat:lock:${session}`, `chat:fold:${session}`]) expect({ key, exists: redis.cli("EXISTS", key) }).toEqual({ key, exists: "0" });
    }
    const unavailable = metricValue(await h.metrics.registry.metrics(), "chat_lock_unavailable_total") ?? 0;
    console.info(`faults-restarts: turns that went on without the lock while Redis was down: ${unavailable}`);

    // The next message of every session sees its saved conversation (the last ten messages): no cache entry the crash made stale survives it.
    for (const session of sessions) {
      h.gateway.reset();
      scriptGateway(h.gateway);
      const events = parseSseEvents(await (await h.chat(session, "After the storm")).text());
      expect(events.at(-1)).toMatchObject({ done: true });
      const [chat] = requestsOfKind(h.gateway, "chat");
      const history = chat!.messages.slice(1, -1).map((m) => m.content);
      const saved = await db.query<{ content: string }>(
        "SELECT content FROM (SELECT content, created_at FROM messages WHERE session_id = $1 ORDER BY created_at DESC LIMIT 12) last ORDER BY created_at",
        [session],
      );
      expect({ session, history }).toEqual({ session, history: saved.slice(0, -2).map((m) => m.content) });
    }
    await h.app.settle();
  });
});

describe.skipIf(redisSkip !== undefined)("Redis restarted during ingestion", () => {
  let stores: RestartStores;
  let db: Database;
  let redis: PrivateRedis;
  let kv: KeyValueStore;
  let books: BookServer;
  let gateway: ScriptedGateway;
  let env: IngestEnv;

  beforeAll(async () => {
    if (!postgres.reachable) return;
    stores = await openRestartStores(postgres.url);
    ({ db, redis, kv } = stores);
    books = startBookServer();
    gateway = startScriptedGateway();
    gateway.override.extract = async () => void (await Bun.sleep(60));
    env = await createIngestEnv({ gateway, books, db, kv });
  }, 120_000);
  afterAll(async () => {
    gateway?.stop();
    books?.stop();
    await env?.close();
    await stores?.close();
  });

  test("three queued books complete once each although Redis crashes twice while they are processed", async () => {
    const keys = queueKeys();
    const ids = await enqueueBooks(db, kv, keys, books, 3, "Through the storm");
    const workers = [fastWorker(env, keys), fastWorker(env, keys)];
    try {
      for (let crash = 0; crash < 2; crash++) {
        // A completed book stays completed while a redelivered job is closed: wait for work in hand.
        await eventually(async () => (await statuses(db, ids)).includes("processing") || (await kv.llen(keys.inFlight)) > 0, "a job to be in hand");
        await redis.kill();
        await Bun.sleep(800);
        await redis.start();
      }
      await eventually(async () => (await statuses(db, ids)).every((s) => s === "completed"), "every book to complete", 120_000);
      // A completed book stays completed while a duplicate job (a completion the crash lost) is closed.
      await eventually(async () => (await kv.llen(keys.inFlight)) === 0 && (await kv.llen(keys.queue)) === 0, "the queue and in-flight list to drain");
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
    await expectIngestedOnce(env, ids);
    expect([await kv.llen(keys.queue), await kv.llen(keys.inFlight), await kv.llen(keys.deadLetter)]).toEqual([0, 0, 0]);
    expect(redis.cli("--scan", "--pattern", `${keys.leasePrefix}*`)).toBe("");
  });
});

describe.skipIf(postgresServerMissing !== undefined)("Postgres restarted during ingestion", () => {
  let pg: PrivatePostgres;
  let db: Database;
  let books: BookServer;
  let gateway: ScriptedGateway;
  let env: IngestEnv;
  const kv = createMemoryKeyValueStore();

  beforeAll(async () => {
    pg = await startPrivatePostgres();
    db = await createDatabase({ driver: "postgres", url: pg.url });
    await migrate(db);
    books = startBookServer();
    gateway = startScriptedGateway();
    gateway.override.extract = async () => void (await Bun.sleep(60));
    env = await createIngestEnv({ gateway, books, db, kv });
  }, 120_000);
  afterAll(async () => {
    gateway?.stop();
    books?.stop();
    await env?.close();
    await kv.close();
    await db?.close();
    await pg?.stop();
  });

  test("three queued books complete once each although Postgres crashes twice while they are processed", async () => {
    const keys = queueKeys();
    const ids = await enqueueBooks(db, kv, keys, books, 3, "Lights out");
    const workers = [fastWorker(env, keys), fastWorker(env, keys)];
    try {
      for (let crash = 0; crash < 2; crash++) {
        await eventually(async () => (await statuses(db, ids).catch(() => ["unreadable"])).includes("processing"), "a book to be processing");
        await Bun.sleep(200 * crash);
        await pg.crash();
        await Bun.sleep(700);
        await pg.start();
      }
      await eventually(async () => (await statuses(db, ids).catch(() => ["unreadable"])).every((s) => s === "completed"), "every book to complete", 120_000);
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
    await expectIngestedOnce(env, ids);
    expect([await kv.llen(keys.queue), await kv.llen(keys.inFlight), await kv.llen(keys.deadLetter)]).toEqual([0, 0, 0]);
  });
});

// Shared by the ingestion cases --------------------------------------------------------------------

interface RestartStores {
  db: Database;
  redis: PrivateRedis;
  kv: KeyValueStore;
  close(): Promise<void>;
}

/** A throwaway database on the shared Postgres and a private Redis that the test may crash. */
async function openRestartStores(postgresUrl: string): Promise<RestartStores> {
  const testDb: TestDatabase = await createTestDatabase(postgresUrl);
  const db = await createDatabase({ driver: "postgres", url: testDb.url });
  await migrate(db);
  const redis = await startPrivateRedis();
  const kv = createRedisKeyValueStore({ url: redis.url, connectTimeoutMs: 500, commandTimeoutMs: 2_000 });
  return {
    db,
    redis,
    kv,
    async close() {
      await kv.close();
      await redis.stop();
      await db.close();
      await testDb.drop();
    },
  };
}

async function enqueueBooks(db: Database, kv: KeyValueStore, keys: QueueKeys, books: BookServer, count: number, title: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const book = await insertBook(db, { title: `${title} ${i}` });
    ids.push(book.id);
    await enqueueJob(kv, { book_id: book.id, file_url: books.url(ENGLISH_BOOK), user_id: USER_ID }, { queue: keys.queue });
  }
  return ids;
}

function fastWorker(env: IngestEnv, keys: QueueKeys): WorkerHandle {
  return startWorker(env.deps, { keys, visibilityTimeoutSeconds: 2, claimGraceMs: 200, reapIntervalMs: 200, minPollMs: 10, maxPollMs: 100, pipeline: TEST_PIPELINE_OPTIONS });
}

async function statuses(db: Database, ids: readonly string[]): Promise<string[]> {
  return Promise.all(ids.map(async (id) => (await getBook(db, id))?.processingStatus ?? "missing"));
}

async function expectIngestedOnce(env: IngestEnv, ids: readonly string[]) {
  const text = await readFile(join(FIXTURES, ENGLISH_BOOK), "utf8");
  const chunks = chunkTextToArray(text, { chunkTokens: TEST_PIPELINE_OPTIONS.index!.chunkTokens! }).length;
  const reference = (await listCharacters(env.deps.db, ids[0]!)).map((c) => c.name).sort();
  expect(reference.length).toBeGreaterThan(2);
  for (const id of ids) {
    expect((await listCharacters(env.deps.db, id)).map((c) => c.name).sort()).toEqual(reference);
    expect([await env.deps.vectorIndex.count(id), await env.deps.textIndex.count(id)]).toEqual([chunks, chunks]);
  }
}
