import { z } from "zod";

/**
 * Wire shapes shared by the API, the worker and the docs: declared once here, TypeScript types
 * derived from them. Field names are the spec's (snake_case on the wire).
 */

const uuid = (field: string) => z.uuid({ error: `${field} must be a UUID` });

export const ErrorBody = z
  .object({ error: z.string() })
  .meta({ title: "Error", description: "Every error response has this body.", example: { error: "book_id must be a UUID" } });
export type ErrorBody = z.infer<typeof ErrorBody>;

/** ErrorBody documented with the message one status really carries: its example in the API docs. */
export function errorBodyFor(error: string) {
  return z.object({ error: z.string() }).meta({ title: "Error", description: "Every error response has this body.", example: { error } });
}

export const ProcessingRequest = z
  .object({
    book_id: uuid("book_id"),
    file_url: z.string({ error: "file_url must be a string" }).max(2048, { error: "file_url is longer than 2048 characters" }),
    user_id: uuid("user_id"),
  })
  .meta({
    title: "ProcessingRequest",
    example: {
      book_id: "6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b",
      file_url: "https://books.example.com/uploads/pride-and-prejudice.txt",
      user_id: "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f7a",
    },
  });
export type ProcessingRequest = z.infer<typeof ProcessingRequest>;

/** What goes onto processing_queue. `attempts` is added by the worker when it retries. */
export const JobRecord = z.object({
  job_id: z.string().min(1),
  book_id: z.uuid(),
  file_url: z.string(),
  user_id: z.uuid(),
  enqueued_at: z.string(),
  attempts: z.number().int().min(0).optional(),
});
export type JobRecord = z.infer<typeof JobRecord>;

export const ProcessingAccepted = z
  .object({
    status: z.literal("accepted"),
    job_id: z.string(),
    data: z.object({
      book_id: z.uuid(),
      job: JobRecord,
      queued: z.literal(true),
    }),
  })
  .meta({
    title: "ProcessingAccepted",
    description: "The book was queued for ingestion. Both shapes the spec gives are satisfied: status/job_id and data.",
    example: {
      status: "accepted",
      job_id: "c0a8012e-9f3b-4d6a-8e2c-5b7d9f1a3c4e",
      data: {
        book_id: "6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b",
        job: {
          job_id: "c0a8012e-9f3b-4d6a-8e2c-5b7d9f1a3c4e",
          book_id: "6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b",
          file_url: "https://books.example.com/uploads/pride-and-prejudice.txt",
          user_id: "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f7a",
          enqueued_at: "2026-11-21T12:00:00.000Z",
        },
        queued: true,
      },
    },
  });
export type ProcessingAccepted = z.infer<typeof ProcessingAccepted>;

// Chat ----------------------------------------------------------------------------------------

/** Longest reader message accepted; longer ones are refused with 400 before any model is called. */
export const MAX_USER_MESSAGE_CHARS = 4000;
/** Longest `preferences` override accepted. */
export const MAX_PREFERENCES_CHARS = 2000;

export const ChatRequest = z
  .object({
    user_id: uuid("user_id"),
    character_id: uuid("character_id"),
    book_id: uuid("book_id"),
    session_id: uuid("session_id"),
    user_message: z
      .string({ error: "user_message must be a string" })
      .max(MAX_USER_MESSAGE_CHARS, { error: `user_message is longer than ${MAX_USER_MESSAGE_CHARS} characters` })
      .regex(/\S/, { error: "user_message must not be blank" })
      // Postgres text cannot hold NUL: refused here, before the model is paid to answer a message that cannot be saved.
      .refine((text) => !text.includes("\u0000"), { error: "user_message must not contain NUL characters" })
      .meta({ description: `What the reader says: not blank, at most ${MAX_USER_MESSAGE_CHARS} characters.` }),
    preferences: z
      .string({ error: "preferences must be a string" })
      .max(MAX_PREFERENCES_CHARS, { error: `preferences is longer than ${MAX_PREFERENCES_CHARS} characters` })
      .optional()
      .meta({
        description:
          "Replaces the reader's stored preferences for this character (the `USER PREFERENCE MODIFIERS` block) for this " +
          "message only; an empty string sends none. Omitted, the stored preferences (user_preferences) are used.",
      }),
    reading_position: z
      .number({ error: "reading_position must be a number from 0 to 1" })
      .min(0, { error: "reading_position must be a number from 0 to 1" })
      .max(1, { error: "reading_position must be a number from 0 to 1" })
      .optional()
      .meta({
        description:
          "How far the reader has read, as a fraction of the book's text (0 to 1), for this message only. The reply then " +
          "uses only passages that end before it and the character as known at it, and the model is told not to reveal " +
          "anything after it. Omitted, it is current_page / page_count from the reader's user_library row; with no row, " +
          "no page count, page 0 or a page past the end, the whole book is used. 1 is the whole book.",
        example: 0.4,
      }),
  })
  .meta({
    title: "ChatRequest",
    example: {
      user_id: "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f7a",
      character_id: "3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c7d",
      book_id: "6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b",
      session_id: "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b",
      user_message: "What did you think of Mr. Darcy when you first met him?",
    },
  });
export type ChatRequest = z.infer<typeof ChatRequest>;

export const ChatTokenEvent = z
  .object({ token: z.string() })
  .meta({ title: "ChatTokenEvent", description: "The next piece of the reply, in order.", example: { token: " I thought him" } });
export type ChatTokenEvent = z.infer<typeof ChatTokenEvent>;

export const ChatSource = z.object({
  chunk_index: z.number().int().min(0),
  score: z.number().meta({ description: "Reranker relevance, or the reciprocal-rank-fusion score when no reranker is configured." }),
});
export type ChatSource = z.infer<typeof ChatSource>;

export const ChatDoneEvent = z
  .object({
    done: z.literal(true),
    full_response: z.string().meta({ description: "The whole reply: the concatenation of every token event." }),
    sources: z.array(ChatSource).meta({ description: "The book passages the reply was grounded in, best first." }),
    sources_missing: z.enum(["before_first_passage", "index_loading", "search_failed", "no_match"]).optional().meta({
      description:
        "Present when `sources` is empty, saying why: the reader has not finished the first passage; the book's index is still loading (the next turns will have passages); a search failed; or nothing matched.",
    }),
  })
  .meta({
    title: "ChatDoneEvent",
    description: "The last event of a successful reply, sent once the exchange has been saved.",
    example: {
      done: true,
      full_response: "I thought him the proudest, most disagreeable man in the world.",
      sources: [
        { chunk_index: 12, score: 0.91 },
        { chunk_index: 40, score: 0.62 },
      ],
    },
  });
export type ChatDoneEvent = z.infer<typeof ChatDoneEvent>;

export const ChatErrorEvent = z
  .object({
    error: z.string(),
    code: z.literal([429, 502]).meta({
      description: "429: another reply is being written in this session. 502: the language model (or the database saving the reply) failed.",
    }),
  })
  .meta({
    title: "ChatErrorEvent",
    description: "Ends the stream instead of a `done` event; nothing of this exchange is saved.",
    example: { error: "another reply is in progress for this session", code: 429 },
  });
export type ChatErrorEvent = z.infer<typeof ChatErrorEvent>;

export const ChatEvent = z.union([ChatTokenEvent, ChatDoneEvent, ChatErrorEvent]).meta({ title: "ChatEvent" });
export type ChatEvent = z.infer<typeof ChatEvent>;
