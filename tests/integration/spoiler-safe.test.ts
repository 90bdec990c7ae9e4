import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Database } from "../../common/db/index.ts";
import { createSession, insertBook } from "../../common/db/frontend-rows.ts";
import { getBookReadingPositions, getCharacterKnowledge, getCharacterLines } from "../../common/db/reading-positions.ts";
import type { Character } from "../../common/contract/rows.ts";
import { listCharacters } from "../../common/db/characters.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { createLogger } from "../../common/log.ts";
import { createMetrics } from "../../common/metrics/index.ts";
import { OWN_LINES_HEADING, READING_POSITION_HEADING } from "../../common/llm/prompt-format.ts";
import { createTextLocator } from "../../ingest/characters/checkpoints.ts";
import { DEFAULT_CHARACTER_CHECKPOINTS } from "../../common/config-defaults.ts";
import { GuardCharacter } from "../../common/spoiler-guard/people.ts";
import { SPOILER_CLOSING } from "../../api/chat/spoiler-filter.ts";
import { getSpoilerGuard } from "../../common/db/spoiler-guards.ts";
import { MAX_STORED_CHARS } from "../../common/spoiler-guard/shingles.ts";
import { createHttpReranker } from "../../common/rerank/http.ts";
import { runPipeline, type PipelineResult } from "../../ingest/pipeline.ts";
import { buildTestApp } from "../support/app.ts";
import { openEmbeddedDatabase, openEmbeddedStores } from "../support/embedded-stores.ts";
import { openIngestSuite } from "../support/ingest-suite.ts";
import { createTestLanguageModel, readSse, requestsOfKind, scriptGateway } from "../support/chat.ts";
import { startFakeLlmGateway } from "../support/fake-llm-gateway.ts";
import { startFakeReranker } from "../support/fake-reranker.ts";
import { openLiveStores, type LiveStores } from "../support/live-stores.ts";
import { probePostgres } from "../support/postgres.ts";
import { probeRedis } from "../support/redis.ts";
import {
  FIXTURES,
  TEST_PIPELINE_OPTIONS,
  type IngestEnv,
  type ScriptedGateway,
} from "../fixtures/ingest/harness.ts";

/**
 * Spoiler-safe chat end to end: an original story with a late reveal (the rescued stranger, named
 * Silas Crane past the middle, is the heroine's drowned brother Jonah, who set the fire himself) is
 * ingested with the default checkpoints (placed per character where their lines accumulate) through a gateway that echoes every quote and passage it is given
 * into the profile and persona, so anything a pass saw ends up where chat can send it. Then a reader
 * at 40 % chats, and everything that leaves for the gateway and the reranker is searched for the
 * story's later sentences.
 */

setDefaultTimeout(120_000);

const STORY = "the-lamp-on-gull-rock.txt";
const storyText = await readFile(join(FIXTURES, STORY), "utf8");
const REVEAL = "I am Jonah, your brother, and I did not drown in the gale.";

/** Letters and digits only, so neither JSON escaping nor whitespace can hide a sentence. */
const plain = (s: string) => s.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, " ").trim();

/** The story's sentences (six words or more) that first occur after `position`: what a reader there has not read. */
function sentencesAfter(position: number): string[] {
  const cutoff = position * storyText.length;
  return [...storyText.matchAll(/[^.!?\n]+[.!?]*/g)]
    .filter((m) => m.index >= cutoff && storyText.indexOf(m[0]) >= cutoff)
    .map((m) => plain(m[0]))
    .filter((s) => s.split(" ").length >= 6);
}

/** Every string in a JSON value, joined. */
function strings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value && typeof value === "object") return Object.values(value).flatMap(strings);
  return [];
}

function leaksAfter(position: number, material: unknown): string[] {
  const haystack = plain(strings(material).join("\n"));
  return sentencesAfter(position).filter((s) => haystack.includes(s));
}

/** Extraction and persona answers made of exactly what the pass was given. */
function echoMaterial(gateway: ScriptedGateway) {
  gateway.override.extract = (input) => ({
    content: JSON.stringify({
      psychology: `Known from: ${[...input.character.quotes, ...input.passages].join(" | ")}`,
      voice: input.character.quotes.join(" | ") || "plain",
      motivations: ["keep the light"],
      relationships: input.cooccurring.map((c) => ({ name: c.name, type: "met" })),
      signatureThemes: input.character.aliases,
    }),
  });
  gateway.override.persona = (input) => ({ content: `I am ${input.name}. ${input.profile.psychology} ${input.quotes.join(" ")}` });
}

interface Ingested {
  bookId: string;
  result: PipelineResult;
  characters: Character[];
  byName(name: string): Character;
}

async function ingestStory(env: IngestEnv, db: Database, characterCheckpoints: number): Promise<Ingested> {
  const book = await insertBook(db, { title: "The Lamp on Gull Rock", author: "A. Tester" });
  const result = await runPipeline(env.deps, { bookId: book.id, source: { url: books.url(STORY) } }, { ...TEST_PIPELINE_OPTIONS, characterCheckpoints });
  const characters = await listCharacters(db, book.id);
  const byName = (name: string) => {
    const found = characters.find((c) => c.name.includes(name));
    if (!found) throw new Error(`no character ${name} among ${characters.map((c) => c.name).join(", ")}`);
    return found;
  };
  return { bookId: book.id, result, characters, byName };
}

/** The chat API over the stores the story was ingested into, with its own recording gateway and reranker. */
async function chatOver(env: IngestEnv, db: Database, kv: KeyValueStore) {
  const gateway = startFakeLlmGateway();
  const reranker = startFakeReranker();
  const metrics = createMetrics({ defaultMetrics: false });
  const logLines: string[] = [];
  const app = await buildTestApp({
    db,
    kv,
    metrics,
    logger: createLogger({ write: (line) => logLines.push(line) }),
    llm: createTestLanguageModel(gateway, metrics),
    vectorIndex: env.deps.vectorIndex,
    textIndex: env.deps.textIndex,
    reranker: createHttpReranker({ url: reranker.url, maxRetries: 0 }),
  });
  defer(async () => {
    await app.settle();
    gateway.stop();
    reranker.stop();
  });
  return { gateway, reranker, app, logLines, metrics };
}

async function turn(
  chat: Awaited<ReturnType<typeof chatOver>>,
  db: Database,
  story: Ingested,
  character: Character,
  message: string,
  extra: Record<string, unknown> = {},
) {
  chat.gateway.reset();
  chat.reranker.reset();
  scriptGateway(chat.gateway);
  const userId = crypto.randomUUID();
  const session = await createSession(db, { userId, characterId: character.id });
  const res = await chat.app.postJson("/character/chat", {
    user_id: userId,
    character_id: character.id,
    book_id: story.bookId,
    session_id: session.id,
    user_message: message,
    ...extra,
  });
  const { events } = await readSse(res);
  await chat.app.settle();
  const done = events.at(-1);
  return {
    done,
    system: requestsOfKind(chat.gateway, "chat")[0]?.messages[0]?.content ?? "",
    upstream: [
      chat.gateway.chatRequests().map((r) => r.body),
      chat.gateway.embeddingRequests().map((r) => r.body),
      chat.reranker.rerankRequests().map((r) => r.body),
    ],
  };
}

const { books, setup, defer } = await openIngestSuite({ sharedDatabase: false });

test("the story's reveal comes after 40 %, and the stranger is named only after it", () => {
  expect(storyText.indexOf(REVEAL) / storyText.length).toBeGreaterThan(0.75);
  expect(storyText.indexOf("Silas Crane") / storyText.length).toBeGreaterThan(0.5);
  expect(sentencesAfter(0.4).length).toBeGreaterThan(60);
  expect(sentencesAfter(0.4)).toContain(plain(REVEAL));
});

/** The whole path on one pair of stores; run on the embedded ones and on Postgres + Redis. */
function spoilerSafeSuite(open: () => Promise<{ db: Database; kv: KeyValueStore; close(): Promise<void> }>) {
  let db: Database;
  let kv: KeyValueStore;
  let env: IngestEnv;
  let story: Ingested;

  beforeAll(async () => {
    ({ db, kv } = await open().then((stores) => (defer(() => stores.close()), stores)));
    ({ env } = await setup({ db, kv, configure: echoMaterial }));
    story = await ingestStory(env, db, DEFAULT_CHARACTER_CHECKPOINTS);
  });

  test("the spoiler guard's row knows every selected character and the people the NLP step found beyond them", async () => {
    const row = await getSpoilerGuard(db, story.bookId, MAX_STORED_CHARS);
    const people = GuardCharacter.array().parse(row?.characters);
    for (const character of story.characters) expect(people.map((p) => p.character_id)).toContain(character.id);
    // Tom Bristow is named twice, too few to be selected: a model that knows the book can still name him.
    expect(people.filter((p) => p.character_id === "").flatMap((p) => p.terms.map((t) => t.text))).toContain("Tom Bristow");
  });

  test("ingestion writes each character as of each of their checkpoints from only what comes before it, within the budget", async () => {
    expect(story.result.checkpoints.failed).toBe(0);
    expect(story.result.checkpoints.written).toBeGreaterThanOrEqual(3);
    expect(story.result.checkpoints.written).toBeLessThanOrEqual((DEFAULT_CHARACTER_CHECKPOINTS - 1) * story.characters.length);
    const positions = await getBookReadingPositions(db, story.bookId);
    expect(positions?.chunkEnds.length).toBe(story.result.index.chunks);
    expect(positions?.chunkEnds.at(-1)).toBeCloseTo(1, 3);

    let checked = 0;
    const placed = new Set<number>();
    for (const character of story.characters) {
      const knowledge = await getCharacterKnowledge(db, character.id);
      for (const checkpoint of knowledge.checkpoints) placed.add(checkpoint.position);
      for (const checkpoint of knowledge.checkpoints) {
        expect({ character: character.name, at: checkpoint.position, leaks: leaksAfter(checkpoint.position, checkpoint) }).toEqual({
          character: character.name,
          at: checkpoint.position,
          leaks: [],
        });
        checked++;
      }
    }
    expect(checked).toBe(story.result.checkpoints.written);
    expect(positions?.checkpoints).toEqual([...placed].sort((a, b) => a - b));
    // The echo does carry the book: the whole-book persona holds material from after 40 %.
    expect(leaksAfter(0.4, story.byName("Mara").systemPrompt).length).toBeGreaterThan(0);
  });

  test("Mara, met at once, has her first checkpoint within the first tenth, where her lines begin; Silas Crane, met past the middle, none before", async () => {
    const mara = await getCharacterKnowledge(db, story.byName("Mara").id);
    expect(mara.firstAppearance).toBeLessThan(0.01);
    expect(mara.checkpoints[0]?.position).toBeLessThan(0.1);
    const silas = await getCharacterKnowledge(db, story.byName("Silas").id);
    expect(silas.firstAppearance).toBeGreaterThan(0.5);
    expect(silas.checkpoints.every((c) => c.position > silas.firstAppearance!)).toBe(true);
  });

  test("a character met at 10 % speaks from their early material at 15 %, with no later sentence sent", async () => {
    const mara = await getCharacterKnowledge(db, story.byName("Mara").id);
    expect(mara.firstAppearance).toBeLessThan(0.1);
    const early = mara.checkpoints.filter((c) => c.position <= 0.15).at(-1);
    expect(early).toBeDefined();
    // The echo puts the lines the pass saw into the persona: Mara speaks with her own words from before 15 %.
    const lines = strings(early!.profileJson.voice).join(" ").split(" | ").filter((line) => line.split(" ").length >= 3);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(storyText.replace(/\s+/g, " ").indexOf(line.replace(/…$/u, "")) / storyText.length).toBeLessThan(0.15);

    const chat = await chatOver(env, db, kv);
    const { done, system, upstream } = await turn(chat, db, story, story.byName("Mara"), "Who are you, and what do you keep on the rock?", { reading_position: 0.15 });
    expect(done).toMatchObject({ done: true });
    expect(system).toStartWith(early!.systemPrompt);
    expect(system).not.toStartWith("You are Mara");
    expect(leaksAfter(0.15, upstream)).toEqual([]);
    expect(chat.logLines.find((line) => line.includes(" chat turn "))).toContain(` reading_position=0.15 knowledge=at${early!.position} outcome=ok `);
  });

  test.each([0.3, 0.6, 0.9])("at %p Mara's persona carries her lines from just before the position and none after it", async (position) => {
    const lines = await getCharacterLines(db, story.byName("Mara").id);
    // Each line stored where the story has it (found as ingestion finds it: across whitespace and dialogue tags).
    const locate = createTextLocator(storyText);
    expect(lines.length).toBeGreaterThan(5);
    for (const line of lines) expect(Math.abs((locate(line.text)?.end ?? -1) / storyText.length - line.position)).toBeLessThan(0.01);
    const chat = await chatOver(env, db, kv);
    const { system, upstream } = await turn(chat, db, story, story.byName("Mara"), "What do you remember of the gale?", { reading_position: position });
    const section = system.slice(system.indexOf(OWN_LINES_HEADING), system.indexOf(READING_POSITION_HEADING));
    const at = new Map(lines.map((l) => [l.text, l.position]));
    const quoted = [...section.matchAll(/^"(.+)"$/gm)].map((m) => at.get(m[1]!) ?? -1);
    expect(quoted.length).toBeGreaterThan(0);
    expect(quoted.filter((p) => p < 0 || p > position)).toEqual([]);
    expect(Math.max(...quoted)).toBeGreaterThan(position - 0.15);
    expect(leaksAfter(position, upstream)).toEqual([]);
  });

  test("a reader at 40 % gets nothing from after it: not in the rewrite, the embeddings, the rerank or the reply's prompt", async () => {
    const maraAt40 = (await getCharacterKnowledge(db, story.byName("Mara").id)).checkpoints.filter((c) => c.position <= 0.4).at(-1)!;
    const chat = await chatOver(env, db, kv);
    const questions = ["Who set the fire in the boathouse, and did Jonah really drown in the gale?", "Who is the stranger you pulled from the sea?"];
    for (const name of ["Mara", "Silas"]) {
      for (const question of questions) {
        const { done, system, upstream } = await turn(chat, db, story, story.byName(name), question, { reading_position: 0.4 });
        expect(done).toMatchObject({ done: true });
        expect(system).toContain(`${READING_POSITION_HEADING}\nThe reader has read about 40% of the book so far.`);
        expect({ name, question, leaks: leaksAfter(0.4, upstream) }).toEqual({ name, question, leaks: [] });
      }
    }
    // The operator sees how far each reader was and which knowledge of the character spoke.
    const turns = chat.logLines.filter((line) => line.includes(" chat turn "));
    expect(turns).toHaveLength(4);
    expect(turns[0]).toContain(` reading_position=0.4 knowledge=at${maraAt40.position} outcome=ok `);
    expect(turns[3]).toContain(" reading_position=0.4 knowledge=name outcome=ok ");
  });

  /** A turn at 40 % with Mara whose model streams `reply` word by word, whatever it was asked. */
  async function scriptedReply(chat: Awaited<ReturnType<typeof chatOver>>, reply: string, position = 0.4) {
    chat.gateway.reset();
    chat.reranker.reset();
    scriptGateway(chat.gateway, { chat: { chunks: reply.match(/\S+\s*/g)! } });
    const userId = crypto.randomUUID();
    const mara = story.byName("Mara");
    const session = await createSession(db, { userId, characterId: mara.id });
    const res = await chat.app.postJson("/character/chat", {
      user_id: userId,
      character_id: mara.id,
      book_id: story.bookId,
      session_id: session.id,
      user_message: "Tell me everything about the stranger.",
      reading_position: position,
    });
    const { events } = await readSse(res);
    await chat.app.settle();
    const tokens = events.flatMap((e) => ("token" in e ? [e.token] : []));
    const done = events.at(-1);
    const [saved] = await db.query<{ content: string }>("SELECT content FROM messages WHERE session_id = $1 AND role = 'assistant'", [session.id]);
    return { received: tokens.join(""), done: done && "done" in done ? done.full_response : undefined, saved: saved?.content };
  }

  const stops = async (chat: Awaited<ReturnType<typeof chatOver>>) =>
    Object.fromEntries((await chat.metrics.chat.spoilerStops.get()).values.map((v) => [v.labels.kind, v.value]));

  test("a model that names the stranger to a reader at 40 % is stopped before the name, and the reply ends in character", async () => {
    const chat = await chatOver(env, db, kv);
    const { received, done, saved } = await scriptedReply(chat, "The man I pulled from the sea is Silas Crane, and he is more than he seems.");
    expect(received).toBe(`The man I pulled from the sea is ${SPOILER_CLOSING}`);
    expect(done).toBe(received);
    expect(saved).toBe(received);
    expect(await stops(chat)).toEqual({ name: 1 });
    const logged = chat.logLines.filter((line) => line.includes("reply stopped by the spoiler guard"));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain(" kind=name reading_position=0.4 ");
    expect(logged[0]).not.toContain("Silas");
  });

  test("a model that quotes a sentence from after 40 % is stopped on its eighth word: the sentence never reaches the reader", async () => {
    const late = "He mended the cracked shutter on the gallery, rebuilt the slipway with stones from the beach, and carried the oil up the stairs.";
    expect(storyText.indexOf(late.slice(0, -1)) / storyText.length).toBeGreaterThan(0.5);
    const chat = await chatOver(env, db, kv);
    const { received, done, saved } = await scriptedReply(chat, `I remember it well. ${late}`);
    expect(received).toBe(`I remember it well. He mended the cracked shutter on the ${SPOILER_CLOSING}`);
    expect(plain(received)).not.toContain("rebuilt the slipway");
    expect(done).toBe(received);
    expect(saved).toBe(received);
    expect(await stops(chat)).toEqual({ passage: 1 });
    // At the end of the book the same reply is the reader's to have, unchanged.
    const whole = await scriptedReply(chat, `I remember it well. ${late}`, 1);
    expect(whole.done).toBe(`I remember it well. ${late}`);
  });

  test("a model that quotes early text and names the characters met so far is never stopped", async () => {
    const early = "She trimmed the wick, polished the great lens until it threw her own face back at her, and lit the flame at the exact minute the almanac gave for sunset.";
    expect(storyText.indexOf(early) / storyText.length).toBeLessThan(0.1);
    const chat = await chatOver(env, db, kv);
    const reply = `I am Mara, and every evening I climbed the ninety-one steps. ${early} That is all I will say of it.`;
    const { received, done, saved } = await scriptedReply(chat, reply);
    expect(received).toBe(reply);
    expect(done).toBe(reply);
    expect(saved).toBe(reply);
    expect(await stops(chat)).toEqual({});
  });

  test("at 100 % the reveal is reachable", async () => {
    const chat = await chatOver(env, db, kv);
    const { done, system, upstream } = await turn(chat, db, story, story.byName("Mara"), "Did Jonah really drown in the gale, or did he set the fire in the boathouse?", {
      reading_position: 1,
    });
    expect(done).toMatchObject({ done: true });
    expect(system).not.toContain(READING_POSITION_HEADING);
    expect(leaksAfter(0.4, upstream)).toContain(plain(REVEAL));
  });
}

describe("on the embedded stores", () => {
  spoilerSafeSuite(() => openEmbeddedStores());
});

const redis = await probeRedis();
const postgres = await probePostgres();
const liveSkip = !redis.reachable ? redis.reason : !postgres.reachable ? postgres.reason : undefined;
if (liveSkip) console.warn(`spoiler-safe: live Postgres + Redis run skipped: ${liveSkip}`);

describe.skipIf(liveSkip !== undefined)("on Postgres and Redis", () => {
  spoilerSafeSuite((): Promise<LiveStores> => openLiveStores("spoiler-safe", (postgres as { url: string }).url, redis.url));
});

describe("checkpoints configured and failing", () => {
  let db: Database;
  beforeAll(async () => {
    db = await openEmbeddedDatabase();
    defer(() => db.close());
  });

  async function ingestWith(characterCheckpoints: number, configure: (gateway: ScriptedGateway) => void = echoMaterial) {
    const { gateway, env } = await setup({ db, configure });
    return { gateway, env, story: await ingestStory(env, db, characterCheckpoints) };
  }

  test("1 checkpoint is the whole book only: one pass per character, no checkpoint rows, positions still recorded", async () => {
    const { gateway, story } = await ingestWith(1);
    expect(story.result.checkpoints).toEqual({ written: 0, failed: 0 });
    expect(gateway.personas().length).toBe(story.characters.length);
    expect((await getBookReadingPositions(db, story.bookId))?.checkpoints).toEqual([]);
    for (const c of story.characters) expect((await getCharacterKnowledge(db, c.id)).checkpoints).toEqual([]);
  });

  test("a checkpoint pass that fails is left out and the book still completes; chat then uses an earlier one", async () => {
    const { env, story } = await ingestWith(4, (gateway) => {
      echoMaterial(gateway);
      const echo = gateway.override.persona!;
      // Mara's personas written once she has tried the stranger's name ("Silas Crane,") but before her last lines fail every time; her earlier ones and the whole book's do not.
      gateway.override.persona = (input) =>
        input.name.includes("Mara") && input.profile.psychology.includes("Silas Crane,") && !input.profile.psychology.includes("splice")
          ? { status: 400, message: "refused" }
          : echo(input);
    });
    const mara = await getCharacterKnowledge(db, story.byName("Mara").id);
    expect(story.result.checkpoints.failed).toBeGreaterThan(0);
    const earlier = mara.checkpoints.filter((c) => c.position <= 0.6).at(-1)!;
    expect(earlier.position).toBeLessThan(storyText.indexOf("stranger") / storyText.length);
    expect(story.byName("Mara").systemPrompt).toStartWith("I am Mara");
    const rows = await db.query<{ processing_status: string }>("SELECT processing_status FROM books WHERE id = $1", [story.bookId]);
    expect(rows[0]?.processing_status).toBe("completed");

    const chat = await chatOver(env, db, env.deps.kv);
    const { system } = await turn(chat, db, story, story.byName("Mara"), "How are the nets?", { reading_position: 0.6 });
    expect(system).toStartWith(earlier.systemPrompt);
  });
});
