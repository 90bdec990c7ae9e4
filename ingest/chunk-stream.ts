import { Worker } from "node:worker_threads";
import type { ChunkThreadMessage, ChunkThreadReply, LocatedChunk } from "./chunk-thread.ts";

/** Batches the chunking thread may have ready before the index preparation takes them. */
export const DEFAULT_BATCHES_AHEAD = 4;

export interface ChunkStreamOptions {
  chunkTokens: number;
  batchSize: number;
  ahead?: number;
  signal?: AbortSignal;
}

/**
 * The book's chunks in batches, in order, made in a thread of their own (chunk-thread.ts). Ending the
 * iteration early (a `break`, a failure, the signal) stops the thread.
 */
export async function* chunksInThread(text: string, options: ChunkStreamOptions): AsyncGenerator<LocatedChunk[]> {
  const { signal } = options;
  signal?.throwIfAborted();
  const thread = new Worker(new URL("./chunk-thread.ts", import.meta.url));
  const replies: ChunkThreadReply[] = [];
  let wake: (() => void) | undefined;
  const receive = (reply: ChunkThreadReply) => {
    replies.push(reply);
    wake?.();
    wake = undefined;
  };
  thread.on("message", receive);
  thread.once("error", (err: Error) => receive({ kind: "failed", error: err.message }));
  thread.once("exit", (code: number) => receive({ kind: "failed", error: `the thread exited with code ${code}` }));
  const onAbort = () => {
    wake?.();
    wake = undefined;
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    thread.postMessage({ kind: "start", text, chunkTokens: options.chunkTokens, batchSize: options.batchSize, ahead: options.ahead ?? DEFAULT_BATCHES_AHEAD } satisfies ChunkThreadMessage);
    for (;;) {
      while (replies.length === 0) {
        signal?.throwIfAborted();
        await new Promise<void>((resolve) => (wake = resolve));
      }
      signal?.throwIfAborted();
      const reply = replies.shift()!;
      if (reply.kind === "done") return;
      if (reply.kind === "failed") throw new Error(`chunking failed: ${reply.error}`);
      if (reply.kind === "batch") {
        thread.postMessage({ kind: "more" } satisfies ChunkThreadMessage);
        yield reply.chunks;
      }
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    thread.removeAllListeners();
    void thread.terminate();
  }
}
