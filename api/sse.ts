/**
 * Server-Sent Events. Every event this API sends is one `data: <JSON>` line followed by a blank
 * line, written by `formatSseEvent` and nowhere else. Besides events the stream carries SSE comments
 * (lines starting with ":", which every SSE client ignores): one at once, so the headers go out
 * before the first event (Bun sends a streamed response's headers with its first bytes), and one
 * whenever no event has gone out for the keep-alive interval (SSE_KEEPALIVE_SECONDS, 15 s by
 * default), so proxies that cut idle connections leave a slow reply alone.
 *
 * Framing cannot be broken by what an event carries: JSON.stringify writes CR and LF inside strings
 * as the escapes `\r` and `\n` and puts no raw line break between tokens, and SSE splits fields only
 * on CR and LF. So a model token such as "\n\ndata: {…}" stays inside its own event's JSON.
 */

import { DEFAULT_SSE_KEEPALIVE_SECONDS } from "../common/config-defaults.ts";

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  // Reverse proxies (nginx) would otherwise buffer the stream and deliver the reply in one piece.
  "x-accel-buffering": "no",
} as const;

export type SseData = Readonly<Record<string, unknown>>;

export const SSE_OPENING = ": stream open\n\n";
export const SSE_KEEPALIVE = ": keep-alive\n\n";
/** Looks per keep-alive interval, so a comment goes out at most a third of it late. */
const KEEPALIVE_CHECKS = 3;

export function formatSseEvent(data: SseData): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

export interface SseResponseOptions {
  /** Called when the client goes away before the last event; the events' iterator is then returned. */
  onCancel?: (reason: unknown) => void;
  /** Quiet time after which a keep-alive comment is sent. */
  keepAliveMs?: number;
}

/** For each response sseResponse made: settles once its stream has ended, failed, or been cancelled and its source returned. */
const streamEnds = new WeakMap<Response, Promise<void>>();

/**
 * When an SSE response from this module stops sending (undefined for any other response), so that
 * the HTTP metrics can time it without putting another stream in front of every event.
 */
export function sseStreamEnd(response: Response): Promise<void> | undefined {
  return streamEnds.get(response);
}

/**
 * A `text/event-stream` response that sends each event `events` yields. The stream pulls: the
 * iterator advances only as fast as the client reads, so a slow reader slows the source instead of
 * filling memory.
 */
export function sseResponse(events: AsyncIterator<SseData, void>, options: SseResponseOptions = {}): Response {
  const encoder = new TextEncoder();
  const keepAliveMs = options.keepAliveMs ?? DEFAULT_SSE_KEEPALIVE_SECONDS * 1000;
  let cancelled = false;
  let lastSent = performance.now();
  // One clock per stream, not a timer per event: the token path stays a plain await.
  let keepAlive: ReturnType<typeof setInterval> | undefined;
  const ended = Promise.withResolvers<void>();
  const stop = () => {
    clearInterval(keepAlive);
    ended.resolve();
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(SSE_OPENING));
      keepAlive = setInterval(() => {
        if (performance.now() - lastSent < keepAliveMs) return;
        lastSent = performance.now();
        controller.enqueue(encoder.encode(SSE_KEEPALIVE));
      }, keepAliveMs / KEEPALIVE_CHECKS);
    },
    async pull(controller) {
      let next: IteratorResult<SseData, void>;
      try {
        next = await events.next();
      } catch (err) {
        stop();
        throw err;
      }
      // A cancel while this pull waited has already closed the stream.
      if (cancelled) return;
      lastSent = performance.now();
      if (next.done) {
        stop();
        controller.close();
      } else controller.enqueue(encoder.encode(formatSseEvent(next.value)));
    },
    async cancel(reason) {
      cancelled = true;
      clearInterval(keepAlive);
      options.onCancel?.(reason);
      // The end is the source's clean-up done (the session lock released): an isolate runtime keeps
      // the request alive until then (waitUntil), and the HTTP metrics time the stream to it.
      try {
        await events.return?.();
      } finally {
        ended.resolve();
      }
    },
  });
  const response = new Response(body, { headers: SSE_HEADERS });
  streamEnds.set(response, ended.promise);
  return response;
}
