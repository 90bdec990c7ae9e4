import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { loadConfig } from "../../common/config.ts";
import { DEFAULT_RERANK_MODEL } from "../../common/config-defaults.ts";
import { createHttpReranker, rerankEndpoint, type HttpRerankerOptions } from "../../common/rerank/http.ts";
import { startLoopbackServer } from "../support/fake-llm-gateway.ts";
import { startFakeReranker } from "../support/fake-reranker.ts";
import { upstreamFailure } from "../support/outcomes.ts";

const server = startFakeReranker({ apiKey: "rk-test" });
afterEach(() => server.reset());
afterAll(() => server.stop());

const documents = [
  "Alice was beginning to get very tired of sitting by her sister on the bank.",
  "The White Rabbit put on his spectacles.",
  "Curiouser and curiouser! cried Alice.",
  "The Queen turned crimson with fury.",
];

function reranker(overrides: Partial<HttpRerankerOptions> = {}) {
  return createHttpReranker({ url: server.url, apiKey: "rk-test", model: "rerank-test", maxRetries: 0, ...overrides });
}

const rerankFailure = (promise: Promise<unknown>) => upstreamFailure(promise, "rerank");

describe("the rerank request", () => {
  test("posts the query and documents as JSON with a bearer key and asks for no documents back", async () => {
    await reranker().rerank("what did Alice cry", documents, 2);
    const [request] = server.rerankRequests();
    expect(request!.method).toBe("POST");
    expect(request!.headers.authorization).toBe("Bearer rk-test");
    expect(request!.headers["content-type"]).toBe("application/json");
    expect(request!.body).toEqual({ model: "rerank-test", query: "what did Alice cry", documents, top_n: 2, return_documents: false });
  });

  test("asks for no more results than there are documents", async () => {
    await reranker().rerank("Alice", documents.slice(0, 2), 10);
    expect(server.rerankRequests()[0]!.body).toMatchObject({ top_n: 2 });
  });

  test("names a model even when RERANK_MODEL is not set: the documented default, rerank-v3.5", async () => {
    const config = loadConfig({ RERANK_URL: server.url, RERANK_API_KEY: "rk-test" });
    await createHttpReranker({ ...config.rerank!, maxRetries: 0 }).rerank("Alice", documents, 1);
    expect(server.rerankRequests()[0]!.body).toMatchObject({ model: "rerank-v3.5" });
    expect(DEFAULT_RERANK_MODEL).toBe("rerank-v3.5");
    server.reset();
    await reranker({ model: undefined }).rerank("Alice", documents, 1);
    expect(server.rerankRequests()[0]!.body).toMatchObject({ model: "rerank-v3.5" });
  });

  test("sends nothing when there are no documents", async () => {
    expect(await reranker().rerank("Alice", [], 3)).toEqual([]);
    expect(server.rerankRequests()).toHaveLength(0);
  });

  test.each([
    ["the service root", "https://api.jina.ai"],
    ["the versioned base", "https://api.jina.ai/v1/"],
    ["the full endpoint", "https://api.jina.ai/v1/rerank"],
  ])("a URL given as %s reaches /v1/rerank", (_label, url) => {
    expect(rerankEndpoint(url)).toBe("https://api.jina.ai/v1/rerank");
  });

  test("a URL ending in /v1 reaches the same server endpoint", async () => {
    await reranker({ url: `${server.url}/v1` }).rerank("Alice", documents, 1);
    expect(server.rerankRequests().map((r) => r.path)).toEqual(["/v1/rerank"]);
  });
});

describe("rerank results", () => {
  test("map to document positions with scores, best first, whatever order the server used", async () => {
    server.onRerank(() => ({
      results: [
        { index: 3, relevance_score: 0.12 },
        { index: 0, relevance_score: 0.91 },
        { index: 2, relevance_score: 0.47 },
      ],
    }));
    expect(await reranker().rerank("q", documents, 3)).toEqual([
      { index: 0, relevanceScore: 0.91 },
      { index: 2, relevanceScore: 0.47 },
      { index: 3, relevanceScore: 0.12 },
    ]);
  });

  test("put the document that answers the query first", async () => {
    const [best] = await reranker().rerank("who put on spectacles", documents, 2);
    expect(best!.index).toBe(1);
  });

  test("are cut to top_n when the server scores every document", async () => {
    server.onRerank((req) => ({ results: req.documents.map((_, index) => ({ index, relevance_score: index / 10 })) }));
    expect((await reranker().rerank("q", documents, 2)).map((r) => r.index)).toEqual([3, 2]);
  });

  test("are read from Voyage's `data` list as well", async () => {
    server.onRerank(() => ({ raw: { object: "list", data: [{ index: 1, relevance_score: 0.5 }], model: "rerank-2" } }));
    expect(await reranker().rerank("q", documents, 1)).toEqual([{ index: 1, relevanceScore: 0.5 }]);
  });
});

describe("invalid responses", () => {
  test.each([
    ["an index past the last document", { results: [{ index: 4, relevance_score: 0.9 }] }],
    ["a negative index", { results: [{ index: -1, relevance_score: 0.9 }] }],
    ["a repeated index", { results: [{ index: 1, relevance_score: 0.9 }, { index: 1, relevance_score: 0.8 }] }],
    ["a score that is not a number", { results: [{ index: 1, relevance_score: "high" }] }],
    ["no results list", { answer: "yes" }],
  ])("%s fails as invalid_response", async (_label, body) => {
    server.onRerank(() => ({ raw: body }));
    expect((await rerankFailure(reranker().rerank("q", documents, 2))).kind).toBe("invalid_response");
  });

  test("a body that is not JSON fails as invalid_response", async () => {
    server.onRerank(() => ({ raw: "<html>gateway error</html>", contentType: "text/html" }));
    expect((await rerankFailure(reranker().rerank("q", documents, 2))).kind).toBe("invalid_response");
  });
});

describe("outages", () => {
  test("a 500 is retried and surfaces as HTTP 500 once the retries are spent", async () => {
    server.onRerank(() => ({ status: 500 }));
    const error = await rerankFailure(reranker({ maxRetries: 2 }).rerank("q", documents, 2));
    expect([error.kind, error.status]).toEqual(["http", 500]);
    expect(server.rerankRequests()).toHaveLength(3);
  });

  test("a transient 503 is retried transparently", async () => {
    server.onRerank((_req, call) => (call === 0 ? { status: 503 } : { results: [{ index: 2, relevance_score: 1 }] }));
    expect(await reranker({ maxRetries: 1 }).rerank("q", documents, 1)).toEqual([{ index: 2, relevanceScore: 1 }]);
    expect(server.rerankRequests()).toHaveLength(2);
  });

  test("a wrong key fails at once as HTTP 401", async () => {
    const error = await rerankFailure(reranker({ apiKey: "wrong", maxRetries: 2 }).rerank("q", documents, 2));
    expect([error.kind, error.status]).toEqual(["http", 401]);
    expect(server.rerankRequests()).toHaveLength(1);
  });

  test("a server that never answers fails as a timeout and sees the request abandoned", async () => {
    server.onRerank(() => ({ hang: true }));
    const error = await rerankFailure(reranker({ timeoutMs: 200 }).rerank("q", documents, 2));
    expect(error.kind).toBe("timeout");
    await server.waitForAbort();
  });

  test("aborting the caller's signal fails the call as aborted without retrying", async () => {
    const arrived = Promise.withResolvers<void>();
    server.onRerank(() => {
      arrived.resolve();
      return { hang: true };
    });
    const controller = new AbortController();
    const pending = reranker({ maxRetries: 2 }).rerank("q", documents, 2, controller.signal);
    await arrived.promise;
    controller.abort();
    expect((await rerankFailure(pending)).kind).toBe("aborted");
    expect(server.rerankRequests()).toHaveLength(1);
  });

  test("a refused connection fails as a connection error", async () => {
    const closed = startLoopbackServer({});
    closed.stop();
    expect((await rerankFailure(reranker({ url: closed.url }).rerank("q", documents, 2))).kind).toBe("connection");
  });
});
