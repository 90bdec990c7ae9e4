/**
 * Server-Sent Events. Every event this API sends is one `data: <JSON>` line followed by a blank
 * line, written by `formatSseEvent` and nowhere else.
 *
 * Framing cannot be broken by what an event carries: JSON.stringify writes CR and LF inside strings
 * as the escapes `\r` and `\n` and puts no raw line break between tokens, and SSE splits fields only
 * on CR and LF. So a model token such as "\n\ndata: {…}" stays inside its own event's JSON.
 */

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  // Reverse proxies (nginx) would otherwise buffer the stream and deliver the reply in one piece.
  "x-accel-buffering": "no",
} as const;

export type SseData = Readonly<Record<string, unknown>>;

export function formatSseEvent(data: SseData): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

export interface SseResponseOptions {
  /** Called when the client goes away before the last event; the events' iterator is then returned. */
  onCancel?: (reason: unknown) => void;
}

/**
 * A `text/event-stream` response that sends each event `events` yields. The stream pulls: the
 * iterator advances only as fast as the client reads, so a slow reader slows the source instead of
 * filling memory.
 */
export function sseResponse(events: AsyncIterator<SseData, void>, options: SseResponseOptions = {}): Response {
  const encoder = new TextEncoder();
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await events.next();
      // A cancel while this pull waited has already closed the stream.
      if (cancelled) return;
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(formatSseEvent(next.value)));
    },
    async cancel(reason) {
      cancelled = true;
      options.onCancel?.(reason);
      await events.return?.();
    },
  });
  return new Response(body, { headers: SSE_HEADERS });
}
