import { Elysia } from "elysia";
import { z } from "zod";
import type { Database } from "../../common/db/index.ts";
import { listCharacters } from "../../common/db/characters.ts";
import { MAX_CHUNKS_PER_GET, type TextIndex } from "../../common/text-index/index.ts";
import { parseJsonBody } from "../json-body.ts";
import { getReadingPages } from "../../common/db/reader-state.ts";
import { getBookReadingPositions } from "../../common/db/reading-positions.ts";
import { getRecentMessages, getSession, type BoundedMessage } from "../../common/db/sessions.ts";
import { lastChunkWithin, positionFromPages, turnPosition } from "../../common/retrieval/reading-position.ts";
import { listChatBooks, LOCAL_USER_ID, LocalChoiceError, openLocalChat, type LocalChatOptions } from "../../common/local/sessions.ts";

/**
 * The chat page of a local install (`npm start`; in production only with PLAYGROUND=on): pick a book
 * and a character, chat through the public `POST /character/chat`, see the passages a reply used.
 * Its helper routes (books, the local reader's session and its earlier messages, passage text) are local conveniences like
 * `bun run chat`, not part of the service's API: they are left out of the OpenAPI document, and a
 * session is created only where local-sessions.ts allows it (the embedded database, or the
 * frontend-writes flag).
 */

export const PLAYGROUND_PATH = "/playground";
const PAGE = new URL("./page.html", import.meta.url);

const SessionBody = z.object({ book_id: z.string().min(1), character_id: z.string().min(1) });
const PassagesQuery = z.object({
  book_id: z.string().uuid(),
  chunks: z
    .string()
    .regex(/^\d{1,9}(,\d{1,9})*$/)
    .transform((v) => [...new Set(v.split(",").map(Number))].slice(0, MAX_CHUNKS_PER_GET)),
  reading_position: z
    .string()
    .regex(/^\d+(\.\d+)?$/)
    .transform(Number)
    .pipe(z.number().min(0).max(1))
    .optional(),
});

/**
 * Earlier messages the page shows when a session opens: the last 50 (25 exchanges), enough to pick the
 * conversation up again, and a bound on what one reload reads from a long session.
 */
export const DEFAULT_HISTORY_MESSAGES = 50;
/**
 * Rows are the frontend's to write, of any length: each message is cut to its first 16,000 characters
 * (four times the longest message the chat accepts), and the answer stops at 200,000 characters in all,
 * oldest messages left out first, so that one reload never carries megabytes.
 */
export const HISTORY_MESSAGE_CHARS = 16_000;
export const HISTORY_CHARS = 200_000;

const MessagesQuery = z.object({
  session_id: z.string().uuid(),
  limit: z
    .string()
    .regex(/^\d{1,9}$/)
    .transform(Number)
    .pipe(z.number().int().min(1).max(DEFAULT_HISTORY_MESSAGES))
    .optional(),
});

const hidden = { detail: { hide: true } } as const;

function refusal(status: 400 | 404, error: string): Response {
  return Response.json({ error }, { status });
}

/**
 * The last chunk the reader may be shown, found as a chat turn finds it (api/chat/knowledge.ts): the
 * position the page sends (its "read so far", which its turns send too), else the local reader's page
 * in their library; undefined for the whole book. A book ingested before positions were recorded
 * shows nothing to a reader part-way through, as its chat turns use no passage.
 */
async function lastReadableChunk(db: Database, bookId: string, requested: number | undefined): Promise<number | undefined> {
  const library = requested === undefined ? await getReadingPages(db, LOCAL_USER_ID, bookId) : undefined;
  const position = turnPosition(requested, library ? positionFromPages(library.currentPage, library.pageCount) : null);
  if (position === null) return undefined;
  const positions = await getBookReadingPositions(db, bookId);
  return positions ? lastChunkWithin(positions.chunkEnds, position) : -1;
}

/**
 * Passage text by chunk index, from the full-text index ingestion wrote: the text a reply was given,
 * and nothing a row could point elsewhere (a book's file path is the frontend's to write). A passage
 * past the reader's position is withheld: the chunk indexes are the caller's to choose.
 */
async function passagesOf(textIndex: TextIndex, bookId: string, indexes: number[], lastChunk: number | undefined) {
  const readable = (i: number) => lastChunk === undefined || i <= lastChunk;
  const wanted = indexes.filter(readable);
  const stored = new Map((wanted.length > 0 ? await textIndex.get(bookId, wanted) : []).map((c) => [c.chunkIndex, c.text]));
  return indexes.map((i) => (readable(i) ? { chunk_index: i, text: stored.get(i) ?? null } : { chunk_index: i, text: null, past_position: true }));
}

/** The newest messages that fit in HISTORY_CHARS, oldest first; a message cut to HISTORY_MESSAGE_CHARS says so. */
function boundedHistory(messages: readonly BoundedMessage[]) {
  let chars = 0;
  let first = messages.length;
  while (first > 0 && chars + messages[first - 1]!.content.length <= HISTORY_CHARS) chars += messages[--first]!.content.length;
  return messages
    .slice(first)
    .map((m) => ({ role: m.role, content: m.content, ...(m.contentChars > HISTORY_MESSAGE_CHARS ? { truncated: true } : {}) }));
}

export function playgroundRoutes(db: Database, textIndex: TextIndex, options: LocalChatOptions) {
  return new Elysia({ name: "playground" })
    .get(
      PLAYGROUND_PATH,
      ({ request }) =>
        // The router serves /playground/ here too, where the page's relative fetches would resolve under
        // /playground/playground/…: send the browser to the one address they resolve from. Relative, so
        // that a path prefix added by a proxy is kept.
        new URL(request.url).pathname.endsWith("/")
          ? new Response(null, { status: 301, headers: { location: `../${PLAYGROUND_PATH.slice(1)}` } })
          : new Response(Bun.file(PAGE), { headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" } }),
      hidden,
    )
    .get(
      `${PLAYGROUND_PATH}/books`,
      async () => {
        const books = await listChatBooks(db);
        return {
          books: await Promise.all(
            books.map(async (book) => ({
              id: book.id,
              title: book.title,
              characters: (await listCharacters(db, book.id)).map((c) => ({ id: c.id, name: c.name, aliases: c.aliases, emoji: c.emoji })),
            })),
          ),
        };
      },
      hidden,
    )
    .post(
      `${PLAYGROUND_PATH}/session`,
      async ({ body }) => {
        const choice = SessionBody.safeParse(body);
        if (!choice.success) return refusal(400, "body must be {book_id, character_id}");
        try {
          return await openLocalChat(db, { book: choice.data.book_id, character: choice.data.character_id }, options);
        } catch (err) {
          if (err instanceof LocalChoiceError) return refusal(404, err.message);
          throw err;
        }
      },
      { ...hidden, parse: [parseJsonBody, "json"] },
    )
    .get(
      `${PLAYGROUND_PATH}/messages`,
      async ({ query }) => {
        const parsed = MessagesQuery.safeParse(query);
        if (!parsed.success) return refusal(400, `query must be ?session_id=<uuid>[&limit=<1-${DEFAULT_HISTORY_MESSAGES}>]`);
        // The local reader's sessions only: with PLAYGROUND=on on a shared database, another reader's
        // conversation is not this page's to show.
        const session = await getSession(db, parsed.data.session_id);
        if (session?.userId !== LOCAL_USER_ID) return refusal(404, "no such local session");
        const messages = await getRecentMessages(db, session.id, parsed.data.limit ?? DEFAULT_HISTORY_MESSAGES, HISTORY_MESSAGE_CHARS);
        return { message_count: session.messageCount, messages: boundedHistory(messages) };
      },
      hidden,
    )
    .get(
      `${PLAYGROUND_PATH}/passages`,
      async ({ query }) => {
        const parsed = PassagesQuery.safeParse(query);
        if (!parsed.success) return refusal(400, "query must be ?book_id=<uuid>&chunks=<n>[,<n>…][&reading_position=<0-1>]");
        const { book_id: bookId, chunks, reading_position: position } = parsed.data;
        return { passages: await passagesOf(textIndex, bookId, chunks, await lastReadableChunk(db, bookId, position)) };
      },
      hidden,
    );
}
