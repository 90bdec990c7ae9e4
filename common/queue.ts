import type { KeyValueStore } from "./kv/index.ts";
import { JobRecord } from "./schemas.ts";

/**
 * The book processing queue: a Redis list. Producers LPUSH on the left; workers take from the right,
 * so jobs run in the order they were submitted.
 */

export const PROCESSING_QUEUE = "processing_queue";

export interface NewJob {
  book_id: string;
  file_url: string;
  user_id: string;
}

export interface EnqueueOptions {
  now?: () => Date;
  newId?: () => string;
}

/** Pushes a job record and returns it with the queue depth after the push. */
export async function enqueueJob(kv: KeyValueStore, job: NewJob, options: EnqueueOptions = {}): Promise<{ job: JobRecord; depth: number }> {
  const record: JobRecord = {
    job_id: options.newId?.() ?? crypto.randomUUID(),
    book_id: job.book_id,
    file_url: job.file_url,
    user_id: job.user_id,
    enqueued_at: (options.now?.() ?? new Date()).toISOString(),
  };
  const depth = await kv.lpush(PROCESSING_QUEUE, JSON.stringify(record));
  return { job: record, depth };
}

/** Parses a queued entry; null for anything that is not a job record (it is dead-lettered by the worker). */
export function parseJob(raw: string): JobRecord | null {
  try {
    const parsed = JobRecord.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
