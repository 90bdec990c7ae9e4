import { Worker } from "node:worker_threads";
import type { FoundCharacter } from "../../characters/character-selection.ts";
import type { NlpReply, NlpResult, NlpTask } from "./thread.ts";

/**
 * The booknlp phase's two engines: real BookNLP as a child process (BOOKNLP_COMMAND), whose files are
 * then parsed, or the native engine. Either way the heavy work runs off the main thread.
 */

/** Real BookNLP's big model needs hours for the largest books on a CPU. */
export const DEFAULT_BOOKNLP_TIMEOUT_MS = 3 * 60 * 60 * 1000;
const STDERR_TAIL_CHARS = 2_000;

/** The book's text could not be analysed; retrying the same text will not help. */
export class NlpError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "NlpError";
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("aborted", "AbortError");
}

/** Runs one task in a fresh worker thread; aborting terminates the thread. */
export function runInThread(task: NlpTask, signal?: AbortSignal): Promise<NlpResult> {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  const thread = new Worker(new URL("./thread.ts", import.meta.url));
  return new Promise<NlpResult>((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal!));
    signal?.addEventListener("abort", onAbort, { once: true });
    const settle = () => signal?.removeEventListener("abort", onAbort);
    thread.once("message", (reply: NlpReply) => {
      settle();
      if (reply.ok) resolve({ characters: reply.characters, people: reply.people, quotes: reply.quotes });
      else reject(new NlpError(reply.error));
    });
    thread.once("error", (err: Error) => {
      settle();
      reject(new NlpError(`NLP thread failed: ${err.message}`, { cause: err }));
    });
    thread.once("exit", (code: number) => {
      settle();
      reject(new NlpError(`NLP thread exited with code ${code} before answering`));
    });
    thread.postMessage(task);
  }).finally(() => void thread.terminate());
}

export interface BookNlpCommandOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * Runs `{command} {input} {outDir} {id}`; BookNLP writes `{outDir}/{id}.tokens` and its siblings.
 * The command is split on whitespace (no shell), so paths in it must not contain spaces.
 */
export async function runBookNlpCommand(command: string, input: string, outDir: string, id: string, options: BookNlpCommandOptions = {}): Promise<void> {
  const argv = [...command.trim().split(/\s+/), input, outDir, id];
  let proc;
  try {
    proc = Bun.spawn(argv, {
      stdin: "ignore",
      stdout: "ignore",
      stderr: "pipe",
      timeout: options.timeoutMs ?? DEFAULT_BOOKNLP_TIMEOUT_MS,
      killSignal: "SIGKILL",
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (err) {
    throw new NlpError(`BookNLP command could not start (${argv[0]}): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  let tail = "";
  const decoder = new TextDecoder();
  for await (const chunk of proc.stderr) tail = (tail + decoder.decode(chunk, { stream: true })).slice(-STDERR_TAIL_CHARS);
  const code = await proc.exited;
  if (options.signal?.aborted) throw abortReason(options.signal);
  if (code !== 0) {
    const how = proc.signalCode ? `was killed by ${proc.signalCode}` : `exited with code ${code}`;
    throw new NlpError(`BookNLP ${how}${tail.trim() ? `: ${tail.trim().split("\n").slice(-3).join(" | ")}` : ""}`);
  }
}
