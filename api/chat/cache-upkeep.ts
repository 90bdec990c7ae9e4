import { type ChatCache, type ChatSessionState } from "./chat-cache.ts";
import { sessionCacheKey } from "../../common/contract/cache-keys.ts";
import type { SavedExchange } from "../../common/db/sessions.ts";
import type { Logger } from "../../common/log.ts";
import { retryUntilStoreAnswers, type Track } from "./background.ts";

export interface SessionCacheUpkeepDeps {
  cache: ChatCache;
  track: Track;
  log: Logger;
}

/** Keeps a session's cache entry true to the database after a turn or a fold wrote it, or drops it. */
export function createSessionCacheUpkeep(deps: SessionCacheUpkeepDeps) {
  const { log } = deps;

  /** A cache entry that could not be replaced must not outlive the turn that made it stale. */
  async function refresh(state: ChatSessionState) {
    try {
      await deps.cache.storeSession(state);
    } catch (error) {
      log.warn("session cache write failed, dropping the entry", { session_id: state.id, error });
      await forget(state.id);
    }
  }

  async function forget(sessionId: string) {
    const { cache } = deps;
    await cache.forgetSession(sessionId).catch((err: unknown) => {
      // Left in place, the entry would feed the next turns a history without this exchange for an hour.
      log.warn("stale session cache entry left behind; dropping it again in the background", { session_id: sessionId, error: err });
      deps.track(retryUntilStoreAnswers(log, sessionCacheKey(sessionId), () => cache.forgetSession(sessionId), err));
    });
  }

  /**
   * The entry once a turn has saved its exchange, `state` being the history the turn read with the
   * exchange added (of `readCount` exchanges before it). `current`: whether `state` is the session as
   * the database has it, so it is written; otherwise the entry is dropped for the next turn to read
   * the database.
   */
  function afterSave(sessionId: string, readCount: number, saved: Pick<SavedExchange, "previousCount">, state: ChatSessionState): { current: boolean; written: Promise<void> } {
    if (saved.previousCount === null) {
      // Found saved by a retry: whether another exchange came in between cannot be told.
      log.warn("exchange found saved on a retry; its cache entry is dropped", { session_id: sessionId });
      return { current: false, written: forget(sessionId) };
    }
    if (saved.previousCount !== readCount) {
      // Another exchange was saved while this one was written (its lock had lapsed): the turn's history lacks it.
      log.warn("session changed during the reply; its cache entry is dropped", { session_id: sessionId });
      return { current: false, written: forget(sessionId) };
    }
    return { current: true, written: refresh(state) };
  }

  return { refresh, forget, afterSave };
}
