import { type ChatCache, type ChatSessionState } from "./chat-cache.ts";
import { sessionCacheKey } from "../../common/contract/cache-keys.ts";
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

  return { refresh, forget };
}
