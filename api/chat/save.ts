import { DatabaseError, type Database } from "../../common/db/index.ts";
import { appendExchange, type ExchangeIds, type SavedExchange } from "../../common/db/sessions.ts";
import type { Logger } from "../../common/log.ts";
import { retry } from "../../common/retry.ts";

/**
 * A reply the reader has received is saved in up to SAVE_ATTEMPTS attempts, waiting
 * SAVE_RETRY_FIRST_MS, then twice as long each time up to SAVE_RETRY_MAX_MS, in between (1.75 s in
 * all), while the session lock is kept alive; then the reader gets the SAVE_FAILED event.
 */
export const SAVE_ATTEMPTS = 4;
export const SAVE_RETRY_FIRST_MS = 250;
export const SAVE_RETRY_MAX_MS = 2_000;
/** Characters of the reply kept as the session's preview, before the closing "…". */
export const PREVIEW_CHARS = 100;

/**
 * The session's preview: the start of the reply on one line, always ending in "…". Only as much of
 * the reply is read as the preview needs: a start that holds more than PREVIEW_CHARS characters once
 * its whitespace is collapsed begins the same as the whole reply would.
 */
export function previewOf(reply: string): string {
  for (let take = PREVIEW_CHARS * 4; ; take *= 4) {
    const whole = take >= reply.length;
    const start = whole ? reply : reply.slice(0, take);
    const codePoints = [...start.replace(/\s+/g, " ").trimStart()];
    if (whole || codePoints.length > PREVIEW_CHARS) return `${codePoints.slice(0, PREVIEW_CHARS).join("").trimEnd()}…`;
  }
}

/**
 * Whether a failed save may succeed when tried again: not when Postgres refused the data itself
 * (SQLSTATE classes 22 and 23, such as a NUL character or a session deleted meanwhile), except a
 * duplicate key, which is a save of the same exchange still in flight.
 */
function mayPassOnRetry(error: unknown): boolean {
  if (!(error instanceof DatabaseError) || error.code === "unique_violation") return true;
  return !/^2[23]/.test(error.sqlState ?? "");
}

export interface ExchangeSaverDeps {
  db: Database;
  log: Logger;
}

export function createExchangeSaver(deps: ExchangeSaverDeps) {
  /**
   * Saves the exchange, trying again with back-off when the database fails (SAVE_ATTEMPTS): the reader
   * has the whole reply by now. The same message ids on every attempt make a retry after a save whose
   * answer was lost find it saved rather than save it twice. Null: the session is gone.
   */
  return async function saveExchange(sessionId: string, userMessage: string, reply: string, signal: AbortSignal): Promise<SavedExchange | null> {
    const ids: ExchangeIds = { userMessageId: crypto.randomUUID(), assistantMessageId: crypto.randomUUID() };
    return retry(() => appendExchange(deps.db, sessionId, userMessage, reply, previewOf(reply), ids), {
      attempts: SAVE_ATTEMPTS,
      firstDelayMs: SAVE_RETRY_FIRST_MS,
      maxDelayMs: SAVE_RETRY_MAX_MS,
      shouldRetry: mayPassOnRetry,
      signal,
      onRetry: (error, attempt) => deps.log.warn("saving the exchange failed; trying again", { session_id: sessionId, attempt, error }),
    });
  };
}
