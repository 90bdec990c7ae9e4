import type { BookIngestion, BookIngestionRow, ProcessingStatus } from "../contract/rows.ts";
import type { Logger } from "../log.ts";
import type { Queryable } from "./index.ts";
import { refusedStatus, writesStatus } from "./processing-status.ts";
import { camelize, isUuid } from "./row-lookup.ts";

/** A book's way through ingestion: books.processing_status (the frontend's column) and book_ingestions (ours). */

export interface IngestionOutcome {
  /** Why ingestion failed, in our own words; kept in book_ingestions, never in the books row. */
  error?: string;
  chunkCount?: number;
  /** The job that completed the book, so that the same job is never run again. */
  jobId?: string;
}

/**
 * Moves a book through ingestion: books.processing_status (the only column of books the backend
 * writes), and our own record of it in book_ingestions (attempts, last error, chunk count, times).
 * A completed book stays completed until a new ingestion completes: while it is re-ingested, and
 * when that fails, readers keep chatting with what it has, and the failure is only recorded here.
 * False when there is no such book.
 */
export async function setProcessingStatus(
  db: Queryable,
  bookId: string,
  status: ProcessingStatus,
  outcome: IngestionOutcome = {},
  log?: Logger,
): Promise<boolean> {
  if (!isUuid(bookId)) return false;
  try {
    return await writeProcessingStatus(db, bookId, status, outcome, await columnValue(db, status, log));
  } catch (err) {
    if (!(await refusedStatus(db, status, err, log))) throw err;
    return writeProcessingStatus(db, bookId, status, outcome, await columnValue(db, status, log));
  }
}

/**
 * What goes into books.processing_status for `status` (common/db/processing-status.ts): the status
 * where the column accepts it; where it refuses `failed`, `pending` (the book can be submitted
 * again); where it refuses `processing`, nothing (the row keeps `pending`).
 */
async function columnValue(db: Queryable, status: ProcessingStatus, log: Logger | undefined): Promise<ProcessingStatus | null> {
  if (await writesStatus(db, status, log)) return status;
  return status === "failed" ? "pending" : null;
}

async function writeProcessingStatus(
  db: Queryable,
  bookId: string,
  status: ProcessingStatus,
  outcome: IngestionOutcome,
  column: ProcessingStatus | null,
): Promise<boolean> {
  // The status is bound twice: once for the frontend's column, whose type may be an enum of its own
  // (bound as `pending`, never written, when the column gets nothing), and once as text for our table.
  const rows = await db.query(
    `WITH target AS (
       SELECT id, processing_status::text = 'completed' AS completed FROM books WHERE id = $1
     ), book AS (
       UPDATE books b SET processing_status = $2 FROM target
       WHERE b.id = target.id AND $7::boolean AND (NOT target.completed OR $3::text = 'completed')
       RETURNING b.id
     ), record AS (
       INSERT INTO book_ingestions (book_id, attempts, last_error, chunk_count, completed_job_id, started_at, finished_at)
       SELECT id, CASE WHEN $3::text = 'processing' THEN 1 ELSE 0 END, $4::text, $5::integer, $6::text,
              CASE WHEN $3::text = 'processing' THEN now() END,
              CASE WHEN $3::text IN ('completed', 'failed') THEN now() END
       FROM target
       ON CONFLICT (book_id) DO UPDATE SET
         attempts = book_ingestions.attempts + EXCLUDED.attempts,
         last_error = EXCLUDED.last_error,
         chunk_count = COALESCE(EXCLUDED.chunk_count, book_ingestions.chunk_count),
         completed_job_id = COALESCE(EXCLUDED.completed_job_id, book_ingestions.completed_job_id),
         started_at = COALESCE(EXCLUDED.started_at, book_ingestions.started_at),
         finished_at = EXCLUDED.finished_at,
         updated_at = now()
     )
     SELECT id FROM target`,
    [bookId, column ?? "pending", status, outcome.error ?? null, outcome.chunkCount ?? null, outcome.jobId ?? null, column !== null],
  );
  return rows.length > 0;
}

/**
 * Clears the error recorded for a book after the job that completed it (a returned lease of a job
 * that had in fact finished), so a completed book reports no stale failure. A no-op otherwise.
 */
export async function clearStaleIngestionError(db: Queryable, bookId: string, jobId: string): Promise<void> {
  if (!isUuid(bookId)) return;
  await db.query(
    "UPDATE book_ingestions SET last_error = NULL, updated_at = now() WHERE book_id = $1 AND completed_job_id = $2 AND last_error IS NOT NULL",
    [bookId, jobId],
  );
}

/** Our record of a book's ingestion, or null before its first run. */
export async function getIngestion(db: Queryable, bookId: string): Promise<BookIngestion | null> {
  if (!isUuid(bookId)) return null;
  const [row] = await db.query<BookIngestionRow>("SELECT * FROM book_ingestions WHERE book_id = $1", [bookId]);
  return row ? camelize(row) : null;
}
