import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AppDeps } from "../../api/app.ts";
import type { Database } from "../../common/db/index.ts";
import { saveCharacters } from "../../common/db/characters.ts";
import { setSessionSummary } from "../../common/db/sessions.ts";
import { createSession, insertBook, upsertPreferences } from "../../common/db/frontend-rows.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import type { MemoryKeyValueStore, MemoryKeyValueStoreOptions } from "../../common/kv/memory.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import { createOpenAiLanguageModel } from "../../common/llm/gateway.ts";
import { createMetrics, type Metrics } from "../../common/metrics/index.ts";
import { countTokens } from "../../common/metrics/llm.ts";
import type { PreferencesRow } from "../../common/prompt/preferences.ts";
import { createHttpReranker } from "../../common/rerank/http.ts";
import { ChatEvent } from "../../common/contract/schemas.ts";
import { createEmbeddedTextIndex } from "../../common/text-index/embedded.ts";
import type { TextIndex } from "../../common/text-index/index.ts";
import { createEmbeddedVectorIndex } from "../../common/vector/embedded.ts";
import type { VectorIndex } from "../../common/vector/index.ts";
import { buildTestApp } from "./app.ts";
import { openEmbeddedStores } from "./embedded-stores.ts";
import { defaultChatReply, startFakeLlmGateway, type ChatBehaviour, type ChatCompletionRequest, type FakeLlmGateway } from "./fake-llm-gateway.ts";
import { startFakeReranker, type FakeReranker } from "./fake-reranker.ts";
import { recordingDatabase, recordingKeyValueStore, type RecordingDatabase, type RecordingKeyValueStore } from "./recording.ts";

/**
 * A small book with one character to chat with, indexed for retrieval, and an app wired to the
 * loopback LLM gateway and reranker: what the chat suites and the chat benchmark run against.
 */

export const BOOK_TITLE = "The Tidewater Light";
export const CHARACTER_NAME = "Elinor Vance";
export const PERSONA =
  "I am Elinor Vance, the keeper's daughter at Tidewater Point. I speak plainly, I distrust fine words, and I have " +
  "tended the lamp alone since my father's eyes failed.";
export const CHARACTER_DESCRIPTION = "The lighthouse keeper's daughter.";
export const CHARACTER_PROFILE = { voice: "plain, dry, coastal", relationships: { Thomas: "brother, estranged" } };
/** The reader's stored preferences for Elinor, as user_preferences holds them. */
export const STORED_PREFERENCES = {
  relationshipMode: "friend",
  speechModifiers: ["use_simple_words"],
  behavioralModifiers: ["be_protective"],
  preferenceSummary: "Treat the reader as an apprentice keeper.",
} satisfies PreferencesRow;

/** Original passages, one chunk each; chunk_index is the position. */
export const PASSAGES = [
  "The lamp at Tidewater Point had burned every night for forty years, and Elinor trimmed its wick at dusk as her father had taught her.",
  "Her brother Thomas left for the city in the spring, promising to write every month; his letters stopped after the second winter.",
  "The storm of November drove the schooner Albatross onto the shoals below the lighthouse, and Elinor rowed out alone to reach her crew.",
  "Captain Reyes of the Albatross owed his life to the keeper's daughter, and he never let the harbour forget it.",
  "Old Mr. Pell, the harbour master, thought a girl had no business keeping a light, and said so at every market day.",
  "In the oilskin packet Elinor found the last letter from Thomas, water-stained, asking her to forgive him for leaving.",
  "The fog bell rang through the long grey mornings, and Elinor counted its strokes while she mended the nets.",
  "When the inspector came from the lighthouse board, he found the log kept in Elinor's hand, every entry exact.",
];

export interface ChatWorld {
  bookId: string;
  characterId: string;
  /** A second character of the same book. */
  otherCharacterId: string;
  userId: string;
}

/** Writes the book, its characters and the reader's preferences, and indexes the passages (embedded by `llm`). */
export async function seedChatWorld(db: Database, indexes: { vector: VectorIndex; text: TextIndex; llm: LanguageModel }): Promise<ChatWorld> {
  const book = await insertBook(db, { title: BOOK_TITLE, author: "A. N. Author", processingStatus: "completed" });
  const [elinor, thomas] = (
    await saveCharacters(db, book.id, [
    {
      name: CHARACTER_NAME,
      description: CHARACTER_DESCRIPTION,
      profileJson: CHARACTER_PROFILE,
      systemPrompt: PERSONA,
      importance: 10,
    },
    { name: "Thomas Vance", description: "Elinor's brother, gone to the city.", systemPrompt: "I am Thomas Vance.", importance: 5 },
    ])
  ).characters;
  const userId = crypto.randomUUID();
  await upsertPreferences(db, { userId, characterId: elinor!.id, ...STORED_PREFERENCES });
  const vectors = await indexes.llm.embed(PASSAGES);
  await indexes.vector.upsert(book.id, PASSAGES.map((text, chunkIndex) => ({ chunkIndex, text, vector: vectors[chunkIndex]! })));
  await indexes.text.upsert(book.id, PASSAGES.map((text, chunkIndex) => ({ chunkIndex, text })));
  return { bookId: book.id, characterId: elinor!.id, otherCharacterId: thomas!.id, userId };
}

export function createTestLanguageModel(gateway: Pick<FakeLlmGateway, "baseURL">, metrics: Metrics): LanguageModel {
  return createOpenAiLanguageModel({
    baseURL: gateway.baseURL,
    chatModel: "test-chat-model",
    embedModel: "test-embed-model",
    // One request per call keeps the gateway's request log a plain record of what the chat asked.
    maxRetries: 0,
    onUsage: (purpose, usage) => countTokens(metrics, purpose, usage.promptTokens, usage.completionTokens),
  });
}

export type CallKind = "rewrite" | "chat" | "summary";
type Scripted = ChatBehaviour | ((request: ChatCompletionRequest) => ChatBehaviour | Promise<ChatBehaviour>);

/** Which of the chat's three model calls a gateway request is: JSON mode is the rewrite, a stream the reply. */
function callKind(request: Pick<ChatCompletionRequest, "stream" | "response_format">): CallKind {
  if (request.response_format?.type === "json_object") return "rewrite";
  return request.stream ? "chat" : "summary";
}

/** The user message of a request: the rewrite's and the summary's carry the material, the chat's the reader's words. */
export const lastUserContent = (request: ChatCompletionRequest) => request.messages.findLast((m) => m.role === "user")?.content ?? "";

/**
 * Scripts the gateway per call kind. Unscripted, the rewrite answers valid queries (the reader's
 * message as both), the reply echoes the message, and the summary is "Summary: " and its material.
 */
export function scriptGateway(gateway: FakeLlmGateway, script: Partial<Record<CallKind, Scripted>> = {}) {
  const defaults: Record<CallKind, Scripted> = {
    rewrite: (request) => {
      const message = lastUserContent(request).split("\n").at(-1) ?? "";
      return { content: JSON.stringify({ narrative_query: message, keyword_query: message }) };
    },
    chat: defaultChatReply,
    summary: (request) => ({ content: `Summary: ${lastUserContent(request)}` }),
  };
  gateway.onChat((request) => {
    const behaviour = script[callKind(request)] ?? defaults[callKind(request)];
    return typeof behaviour === "function" ? behaviour(request) : behaviour;
  });
}

/** Gateway requests of one kind, in arrival order. */
export function requestsOfKind(gateway: FakeLlmGateway, kind: CallKind): ChatCompletionRequest[] {
  return gateway
    .chatRequests()
    .map((r) => r.body as ChatCompletionRequest)
    .filter((body) => callKind(body) === kind);
}

/** The events of an SSE body; throws unless the body is exactly `data: <JSON>\n\n` events and `: comment\n\n` blocks. */
export function parseSseEvents(text: string): ChatEvent[] {
  if (!text.endsWith("\n\n") && text !== "") throw new Error(`stream does not end with a blank line: ${JSON.stringify(text.slice(-40))}`);
  return text
    .split("\n\n")
    .slice(0, -1)
    .filter((block) => !/^:[^\r\n]*$/.test(block))
    .map((block) => {
      const match = /^data: ([^\r\n]*)$/.exec(block);
      if (!match) throw new Error(`not a single data line: ${JSON.stringify(block)}`);
      return ChatEvent.parse(JSON.parse(match[1]!));
    });
}

export async function readSse(res: Response): Promise<{ text: string; events: ChatEvent[] }> {
  const text = await res.text();
  return { text, events: parseSseEvents(text) };
}

export interface ChatHarnessOptions {
  db: Database;
  kv: KeyValueStore;
  /** Use the loopback reranker (default) or rank fusion. */
  reranker?: boolean;
}

export interface ChatHarness {
  gateway: FakeLlmGateway;
  reranker: FakeReranker;
  db: RecordingDatabase;
  kv: RecordingKeyValueStore;
  metrics: Metrics;
  deps: AppDeps;
  world: ChatWorld;
  app: Awaited<ReturnType<typeof buildTestApp>>;
  /** A new session of the world's reader with Elinor (or of another user / character). */
  newSession(options?: { userId?: string; characterId?: string; summary?: string }): Promise<string>;
  /** The body of a chat request in `sessionId`. */
  body(sessionId: string, message: string, extra?: Record<string, unknown>): Record<string, unknown>;
  chat(sessionId: string, message: string, extra?: Record<string, unknown>): Promise<Response>;
  /** Another app over the same stores with some dependencies replaced. */
  appWith(overrides: Partial<AppDeps>): ReturnType<typeof buildTestApp>;
  /** Forgets what the gateway and the reranker were asked and scripts the gateway afresh. */
  resetUpstreams(): void;
  stop(): Promise<void>;
}

export async function startChatHarness(options: ChatHarnessOptions): Promise<ChatHarness> {
  const gateway = startFakeLlmGateway();
  const reranker = startFakeReranker();
  const metrics = createMetrics({ defaultMetrics: false });
  const llm = createTestLanguageModel(gateway, metrics);
  const indexDir = await mkdtemp(join(tmpdir(), "chat-indexes-"));
  const vectorIndex = createEmbeddedVectorIndex({ dir: join(indexDir, "vectors") });
  const textIndex = createEmbeddedTextIndex({ dir: join(indexDir, "text") });
  const db = recordingDatabase(options.db);
  const kv = recordingKeyValueStore(options.kv);
  const world = await seedChatWorld(db, { vector: vectorIndex, text: textIndex, llm });
  gateway.reset();

  const app = await buildTestApp({
    db,
    kv,
    metrics,
    llm,
    vectorIndex,
    textIndex,
    reranker: options.reranker === false ? undefined : createHttpReranker({ url: reranker.url, maxRetries: 0 }),
  });
  const body = (sessionId: string, message: string, extra: Record<string, unknown> = {}) => ({
    user_id: world.userId,
    character_id: world.characterId,
    book_id: world.bookId,
    session_id: sessionId,
    user_message: message,
    ...extra,
  });

  return {
    gateway,
    reranker,
    db,
    kv,
    metrics,
    deps: app.deps,
    world,
    app,
    async newSession(opts = {}) {
      const session = await createSession(options.db, { userId: opts.userId ?? world.userId, characterId: opts.characterId ?? world.characterId });
      if (opts.summary !== undefined) await setSessionSummary(options.db, session.id, opts.summary);
      return session.id;
    },
    body,
    chat: (sessionId, message, extra) => app.postJson("/character/chat", body(sessionId, message, extra)),
    appWith: (overrides) => buildTestApp({ ...app.deps, ...overrides }),
    resetUpstreams() {
      gateway.reset();
      reranker.reset();
      scriptGateway(gateway);
    },
    async stop() {
      await app.settle();
      gateway.stop();
      reranker.stop();
      await Promise.all([vectorIndex.close?.(), textIndex.close?.()]);
      await rm(indexDir, { recursive: true, force: true });
    },
  };
}

export interface EmbeddedChatOptions {
  /** For the in-process key-value store (a test clock, say). */
  kv?: MemoryKeyValueStoreOptions;
  /** Wraps the key-value store the app sees (a store that fails on demand, say). */
  wrapKv?: (kv: KeyValueStore) => KeyValueStore;
  reranker?: boolean;
}

export interface EmbeddedChat {
  h: ChatHarness;
  /** The stores under the harness's recording ones. */
  db: Database;
  kv: MemoryKeyValueStore;
  /** Stops the harness, then closes the stores. */
  stop(): Promise<void>;
}

/** The chat harness on a fresh PGlite and in-process key-value store. */
export async function startEmbeddedChat(options: EmbeddedChatOptions = {}): Promise<EmbeddedChat> {
  const stores = await openEmbeddedStores(options.kv);
  const kv = options.wrapKv ? options.wrapKv(stores.kv) : stores.kv;
  const h = await startChatHarness({ db: stores.db, kv, reranker: options.reranker });
  return {
    h,
    db: stores.db,
    kv: stores.kv,
    async stop() {
      await h.stop();
      await stores.close();
    },
  };
}
