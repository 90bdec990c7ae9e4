/**
 * How an ingestion fails, for the worker and the CLI to tell apart: a book that cannot be ingested as
 * it is (retrying would not help) from a model that is down (the job is retried later).
 */

/** The book cannot be ingested as it is; it has been marked `failed` (when it exists). */
export class BookRejectedError extends Error {
  constructor(
    readonly bookId: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`book ${bookId} rejected: ${reason}`, options);
    this.name = "BookRejectedError";
  }
}

/** The frontend deleted the book while it was being ingested: the job stops and nothing of it stays. */
export class BookDeletedError extends BookRejectedError {
  constructor(bookId: string) {
    super(bookId, "the book was deleted during ingestion");
    this.name = "BookDeletedError";
  }
}

/** A whole pass failed for every item: the model is down, not one character bad. Retried as a job. */
export class PassUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PassUnavailableError";
  }
}
