import type { ChatRequest } from "../../common/contract/schemas.ts";
import type { ChatContext, ChatSessionState } from "./chat-cache.ts";

export const SESSION_NOT_FOUND = "session not found";
/** The session's character belongs to another book than the session: its passages would be the wrong book's. */
export const CHARACTER_NOT_IN_BOOK = "character not found in the session's book";

/** Whether the session is the request's: its reader's, with its character, in its book. */
export function isRequestSession(request: Pick<ChatRequest, "user_id" | "character_id" | "book_id">, session: Pick<ChatSessionState, "user_id" | "character_id" | "book_id">): boolean {
  return session.user_id === request.user_id && session.character_id === request.character_id && session.book_id === request.book_id;
}

/**
 * Why a turn is refused with 404, from what was found of its session, character and book; undefined
 * when it may go on. Another reader's session, or one of another character or book, is reported
 * exactly like a missing one: the caller learns nothing about sessions that are not theirs.
 */
export function refusal(request: Pick<ChatRequest, "user_id" | "character_id" | "book_id">, found: Pick<ChatContext, "session" | "character" | "book">): string | undefined {
  const { session, character, book } = found;
  if (!session || !isRequestSession(request, session)) return SESSION_NOT_FOUND;
  if (!character) return "character not found";
  if (character.book_id !== session.book_id) return CHARACTER_NOT_IN_BOOK;
  if (!book) return "book not found";
}
