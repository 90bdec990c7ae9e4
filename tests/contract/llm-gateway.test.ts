import { afterAll, afterEach, describe, expect, test } from "bun:test";
import type { LanguageModel, LlmPurpose, TokenUsage } from "../../common/llm/index.ts";
import { createLanguageModel } from "../../common/llm/create.ts";
import { createOpenAiLanguageModel, type OpenAiLanguageModelOptions } from "../../common/llm/gateway.ts";
import { UpstreamError } from "../../common/upstream.ts";
import { fakeEmbedding, startFakeLlmGateway, startLoopbackServer } from "../support/fake-llm-gateway.ts";
import { collectDeltas, upstreamFailure } from "../support/outcomes.ts";

const gateway = startFakeLlmGateway({ embeddingDimension: 8, apiKey: "sk-test" });
afterEach(() => gateway.reset());
afterAll(() => gateway.stop());

const user = (content: string) => [{ role: "user" as const, content }];

function model(overrides: Partial<OpenAiLanguageModelOptions> = {}): LanguageModel {
  return createOpenAiLanguageModel({
    baseURL: gateway.baseURL,
    apiKey: "sk-test",
    chatModel: "chat-model",
    embedModel: "embed-model",
    ...overrides,
  });
}

function usageLog() {
  const calls: [LlmPurpose, TokenUsage][] = [];
  return { calls, onUsage: (purpose: LlmPurpose, usage: TokenUsage) => void calls.push([purpose, usage]) };
}

describe("streamed replies", () => {
  test("deltas arrive in order and join into the whole reply", async () => {
    gateway.onChat(() => ({ chunks: ["Why, ", "I ", "hardly ", "know, ", "sir."] }));
    const { deltas, error } = await collectDeltas(model().stream(user("Who are you?"), { purpose: "chat" }));
    expect(error).toBeUndefined();
    expect(deltas).toEqual(["Why, ", "I ", "hardly ", "know, ", "sir."]);
    const body = gateway.chatRequests()[0]!.body as Record<string, unknown>;
    expect(body).toMatchObject({ model: "chat-model", stream: true, stream_options: { include_usage: true }, messages: user("Who are you?") });
  });

  test("token usage is reported once, at the end, under the call's purpose", async () => {
    gateway.onChat(() => ({ chunks: ["a", "b"], usage: { prompt_tokens: 41, completion_tokens: 2 } }));
    const usage = usageLog();
    const { error } = await collectDeltas(model({ onUsage: usage.onUsage }).stream(user("hi"), { purpose: "chat" }));
    expect(error).toBeUndefined();
    expect(usage.calls).toEqual([["chat", { promptTokens: 41, completionTokens: 2 }]]);
  });

  test("aborting the caller's signal mid-stream aborts the upstream request", async () => {
    gateway.onChat(() => ({ chunks: Array.from({ length: 50 }, (_, i) => `t${i} `), tokenDelayMs: 20 }));
    const controller = new AbortController();
    const deltas: string[] = [];
    const error = await (async () => {
      for await (const delta of model().stream(user("go on"), { purpose: "chat", signal: controller.signal })) {
        deltas.push(delta);
        if (deltas.length === 2) controller.abort();
      }
    })().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).kind).toBe("aborted");
    expect(deltas).toEqual(["t0 ", "t1 "]);
    await gateway.waitForAbort();
    expect(gateway.chatRequests()[0]!.aborted).toBe(true);
  });

  test("a consumer that stops reading early cancels the upstream request", async () => {
    gateway.onChat(() => ({ chunks: Array.from({ length: 50 }, (_, i) => `t${i} `), tokenDelayMs: 20 }));
    for await (const delta of model().stream(user("go on"), { purpose: "chat" })) {
      expect(delta).toBe("t0 ");
      break;
    }
    await gateway.waitForAbort();
    expect(gateway.chatRequests()[0]!.aborted).toBe(true);
  });

  test("a completed stream is not reported to the gateway as aborted", async () => {
    const { error } = await collectDeltas(model().stream(user("hello"), { purpose: "chat" }));
    expect(error).toBeUndefined();
    expect(gateway.chatRequests()[0]!.aborted).toBe(false);
  });

  test("a connection dropped mid-stream surfaces as an error after the deltas already delivered", async () => {
    gateway.onChat(() => ({ chunks: ["one ", "two ", "three ", "four"], dropAfterChunks: 2 }));
    const { deltas, error } = await collectDeltas(model().stream(user("count"), { purpose: "chat" }));
    expect(deltas).toEqual(["one ", "two "]);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).kind).toBe("connection");
    expect(gateway.chatRequests()).toHaveLength(1);
  });

  test("an error event mid-stream surfaces as an error after the deltas already delivered", async () => {
    gateway.onChat(() => ({ chunks: ["one ", "two ", "three"], errorEventAfterChunks: 1 }));
    const usage = usageLog();
    const { deltas, error } = await collectDeltas(model({ onUsage: usage.onUsage }).stream(user("count"), { purpose: "chat" }));
    expect(deltas).toEqual(["one "]);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).message).toContain("failed mid-stream");
    expect(usage.calls).toEqual([]);
  });

  test("a stream that ends without a finish reason is reported as cut short", async () => {
    const chunk = { id: "x", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { content: "half" }, finish_reason: null }] };
    gateway.onChat(() => ({ raw: `data: ${JSON.stringify(chunk)}\n\n`, contentType: "text/event-stream" }));
    const { deltas, error } = await collectDeltas(model().stream(user("x"), { purpose: "chat" }));
    expect(deltas).toEqual(["half"]);
    expect((error as UpstreamError).kind).toBe("connection");
  });

  test("a stream whose opening fails is not retried (a reader is waiting): one request, one error", async () => {
    gateway.onChat(() => ({ status: 500 }));
    const { deltas, error } = await collectDeltas(model({ maxRetries: 2 }).stream(user("x"), { purpose: "chat" }));
    expect(deltas).toEqual([]);
    expect([(error as UpstreamError).kind, (error as UpstreamError).status]).toEqual(["http", 500]);
    expect(gateway.chatRequests()).toHaveLength(1);
  });

  test("a stream whose gateway never answers fails once, after the timeout, without a second attempt", async () => {
    gateway.onChat(() => ({ hang: true }));
    const { error } = await collectDeltas(model({ timeoutMs: 200, maxRetries: 2 }).stream(user("x"), { purpose: "chat" }));
    expect((error as UpstreamError).kind).toBe("timeout");
    expect(gateway.chatRequests()).toHaveLength(1);
  });

  test("a stream that goes quiet for longer than the timeout fails as a timeout", async () => {
    gateway.onChat(() => ({ chunks: ["never"], tokenDelayMs: 20_000 }));
    const { deltas, error } = await collectDeltas(model({ timeoutMs: 200 }).stream(user("x"), { purpose: "chat" }));
    expect(deltas).toEqual([]);
    expect((error as UpstreamError).kind).toBe("timeout");
    await gateway.waitForAbort();
  });

  test("a reader slower than the timeout does not trip it while the gateway keeps up", async () => {
    gateway.onChat(() => ({ chunks: ["slow ", "and ", "steady"] }));
    const deltas: string[] = [];
    for await (const delta of model({ timeoutMs: 100 }).stream(user("x"), { purpose: "chat" })) {
      deltas.push(delta);
      await Bun.sleep(250);
    }
    expect(deltas.join("")).toBe("slow and steady");
  });

  test("a stream cut after its first delta is not retried either", async () => {
    gateway.onChat(() => ({ chunks: ["a", "b", "c"], dropAfterChunks: 1 }));
    const { deltas, error } = await collectDeltas(model({ maxRetries: 2 }).stream(user("x"), { purpose: "chat" }));
    expect(deltas).toEqual(["a"]);
    expect((error as UpstreamError).kind).toBe("connection");
    expect(gateway.chatRequests()).toHaveLength(1);
  });
});

describe("whole completions", () => {
  test("the reply text is returned and usage is reported under the call's purpose", async () => {
    gateway.onChat(() => ({ content: "A short summary.", usage: { prompt_tokens: 12, completion_tokens: 4 } }));
    const usage = usageLog();
    const reply = await model({ onUsage: usage.onUsage }).complete(user("summarise"), { purpose: "summary" });
    expect(reply).toBe("A short summary.");
    expect(usage.calls).toEqual([["summary", { promptTokens: 12, completionTokens: 4 }]]);
    expect(gateway.chatRequests()[0]!.body).not.toHaveProperty("stream", true);
  });

  test("JSON mode asks for a json_object response and returns the JSON the model wrote", async () => {
    const profile = { name: "Elizabeth Bennet", traits: ["witty", "proud"] };
    gateway.onChat(() => ({ content: JSON.stringify(profile) }));
    const reply = await model().complete(user("profile"), { purpose: "extract", json: true, temperature: 0.2, maxTokens: 300 });
    expect(JSON.parse(reply)).toEqual(profile);
    expect(gateway.chatRequests()[0]!.body).toMatchObject({ response_format: { type: "json_object" }, temperature: 0.2, max_tokens: 300 });
  });

  test("without JSON mode no response format is sent", async () => {
    await model().complete(user("hi"), { purpose: "rewrite" });
    expect(gateway.chatRequests()[0]!.body).not.toHaveProperty("response_format");
  });

  test("the API key travels as a bearer token", async () => {
    await model().complete(user("hi"), { purpose: "chat" });
    expect(gateway.chatRequests()[0]!.headers.authorization).toBe("Bearer sk-test");
  });

  test("a wrong API key fails at once as HTTP 401 without retries", async () => {
    const error = await upstreamFailure(model({ apiKey: "wrong", maxRetries: 2 }).complete(user("hi"), { purpose: "chat" }));
    expect([error.service, error.kind, error.status, error.retryable]).toEqual(["llm", "http", 401, false]);
    expect(gateway.chatRequests()).toHaveLength(1);
  });

  test("a 500 is retried and surfaces as HTTP 500 once the retries are spent", async () => {
    gateway.onChat(() => ({ status: 500, message: "upstream exploded" }));
    const error = await upstreamFailure(model({ maxRetries: 2 }).complete(user("hi"), { purpose: "chat" }));
    expect([error.kind, error.status]).toEqual(["http", 500]);
    expect(error.message).toContain("upstream exploded");
    expect(gateway.chatRequests()).toHaveLength(3);
  });

  test("a transient 429 is retried transparently", async () => {
    gateway.onChat((_req, call) => (call === 0 ? { status: 429 } : { content: "fine now" }));
    expect(await model().complete(user("hi"), { purpose: "chat" })).toBe("fine now");
    expect(gateway.chatRequests()).toHaveLength(2);
  });

  test("a gateway that never answers fails as a timeout and the gateway sees the request abandoned", async () => {
    gateway.onChat(() => ({ hang: true }));
    const error = await upstreamFailure(model({ timeoutMs: 200, maxRetries: 0 }).complete(user("hi"), { purpose: "chat" }));
    expect(error.kind).toBe("timeout");
    await gateway.waitForAbort();
  });

  test("a stream whose response never starts fails as a timeout", async () => {
    gateway.onChat(() => ({ hang: true }));
    const { error } = await collectDeltas(model({ timeoutMs: 200, maxRetries: 0 }).stream(user("hi"), { purpose: "chat" }));
    expect((error as UpstreamError).kind).toBe("timeout");
  });

  test("aborting the caller's signal fails the call as aborted", async () => {
    const arrived = Promise.withResolvers<void>();
    gateway.onChat(() => {
      arrived.resolve();
      return { hang: true };
    });
    const controller = new AbortController();
    const pending = model().complete(user("hi"), { purpose: "chat", signal: controller.signal });
    const aborted = gateway.waitForAbort();
    // Abort only once the gateway holds the request, so the abort really cancels a request in flight.
    await arrived.promise;
    controller.abort();
    expect((await upstreamFailure(pending)).kind).toBe("aborted");
    await aborted;
  });

  test("a refused connection fails as a connection error", async () => {
    const closed = startLoopbackServer({});
    closed.stop();
    const llm = model({ baseURL: `${closed.url}/v1`, maxRetries: 0 });
    expect((await upstreamFailure(llm.complete(user("hi"), { purpose: "chat" }))).kind).toBe("connection");
  });

  test("an unparsable body fails as invalid_response", async () => {
    gateway.onChat(() => ({ raw: "<html>502 Bad Gateway</html>" }));
    expect((await upstreamFailure(model().complete(user("hi"), { purpose: "chat" }))).kind).toBe("invalid_response");
  });

  test("a completion without message content fails as invalid_response", async () => {
    gateway.onChat(() => ({ raw: { id: "x", object: "chat.completion", choices: [] } }));
    expect((await upstreamFailure(model().complete(user("hi"), { purpose: "chat" }))).kind).toBe("invalid_response");
  });
});

describe("embeddings", () => {
  const texts = ["Alice follows the white rabbit", "The queen shouts", "Tea at the mad hatter's", "A caterpillar smokes", "Cheshire grin"];

  test("vectors come back one per text in input order even when the gateway shuffles them", async () => {
    gateway.onEmbeddings(() => ({ shuffle: true }));
    const vectors = await model().embed(texts);
    expect(vectors).toEqual(texts.map((t) => fakeEmbedding(t, 8)));
  });

  test("texts are sent in batches of embedBatchSize, many texts per request", async () => {
    const vectors = await model({ embedBatchSize: 2 }).embed(texts);
    expect(gateway.embeddingRequests().map((r) => (r.body as { input: string[] }).input)).toEqual([texts.slice(0, 2), texts.slice(2, 4), texts.slice(4)]);
    expect(vectors).toEqual(texts.map((t) => fakeEmbedding(t, 8)));
  });

  test("base64 vectors decode to exactly the floats the gateway encoded", async () => {
    const vectors = [
      [0.1, -2.5, 3.25, 1e-7],
      [Math.PI, -Math.E, 0, 42],
    ].map((v) => v.map(Math.fround));
    gateway.onEmbeddings(() => ({ vectors, encoding: "base64" }));
    expect(await model().embed(["a", "b"])).toEqual(vectors);
    expect(gateway.embeddingRequests()[0]!.body).toMatchObject({ model: "embed-model", encoding_format: "base64" });
  });

  test("a gateway that ignores base64 and answers plain floats is understood too", async () => {
    gateway.onEmbeddings(() => ({ encoding: "float", shuffle: true }));
    expect(await model().embed(texts)).toEqual(texts.map((t) => fakeEmbedding(t, 8)));
  });

  test("embedding usage is reported under the embedding purpose for every batch", async () => {
    gateway.onEmbeddings(() => ({ usage: { prompt_tokens: 7, completion_tokens: 0 } }));
    const usage = usageLog();
    await model({ embedBatchSize: 3, onUsage: usage.onUsage }).embed(texts);
    expect(usage.calls).toEqual([
      ["embedding", { promptTokens: 7, completionTokens: 0 }],
      ["embedding", { promptTokens: 7, completionTokens: 0 }],
    ]);
  });

  test("no texts means no request", async () => {
    expect(await model().embed([])).toEqual([]);
    expect(gateway.embeddingRequests()).toHaveLength(0);
  });

  test("a response missing a vector fails as invalid_response", async () => {
    gateway.onEmbeddings(() => ({ vectors: [[1, 0]] }));
    expect((await upstreamFailure(model().embed(["a", "b"]))).kind).toBe("invalid_response");
  });

  test("an embeddings outage surfaces as HTTP 503 after the retries", async () => {
    gateway.onEmbeddings(() => ({ status: 503 }));
    const error = await upstreamFailure(model({ maxRetries: 1 }).embed(["a"]));
    expect([error.kind, error.status]).toEqual(["http", 503]);
    expect(gateway.embeddingRequests()).toHaveLength(2);
  });
});

describe("createLanguageModel", () => {
  test("a configured gateway URL gives the OpenAI-compatible adapter with the configured models", async () => {
    const llm = createLanguageModel({ gatewayUrl: gateway.baseURL, apiKey: "sk-test", chatModel: "c", embedModel: "e" });
    expect(llm.provider).toBe("openai-compatible");
    await llm.complete(user("hi"), { purpose: "chat" });
    await llm.embed(["hi"]);
    expect(gateway.requests.map((r) => (r.body as { model: string }).model)).toEqual(["c", "e"]);
  });

  test("without an API key no Authorization header is sent", async () => {
    const open = startFakeLlmGateway();
    try {
      await createLanguageModel({ gatewayUrl: open.baseURL, chatModel: "c", embedModel: "e" }).complete(user("hi"), { purpose: "chat" });
      expect(open.chatRequests()[0]!.headers).not.toHaveProperty("authorization");
    } finally {
      open.stop();
    }
  });
});
