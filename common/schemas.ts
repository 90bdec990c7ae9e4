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
