import { Elysia } from "elysia";
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { chunkTextToArray, DEFAULT_CHUNK_TOKENS } from "../../common/chunking.ts";
import type { Database } from "../../common/db/index.ts";
import { getBook, listCharacters } from "../../common/db/repositories.ts";
import { parseJsonBody } from "../json-body.ts";
import { listChatBooks, LocalChoiceError, openLocalChat, type LocalChatOptions } from "../local-sessions.ts";

/**
 * The chat page of a local install (`npm start`; in production only with PLAYGROUND=on): pick a book
 * and a character, chat through the public `POST /character/chat`, see the passages a reply used.
 * Its helper routes (books, the local reader's session, passage text) are local conveniences like
 * `bun run chat`, not part of the service's API: they are left out of the OpenAPI document, and a
 * session is created only where local-sessions.ts allows it (the embedded database, or the
 * frontend-writes flag).
 */

export const PLAYGROUND_PATH = "/playground";
const PAGE = new URL("./page.html", import.meta.url);
/** Books whose chunks are kept for passage look-ups; a local install chats about one or two at a time. */
const CHUNKED_BOOKS_KEPT = 4;
const MAX_PASSAGES = 10;

const SessionBody = z.object({ book_id: z.string().min(1), character_id: z.string().min(1) });
const PassagesQuery = z.object({
  book_id: z.string().uuid(),
  chunks: z
    .string()
    .regex(/^\d+(,\d+)*$/)
    .transform((v) => [...new Set(v.split(",").map(Number))].slice(0, MAX_PASSAGES)),
});

const hidden = { detail: { hide: true } } as const;

function refusal(status: 400 | 404, error: string): Response {
  return Response.json({ error }, { status });
}

/**
 * Passage text by chunk index. The indexes hold chunks for search, not for look-up by number, so the
 * book's own file is chunked again exactly as ingestion chunked it; books read from a URL have no
 * local file and show their passage numbers only.
 */
function passageReader(db: Database) {
  const chunked = new Map<string, Promise<string[] | null>>();
  const chunksOf = (bookId: string): Promise<string[] | null> => {
    let chunks = chunked.get(bookId);
    if (!chunks) {
      chunks = getBook(db, bookId).then(async (book) => {
        if (!book?.filePath) return null;
        const text = await readFile(book.filePath, "utf8").catch(() => null);
        return text === null ? null : chunkTextToArray(text, { chunkTokens: DEFAULT_CHUNK_TOKENS }).map((c) => c.text);
      });
      chunked.set(bookId, chunks);
      chunks.catch(() => chunked.delete(bookId));
      if (chunked.size > CHUNKED_BOOKS_KEPT) chunked.delete(chunked.keys().next().value!);
    }
    return chunks;
  };
  return async (bookId: string, indexes: number[]) => {
    const chunks = await chunksOf(bookId);
    return indexes.map((i) => ({ chunk_index: i, text: chunks?.[i] ?? null }));
  };
}

export function playgroundRoutes(db: Database, options: LocalChatOptions) {
  const passages = passageReader(db);
  return new Elysia({ name: "playground" })
    .get(PLAYGROUND_PATH, () => new Response(Bun.file(PAGE), { headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" } }), hidden)
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
      `${PLAYGROUND_PATH}/passages`,
      async ({ query }) => {
        const parsed = PassagesQuery.safeParse(query);
        if (!parsed.success) return refusal(400, "query must be ?book_id=<uuid>&chunks=<n>[,<n>…]");
        return { passages: await passages(parsed.data.book_id, parsed.data.chunks) };
      },
      hidden,
    );
}
