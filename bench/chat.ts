/**
 * Chat latency of the API server process on its embedded stores (PGlite, in-process key-value store,
 * embedded vector and BM25 indexes, rank fusion) against the loopback LLM gateway answering with no
 * delay, in its own process. What is measured is therefore the backend's own cost:
 *
 * - time to first token (request sent → first token event received) at 1 and 32 concurrent
 *   sessions, each request in a fresh session (a rewrite, an embedding, two searches, a streamed reply);
 * - streaming 2,000 tokens through the endpoint, beside reading the same 2,000 tokens straight from
 *   the gateway with the openai SDK.
 *
 *   bun bench/chat.ts [--requests 200]
 */
import OpenAI from "openai";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "../common/db/migrate.ts";
import { createPgliteDatabase } from "../common/db/pglite.ts";
import { createSession } from "../common/db/repositories.ts";
import { createMetrics } from "../common/metrics.ts";
import { createEmbeddedTextIndex } from "../common/text/embedded.ts";
import { createEmbeddedVectorIndex } from "../common/vector/embedded.ts";
import { PASSAGES, createTestLanguageModel, lastUserContent, readSse, scriptGateway, seedChatWorld } from "../tests/support/chat.ts";
import { startFakeLlmGateway } from "../tests/support/fake-llm-gateway.ts";
import { startService } from "../tests/support/process.ts";

const STREAM_TOKENS = 2000;
const REPLY_TOKENS = 50;
const CONCURRENCY = [1, 32];
const EXTRA_CHUNKS = 500;
const WARMUP = 20;
const STREAM_RUNS = 5;
const STREAM_PREFIX = "stream:";

const requestsArg = process.argv.indexOf("--requests");
const REQUESTS = requestsArg > 0 ? Number(process.argv[requestsArg + 1]) : 200;

/** The gateway child: replies of REPLY_TOKENS tokens, or STREAM_TOKENS when the message asks for a stream. */
function serveGateway() {
  const gateway = startFakeLlmGateway();
  const tokens = (n: number) => Array.from({ length: n }, (_, i) => `tok${i} `);
  scriptGateway(gateway, {
    chat: (request) => ({ chunks: tokens(lastUserContent(request).startsWith(STREAM_PREFIX) ? STREAM_TOKENS : REPLY_TOKENS) }),
  });
  // Nothing is recorded for long: a bench sends thousands of requests.
  setInterval(() => gateway.clearRequests(), 1000);
  console.log(gateway.baseURL);
  // The parent holds our stdin open: when it exits, however it exits, so do we.
  void (async () => {
    for await (const _ of Bun.stdin.stream());
    process.exit(0);
  })();
}

const percentile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const ms = (x: number) => x.toFixed(1);

async function main() {
  const child = Bun.spawn([process.execPath, import.meta.path, "--gateway"], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const reader = child.stdout.getReader();
  const baseURL = new TextDecoder().decode((await reader.read()).value).trim();
  reader.releaseLock();

  const dataDir = await mkdtemp(join(tmpdir(), "bench-chat-"));
  const sessionsNeeded = WARMUP + CONCURRENCY.reduce((n, c) => n + Math.ceil(REQUESTS / c) * c, 0) + 2 * STREAM_RUNS;
  const db = await createPgliteDatabase({ dataDir: join(dataDir, "pg") });
  await migrate(db);
  const vector = createEmbeddedVectorIndex({ dir: join(dataDir, "vectors") });
  const text = createEmbeddedTextIndex({ dir: join(dataDir, "text") });
  const llm = createTestLanguageModel({ baseURL }, createMetrics({ defaultMetrics: false }));
  const world = await seedChatWorld(db, { vector, text, llm });
  // A few hundred more chunks, so that searches have something to rank.
  const extra = Array.from({ length: EXTRA_CHUNKS }, (_, i) => ({ chunkIndex: PASSAGES.length + i, text: `${PASSAGES[i % PASSAGES.length]} Part ${i}.` }));
  const vectors = await llm.embed(extra.map((c) => c.text));
  await vector.upsert(world.bookId, extra.map((c, i) => ({ ...c, vector: vectors[i]! })));
  await text.upsert(world.bookId, extra);
  const sessions: string[] = [];
  for (let i = 0; i < sessionsNeeded; i++) sessions.push((await createSession(db, { userId: world.userId, characterId: world.characterId })).id);
  await Promise.all([vector.close?.(), text.close?.()]);
  await db.close();

  const api = await startService("api/server.ts", { DATA_DIR: dataDir, LLM_GATEWAY_URL: baseURL, LOG_LEVEL: "error" });
  const body = (sessionId: string, message: string) =>
    JSON.stringify({ user_id: world.userId, character_id: world.characterId, book_id: world.bookId, session_id: sessionId, user_message: message });

  /** Milliseconds to the first token event and to the end of the stream. */
  async function timedChat(message: string): Promise<{ firstToken: number; total: number }> {
    const start = performance.now();
    const res = await fetch(`${api.url}/character/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: body(sessions.pop()!, message) });
    const stream = res.body!.getReader();
    let firstToken = NaN;
    let received = "";
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await stream.read();
      if (done) break;
      received += decoder.decode(value, { stream: true });
      if (Number.isNaN(firstToken) && received.includes('data: {"token"')) firstToken = performance.now() - start;
    }
    const total = performance.now() - start;
    const last = received.trimEnd().split("\n\n").at(-1) ?? "";
    if (!last.startsWith('data: {"done":true')) throw new Error(`chat did not finish: ${last.slice(0, 200)}`);
    return { firstToken, total };
  }

  try {
    for (let i = 0; i < WARMUP; i++) await timedChat(`Tell me about the storm. (${i})`);

    console.log(`\nTime to first token, ${REQUESTS} requests per row, ${REPLY_TOKENS}-token replies (ms)\n`);
    console.log("| concurrent sessions | p50 | p99 | mean | replies/s |");
    console.log("|---|---|---|---|---|");
    for (const c of CONCURRENCY) {
      const samples: number[] = [];
      const start = performance.now();
      for (let round = 0; round < Math.ceil(REQUESTS / c); round++) {
        // Distinct messages, so that every request asks for its query rewrite rather than reading it from the cache.
        const results = await Promise.all(Array.from({ length: c }, (_, i) => timedChat(`What happened to the Albatross in the storm? (${c}.${round}.${i})`)));
        samples.push(...results.map((r) => r.firstToken));
      }
      const seconds = (performance.now() - start) / 1000;
      samples.sort((a, b) => a - b);
      const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
      console.log(`| ${c} | ${ms(percentile(samples, 50))} | ${ms(percentile(samples, 99))} | ${ms(mean)} | ${(samples.length / seconds).toFixed(0)} |`);
    }

    const sdk = new OpenAI({ baseURL, apiKey: "bench", maxRetries: 0 });
    const direct: number[] = [];
    const endpoint: { total: number }[] = [];
    for (let run = 0; run < STREAM_RUNS; run++) {
      const start = performance.now();
      const chunks = await sdk.chat.completions.create({
        model: "bench",
        stream: true,
        messages: [{ role: "user", content: `${STREAM_PREFIX} ${run}` }],
      });
      let tokens = 0;
      for await (const chunk of chunks) if (chunk.choices[0]?.delta?.content) tokens++;
      if (tokens !== STREAM_TOKENS) throw new Error(`the gateway streamed ${tokens} tokens`);
      direct.push(performance.now() - start);
      endpoint.push(await timedChat(`${STREAM_PREFIX} ${run}`));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(`\nStreaming ${STREAM_TOKENS} tokens, median of ${STREAM_RUNS} runs (ms)\n`);
    console.log("| path | total |");
    console.log("|---|---|");
    console.log(`| gateway read directly with the openai SDK | ${ms(median(direct))} |`);
    console.log(`| POST /character/chat (rewrite, retrieval, stream, save) | ${ms(median(endpoint.map((e) => e.total)))} |`);
    // With no delay the gateway sends the whole reply in a few TCP segments, so the first token
    // reaches the client together with the rest: the time to first token here is the whole reply.
  } finally {
    await api.stop();
    child.kill();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv.includes("--gateway")) serveGateway();
else await main();
