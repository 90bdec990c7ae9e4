/**
 * Worker-thread entry for the index's text work: the book chunked (common/chunking.ts) and each
 * chunk's end located in it (common/chunk-ends.ts), sent back in batches as the main thread asks for
 * them. It runs at a lower priority (thread-priority.ts), so on a small machine it takes the cores the
 * NLP step leaves rather than slowing it: the index preparation can then start with the book, where
 * on the main thread it had to wait for the NLP step to end.
 */
import { parentPort } from "node:worker_threads";
import { chunkText } from "../common/chunking.ts";
import { chunkEndLocator } from "../common/chunk-ends.ts";
import { lowerThreadPriority } from "./thread-priority.ts";

export interface LocatedChunk {
  chunkIndex: number;
  text: string;
  /** Where the chunk ends in the book, as a position (0-1). */
  end: number;
}

export type ChunkThreadMessage =
  | { kind: "start"; text: string; chunkTokens: number; batchSize: number; ahead: number }
  /** The main thread took a batch: one more may be sent. */
  | { kind: "more" };

export type ChunkThreadReply =
  | { kind: "started"; niceness: number | null }
  | { kind: "batch"; chunks: LocatedChunk[] }
  | { kind: "done" }
  | { kind: "failed"; error: string };

if (parentPort) {
  const port = parentPort;
  let credits = 0;
  let wake: (() => void) | undefined;
  const start = ({ text, chunkTokens, batchSize }: Extract<ChunkThreadMessage, { kind: "start" }>) => {
    port.postMessage({ kind: "started", niceness: lowerThreadPriority() ?? null } satisfies ChunkThreadReply);
    const locate = chunkEndLocator(text);
    let batch: LocatedChunk[] = [];
    const send = async () => {
      // At most `ahead` batches wait on the main thread: a slow embedding model holds back the chunking, not the memory.
      while (credits === 0) await new Promise<void>((resolve) => (wake = resolve));
      credits--;
      port.postMessage({ kind: "batch", chunks: batch } satisfies ChunkThreadReply);
      batch = [];
    };
    return (async () => {
      for (const chunk of chunkText(text, { chunkTokens })) {
        batch.push({ chunkIndex: chunk.chunkIndex, text: chunk.text, end: locate(chunk.text) });
        if (batch.length >= batchSize) await send();
      }
      if (batch.length > 0) await send();
      port.postMessage({ kind: "done" } satisfies ChunkThreadReply);
    })();
  };
  port.on("message", (message: ChunkThreadMessage) => {
    if (message.kind === "more") {
      credits++;
      wake?.();
      wake = undefined;
      return;
    }
    credits = message.ahead;
    start(message).catch((err: unknown) => port.postMessage({ kind: "failed", error: err instanceof Error ? err.message : String(err) } satisfies ChunkThreadReply));
  });
}
