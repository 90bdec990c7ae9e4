import { describe, expect, test } from "bun:test";
import { platform } from "node:os";
import { Worker } from "node:worker_threads";
import { chunkText } from "../../common/chunking.ts";
import { chunkEndLocator } from "../../common/chunk-ends.ts";
import { chunksInThread } from "../../ingest/chunk-stream.ts";
import type { ChunkThreadMessage, ChunkThreadReply, LocatedChunk } from "../../ingest/chunk-thread.ts";
import { BACKGROUND_NICENESS } from "../../ingest/thread-priority.ts";

const paragraph = (i: number) => `Chapter ${i}. "Were you at the ball?" asked Anna Pávlovna, and the prince said he was. It rained all night.`;
const text = Array.from({ length: 400 }, (_, i) => paragraph(i)).join("\n\n");
const options = { chunkTokens: 64, batchSize: 8 };

async function collect(batches: AsyncIterable<LocatedChunk[]>): Promise<LocatedChunk[][]> {
  const all: LocatedChunk[][] = [];
  for await (const batch of batches) all.push(batch);
  return all;
}

describe("the chunking thread", () => {
  test("gives the chunker's chunks with their ends in the book, in order, in batches", async () => {
    const locate = chunkEndLocator(text);
    const expected = [...chunkText(text, { chunkTokens: options.chunkTokens })].map((c) => ({ chunkIndex: c.chunkIndex, text: c.text, end: locate(c.text) }));
    const batches = await collect(chunksInThread(text, options));
    expect(batches.flat()).toEqual(expected);
    expect(batches.slice(0, -1).every((b) => b.length === options.batchSize)).toBe(true);
    expect(expected.length).toBeGreaterThan(3 * options.batchSize);
  });

  test("an empty book gives no batch", async () => {
    expect(await collect(chunksInThread("", options))).toEqual([]);
  });

  test("an aborted signal ends the iteration with its reason, before or during it", async () => {
    const before = new AbortController();
    before.abort(new Error("stopped before"));
    await expect(collect(chunksInThread(text, { ...options, signal: before.signal }))).rejects.toThrow("stopped before");

    const during = new AbortController();
    let taken = 0;
    const run = (async () => {
      for await (const _ of chunksInThread(text, { ...options, signal: during.signal })) if (++taken === 2) during.abort(new Error("stopped during"));
    })();
    await expect(run).rejects.toThrow("stopped during");
    expect(taken).toBe(2);
  });

  test("sends no more batches than it was allowed ahead until the main thread takes one", async () => {
    const thread = new Worker(new URL("../../ingest/chunk-thread.ts", import.meta.url));
    const batches: LocatedChunk[][] = [];
    let started: Extract<ChunkThreadReply, { kind: "started" }> | undefined;
    let arrived: (() => void) | undefined;
    thread.on("message", (reply: ChunkThreadReply) => {
      if (reply.kind === "started") started = reply;
      if (reply.kind === "batch") batches.push(reply.chunks);
      arrived?.();
    });
    const batchArrives = () => new Promise<void>((resolve) => (arrived = resolve));
    try {
      let next = batchArrives();
      thread.postMessage({ kind: "start", text, ...options, ahead: 2 } satisfies ChunkThreadMessage);
      while (batches.length < 2) {
        await next;
        next = batchArrives();
      }
      // Chunking the rest takes a few milliseconds; a thread that ignored its allowance would have sent it.
      await Bun.sleep(200);
      expect(batches.length).toBe(2);
      thread.postMessage({ kind: "more" } satisfies ChunkThreadMessage);
      await next;
      expect(batches.length).toBe(3);
      // On Linux the thread runs below the NLP step's priority; elsewhere it says it could not.
      expect(started?.niceness).toBe(platform() === "linux" ? BACKGROUND_NICENESS : null);
    } finally {
      await thread.terminate();
    }
  });
});
