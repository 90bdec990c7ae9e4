import { join } from "node:path";
import { DatabaseError, type Queryable } from "../common/db/index.ts";
import { getBook, recordBookSource } from "../common/db/books.ts";
import { sha256OfFile } from "../common/hash.ts";
import { FRONTEND_WRITES_FLAG, frontendWritesAllowed, insertBook } from "../common/db/frontend-rows.ts";
import { runPipeline, type PipelineDeps, type PipelineResult } from "./pipeline.ts";

/**
 * The sample story that ships with the project (an original text written for it), and the seeding
 * that ingests it so that `npm start` on an empty database has something to chat with.
 */

export const SAMPLE_BOOK = {
  /** Fixed, so a first run cut short (Ctrl-C during ingestion) is recognised and resumed at the next start. */
  id: "5a3b1e00-0000-4000-8000-000000000001",
  title: "The Mending Room",
  author: "Sample story of this project",
  description: "A bookbinder, her apprentice and a rare-book dealer with a water-damaged diary. An original short story.",
  path: join(import.meta.dir, "sample", "the-mending-room.txt"),
  /** Asked in the printed curl: every speaking character has lines about it. */
  question: "What did you find hidden in the diary?",
} as const;

export type SeedOutcome =
  /** Ingested now (first run, or a first run that was interrupted). */
  | { status: "ingested"; result: PipelineResult }
  /** Ingested at an earlier start. */
  | { status: "present" }
  /** The database already holds other books (or another process is seeding it): left untouched. */
  | { status: "skipped"; reason: string };

async function countBooks(db: Queryable): Promise<number> {
  const [row] = await db.query<{ n: number }>("SELECT count(*) AS n FROM books");
  return row?.n ?? 0;
}

/**
 * Registers and ingests the sample story in this process, but only in a database without books,
 * and on a database shared with the frontend only when asked to (writeFrontendTables): a database
 * that already has any book is never written to. A sample registered at an earlier start and
 * not completed (the process stopped mid-ingestion) is ingested again; ingestion is idempotent.
 */
export async function seedSampleBook(deps: PipelineDeps, options: { signal?: AbortSignal; writeFrontendTables?: boolean } = {}): Promise<SeedOutcome> {
  const { db } = deps;
  const existing = await getBook(db, SAMPLE_BOOK.id);
  if (existing?.processingStatus === "completed") return { status: "present" };
  if (!existing) {
    if (!frontendWritesAllowed(db, options.writeFrontendTables)) {
      return { status: "skipped", reason: `the database is shared with the frontend (pass ${FRONTEND_WRITES_FLAG} to add the sample story)` };
    }
    const books = await countBooks(db);
    if (books > 0) return { status: "skipped", reason: `the database already has ${books} book${books === 1 ? "" : "s"}` };
    try {
      await insertBook(db, {
        id: SAMPLE_BOOK.id,
        title: SAMPLE_BOOK.title,
        author: SAMPLE_BOOK.author,
        description: SAMPLE_BOOK.description,
        language: "English",
        filePath: SAMPLE_BOOK.path,
      });
      // So that `npm run ingest` of the same file updates the sample instead of copying it.
      await recordBookSource(db, SAMPLE_BOOK.id, await sha256OfFile(SAMPLE_BOOK.path));
    } catch (err) {
      if (err instanceof DatabaseError && err.code === "unique_violation") return { status: "skipped", reason: "another process is seeding it" };
      throw err;
    }
  }
  const result = await runPipeline(deps, { bookId: SAMPLE_BOOK.id, source: { path: SAMPLE_BOOK.path } }, options.signal ? { signal: options.signal } : {});
  return { status: "ingested", result };
}
