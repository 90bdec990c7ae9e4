import type { Deps } from "../../common/deps-assembly.ts";
import { getBook } from "../../common/db/books.ts";
import { FileUrlError, checkFileUrlSyntax } from "../../common/file-url.ts";
import { enqueueJob } from "../../common/queue.ts";
import type { ProcessingAccepted, ProcessingRequest } from "../../common/contract/schemas.ts";
import { StoreUnavailableError, UnusableInputError } from "../service-errors.ts";

export type ProcessingDeps = Pick<Deps, "db" | "kv" | "metrics" | "logger" | "probeBook">;

/**
 * Validates a book submission the way the worker will need it and queues it. Cheap checks come
 * first so that a bad request costs no download: URL syntax and extension, then the books row, then
 * the download itself.
 */
export async function submitBook(deps: ProcessingDeps, request: ProcessingRequest): Promise<ProcessingAccepted> {
  try {
    checkFileUrlSyntax(request.file_url);
  } catch (err) {
    if (err instanceof FileUrlError) throw new UnusableInputError(err.message);
    throw err;
  }

  const book = await getBook(deps.db, request.book_id).catch((err: unknown) => {
    throw new StoreUnavailableError("database unavailable", { cause: err });
  });
  if (!book) throw new UnusableInputError("book not found");

  try {
    await deps.probeBook(request.file_url);
  } catch (err) {
    if (err instanceof FileUrlError) throw new UnusableInputError(err.message, { cause: err });
    throw err;
  }

  const { job, depth } = await enqueueJob(deps.kv, request).catch((err: unknown) => {
    throw new StoreUnavailableError("queue unavailable", { cause: err });
  });
  deps.metrics.processing.jobsQueued.inc();
  deps.metrics.processing.queueDepth.set(depth);
  deps.logger.info("book queued", { book_id: job.book_id, job_id: job.job_id, queue_depth: depth });
  return { status: "accepted", job_id: job.job_id, data: { book_id: job.book_id, job, queued: true } };
}
