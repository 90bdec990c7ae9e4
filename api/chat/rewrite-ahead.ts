import type { CachedEntries, ChatSessionState, PositionedEntries } from "./chat-cache.ts";
import type { ChatRequest } from "../../common/contract/schemas.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import type { Logger } from "../../common/log.ts";
import { sameRewriteHistory } from "../../common/prompt/rewrite.ts";
import { turnPosition } from "../../common/retrieval/reading-position.ts";
import type { Track } from "./background.ts";
import { isRequestSession } from "./refusal.ts";
import type { Knowledge } from "./knowledge.ts";
import type { EarlyRewriteRead, Rewrite, createRewriter } from "./rewrite.ts";

/**
 * The query rewrite started on a guess, as soon as the key-value store has answered, rather than
 * once the database has: the rewrite is the first of the model calls a turn waits on, and all it
 * needs is the history and which knowledge of the character applies (Knowledge.tag).
 *
 * - The history: the session's cache entry when there is one (read under the session lock, so it is
 *   the latest), else none: a session with no entry is nearly always on its first message.
 * - The knowledge: from the body's `reading_position`, else from where this reader was in this
 *   book at their last turn, in any session (`chat:page:{user_id}:{book_id}`, written with the
 *   turn's other writes): a reader rarely passes a checkpoint between two messages.
 *
 * Once the database has answered, the turn keeps the rewrite only if it was made from the same
 * history and knowledge as the turn's own; otherwise it is cancelled and made again, which costs no
 * more time than waiting would have. A guess never reaches the reader: the rewrite only sharpens
 * the search, and a wrong one is thrown away. What a wrong guess costs is one model call, so guesses
 * stop for the rest of the minute once AHEAD_WASTE_LIMIT have been thrown away in it (a stream of
 * requests for sessions that do not exist must not cost a model call each).
 */

export const AHEAD_WASTE_LIMIT = 20;
export const AHEAD_WASTE_WINDOW_MS = 60_000;
/** A reader away from a book longer than this has likely read on: their last page is no guess. */
export const LAST_PAGE_TTL_SECONDS = 86_400;

/** Where the reader was in the book at their last turn: "1" for the whole book. */
export const lastPageKey = (userId: string, bookId: string) => `chat:page:${userId}:${bookId}`;

type Rewriter = ReturnType<typeof createRewriter>;
type CachedCharacter = NonNullable<CachedEntries["character"]>;
type KnowledgeFor = (
  character: NonNullable<CachedEntries["character"]>,
  book: NonNullable<CachedEntries["book"]>,
  position: number | null,
  question: string,
  cached?: PositionedEntries | null,
) => Promise<Knowledge>;

export interface RewriteAhead {
  /** The knowledge the rewrite was made with. */
  knowledge: Promise<Knowledge>;
  history: ChatSessionState["messages"];
  rewrite: Promise<Rewrite>;
  /** Cancels the rewrite: the turn will not use it. */
  abandon(reason: string): void;
}

/** What the turn's first key-value command found, for `start`. */
export interface AheadFound {
  entries: CachedEntries;
  /** chat:fold:{session}: while a summary fold runs the history may change under the turn. */
  folding: string | null | undefined;
  early: EarlyRewriteRead;
  /** What lastPageKey held; undefined when the store failed. */
  lastPage: string | null | undefined;
}

export interface RewriteAheadDeps {
  kv: KeyValueStore;
  track: Track;
  rewriter: Rewriter;
  knowledgeFor: KnowledgeFor;
  log: Logger;
  /** performance.now() unless a test says otherwise. */
  now?: () => number;
}

export function createRewriteAhead(deps: RewriteAheadDeps) {
  const now = deps.now ?? (() => performance.now());
  /** When guesses were thrown away, oldest first, within the last AHEAD_WASTE_WINDOW_MS. */
  const wasted: number[] = [];

  function allowed(): boolean {
    while (wasted.length > 0 && now() - wasted[0]! > AHEAD_WASTE_WINDOW_MS) wasted.shift();
    return wasted.length < AHEAD_WASTE_LIMIT;
  }

  /** What the turn's first command reads for the rewrite, after the context's own keys, in this order. */
  function keys(request: ChatRequest): string[] {
    return [...deps.rewriter.earlyKeys(request.character_id, request.session_id, request.user_message), lastPageKey(request.user_id, request.book_id)];
  }

  /** EarlyRewriteRead from the values of `keys` (null: the store failed). */
  function earlyOf(read: readonly (string | null)[] | null): EarlyRewriteRead {
    return { first: read?.[0], unsaved: read?.[1] };
  }

  /** `start` on what the turn's first command read: the context's entries (their alsoRead the values of `keys`) and the fold key. */
  function startFrom(request: ChatRequest, entries: CachedEntries, folding: string | null | undefined): RewriteAhead | null {
    return start(request, { entries, folding, early: earlyOf(entries.alsoRead), lastPage: entries.alsoRead[2] });
  }

  /** The rewrite on the guess `found` allows, or null when there is none to make (or guesses are paused). */
  function start(request: ChatRequest, found: AheadFound): RewriteAhead | null {
    const { character, book, session } = found.entries;
    // Whatever the database says, this turn will be refused (404): nothing to start.
    if (!character || !book || character.book_id !== request.book_id) return null;
    if (session && !isRequestSession(request, session)) return null;
    if (found.folding) return null;
    const position = request.reading_position !== undefined ? turnPosition(request.reading_position, null) : pageOf(found.lastPage);
    if (position === undefined || !allowed()) return null;

    const history = session?.messages ?? [];
    const controller = new AbortController();
    const knowledge = deps.knowledgeFor(character, book, position, request.user_message, found.entries.positioned);
    const rewrite = knowledge.then((known) => {
      const looked = deps.rewriter.lookup(character.id, request.user_message, history, found.early);
      return deps.rewriter.rewrite(character, request.user_message, { id: request.session_id, messages: history }, known, controller.signal, looked);
    });
    rewrite.catch(() => {});
    knowledge.catch(() => {});
    let abandoned = false;
    return {
      knowledge,
      history,
      rewrite,
      abandon(reason) {
        if (abandoned) return;
        abandoned = true;
        controller.abort(new Error(`rewrite made ahead not used: ${reason}`));
        wasted.push(now());
        deps.log.info("rewrite made ahead of the database not used", { session_id: request.session_id, reason });
      },
    };
  }

  /**
   * The rewrite made ahead when it was made from the turn's own history and knowledge; else null,
   * and it is cancelled.
   */
  async function use(ahead: RewriteAhead | null, knowledge: Knowledge, history: ChatSessionState["messages"]): Promise<Rewrite | null> {
    if (!ahead) return null;
    const guessed = await ahead.knowledge.catch(() => null);
    if (!guessed || guessed.tag !== knowledge.tag) ahead.abandon("the reader's page gives other knowledge of the character");
    else if (!sameRewriteHistory(ahead.history, history)) ahead.abandon("the session has another history");
    else return ahead.rewrite;
    return null;
  }

  /**
   * The turn's rewrite, once it knows its knowledge: the one made ahead if the guess holds, else made
   * now. Without one made ahead, the cache entry is asked for at once (the history is known), while the
   * reader's page may still be on its way. The one made ahead is cancelled if the reader leaves;
   * `release` stops listening for that.
   */
  function forTurn(
    ahead: RewriteAhead | null,
    turn: { character: Pick<CachedCharacter, "id" | "name">; userMessage: string; session: Pick<ChatSessionState, "id" | "messages">; early: EarlyRewriteRead },
    signal: AbortSignal,
  ): { rewrite(knowledge: Knowledge): Promise<Rewrite>; release(): void } {
    const { character, userMessage, session, early } = turn;
    const lookup = () => deps.rewriter.lookup(character.id, userMessage, session.messages, early);
    const looked = ahead ? undefined : lookup();
    const leave = () => ahead?.abandon("the reader left");
    signal.addEventListener("abort", leave, { once: true });
    return {
      rewrite: async (knowledge) =>
        (await use(ahead, knowledge, session.messages)) ?? deps.rewriter.rewrite(character, userMessage, session, knowledge, signal, looked ?? lookup()),
      release: () => signal.removeEventListener("abort", leave),
    };
  }

  /** Keeps where the reader was in the book (null: the whole book), issued with the turn's last writes. */
  function rememberPage(request: Pick<ChatRequest, "user_id" | "book_id">, position: number | null) {
    const key = lastPageKey(request.user_id, request.book_id);
    deps.track(deps.kv.set(key, String(position ?? 1), { ex: LAST_PAGE_TTL_SECONDS }).catch((error: unknown) => deps.log.warn("last page write failed", { key, error })));
  }

  return { keys, earlyOf, startFrom, start, use, forTurn, rememberPage };
}

/** The position lastPageKey holds, undefined when it holds none (or something else). */
function pageOf(value: string | null | undefined): number | null | undefined {
  const page = value ? Number(value) : NaN;
  return Number.isFinite(page) && page >= 0 && page <= 1 ? turnPosition(page, null) : undefined;
}
