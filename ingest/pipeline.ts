import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { readingPositionsCacheKey } from "../common/contract/cache-keys.ts";
import { saveBookReadingPositions } from "../common/db/reading-positions.ts";
import { getBook } from "../common/db/books.ts";
import { setProcessingStatus } from "../common/db/ingestions.ts";
import { type Book } from "../common/contract/rows.ts";
import { observePhase, type PipelinePhase } from "../common/metrics/processing.ts";
import { attemptedCheckpoints, checkpointBudget } from "./characters/checkpoints.ts";
import type { ShingleIndex } from "../common/spoiler-guard/shingles.ts";
import { buildShingleIndex } from "./spoiler-guard/shingles.ts";
import { guardCharacters } from "./spoiler-guard/people.ts";
import { saveSpoilerGuard } from "../common/db/spoiler-guards.ts";
import { removeIndexesAndBackups } from "./book-removal.ts";
import { BookDeletedError, BookRejectedError } from "./errors.ts";
import { prepareIndex, writeIndex, type IndexOptions, type IndexReport } from "./phases/indexing.ts";
import { extractProfiles, writePersonas, type SavedCharacter } from "./phases/character-passes.ts";
import { admitNames, findCharacters } from "./phases/book-nlp/phase.ts";
import type { NamedPerson } from "./phases/book-nlp/thread.ts";
import { createRun, forgetCached, type PipelineDeps, type PipelineJob, type PipelineOptions, type Run, type SkipKind } from "./phases/pipeline-run.ts";
import { download, inLanguageOfText, readBookText } from "./phases/source.ts";

/**
 * One book from its books row to `completed`: verify → download → text → booknlp → extract → prompt
 * → index → guard, each phase timed (common/metrics/processing.ts, PIPELINE_PHASES).
 *
 * Errors come in two kinds. A book that cannot be ingested as it is (no books row, a file that cannot
 * be downloaded or is not text, text the NLP step cannot analyse) throws BookRejectedError after the
 * book is marked `failed` with the reason: retrying would not help. Anything else (a database, store
 * or model that is down) propagates as is, so the worker can retry the job later (ingest/errors.ts).
 *
 * This file only orders the phases, times them and keeps the book's status; each phase's work is in
 * ingest/phases/: source.ts (download, decode, the work's text and language), nlp.ts (booknlp: the
 * characters found), character-passes.ts (extract and prompt, then the characters saved); the index
 * is ingest/phases/indexing.ts, which takes its own dependencies and options rather than a run.
 */

export type { PipelineDeps, PipelineJob, PipelineOptions, ProgressEvent } from "./phases/pipeline-run.ts";

/**
 * Below this many cores the index preparation starts once the NLP step has ended instead of beside
 * it: on two cores the two contend, and the NLP step is on the book's critical path while the index
 * preparation is not (it then runs while the character passes wait on the model). It costs time only
 * when the passes are shorter than the index preparation, which a real model's calls (seconds each)
 * do not allow. The measurements are in BENCHMARKS.md ("What the numbers led to").
 */
export const MIN_CORES_FOR_INDEX_BESIDE_NLP = 3;

export interface PipelineResult {
  bookId: string;
  characters: SavedCharacter[];
  /** Checkpoint profiles and personas written, and the checkpoint passes that failed (spoiler-safe chat). */
  checkpoints: { written: number; failed: number };
  index: IndexReport;
  skipped: Partial<Record<SkipKind, number>>;
  /** Seconds per phase. */
  durations: Partial<Record<PipelinePhase, number>>;
}

/** Between phases: a book deleted meanwhile stops the job before it writes more. */
async function stillThere(run: Run): Promise<void> {
  if (!(await getBook(run.deps.db, run.job.bookId))) throw new BookDeletedError(run.job.bookId);
}

/** The indexes and persona backups of a deleted book (its characters went with its row). */
async function removeWhatWasWritten(run: Run): Promise<void> {
  const failed = await removeIndexesAndBackups(run.deps, run.job.bookId);
  if (failed.length > 0) run.log.error("the book was deleted during ingestion; some of what it wrote could not be removed", { errors: failed });
  else run.log.warn("the book was deleted during ingestion; the job stopped and its indexes and persona backups were removed");
}

export async function runPipeline(deps: PipelineDeps, job: PipelineJob, options: PipelineOptions = {}): Promise<PipelineResult> {
  const run = createRun(deps, job, options);
  const { log, skipped } = run;
  const durations: PipelineResult["durations"] = {};
  const record = (phase: PipelinePhase, seconds: number) => {
    durations[phase] = seconds;
    observePhase(deps.metrics, phase, seconds);
  };
  const timed = async <T>(phase: PipelinePhase, fn: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      return await fn();
    } finally {
      record(phase, (performance.now() - started) / 1000);
    }
  };

  return timed("total", async () => {
    const registered = await verifyBook(run);
    const workDir = await mkdtemp(join(options.workDir ?? tmpdir(), `ingest-${job.bookId}-`));
    try {
      const downloaded = await timed("download", () => download(run, workDir));
      const { text, textPath, book } = await timed("text", async () => {
        run.progress("text", 0, 1);
        const read = await readBookText(run, downloaded, workDir);
        const book = inLanguageOfText(run, registered, read.text);
        run.progress("text", 1, 1);
        return { ...read, book };
      });
      await stillThere(run);
      const checkpointSetting = options.characterCheckpoints ?? deps.config.characterCheckpoints;
      // The index needs only the text: it is chunked and embedded while the characters are found and
      // written (on a small machine, once they are found), and reaches the indexes only once they are
      // saved (see ingest/phases/indexing.ts).
      let prepareSeconds = 0;
      let shingleSeconds = 0;
      // Only the NLP engine or BookNLP competes for the cores; discovery (other languages) waits on the model.
      const waitForNlp = book.language === "English" && (options.indexAfterNlp ?? availableParallelism() < MIN_CORES_FOR_INDEX_BESIDE_NLP);
      const nlpEnded = Promise.withResolvers<void>();
      const [{ characters, written, items, people }, { prepared, shingles }] = await sideBySide(
        run,
        async (branch) => {
          const { characters: extracted, people } = await timed("booknlp", () => findCharacters(branch, book, text, textPath, workDir)).finally(() => nlpEnded.resolve());
          deps.metrics.processing.charactersExtracted.inc(extracted.length);
          const found = admitNames(branch, extracted);
          await stillThere(branch);
          const items = await timed("extract", () => extractProfiles(branch, book, text, found, checkpointBudget(checkpointSetting, found.length)));
          await stillThere(branch);
          const saved = await timed("prompt", () => writePersonas(branch, book, text, found, items));
          deps.metrics.processing.charactersProcessed.inc({ status: "completed" }, saved.characters.length);
          return { ...saved, items, people };
        },
        async (branch) => {
          // The guard's passages need only the text: they are built while the NLP thread works, when
          // this thread has nothing else to do (on a small machine the index preparation waits).
          const shingleStarted = performance.now();
          const shingles = buildShingleIndex(text);
          shingleSeconds = (performance.now() - shingleStarted) / 1000;
          if (waitForNlp) await nlpEnded.promise;
          const started = performance.now();
          const prepared = await prepareIndex(deps, text, join(workDir, "index-spool"), indexOptions(branch));
          prepareSeconds = (performance.now() - started) / 1000;
          return { prepared, shingles };
        },
      );
      await stillThere(run);
      // The index (its stores) and the guard (the database) are written at once: neither waits on the other.
      const since = (started: number) => (performance.now() - started) / 1000;
      const writeStarted = performance.now();
      const [indexWritten, guardWritten] = await Promise.allSettled([
        writeIndex(deps, job.bookId, prepared, indexOptions(run)).then(async (index) => {
          const checkpoints = attemptedCheckpoints(checkpointSetting > 1, items.flatMap((i) => i.at ?? []));
          await saveBookReadingPositions(deps.db, job.bookId, { chunkEnds: index.chunkEnds, checkpoints });
          // The index phase's own work, both stages: the first ran beside the others, so the phases add up to more than the total.
          record("index", prepareSeconds + since(writeStarted));
          return index;
        }),
        // Like the index, the guard's passages were built beside the other phases.
        saveGuard(run, text, characters, people, shingles).then(() => record("guard", shingleSeconds + since(writeStarted))),
      ]);
      // Both have ended before a failure of either fails the job: nothing of it writes on after. A
      // write refused because the book was deleted meanwhile is that deletion; a database that cannot
      // even say so leaves the write's own failure to report.
      if (indexWritten.status === "rejected" || guardWritten.status === "rejected") {
        await stillThere(run).catch((err: unknown) => {
          if (err instanceof BookDeletedError) throw err;
        });
      }
      if (indexWritten.status === "rejected") throw indexWritten.reason;
      if (guardWritten.status === "rejected") throw guardWritten.reason;
      const index = indexWritten.value;
      const completed = await setProcessingStatus(deps.db, job.bookId, "completed", { chunkCount: index.chunks, ...(job.jobId ? { jobId: job.jobId } : {}) }, log);
      if (!completed) throw new BookDeletedError(job.bookId);
      await forgetCached(run, [readingPositionsCacheKey(job.bookId)]);
      const attempted = items.filter((i) => i.at !== undefined).length;
      const checkpointReport = { written, failed: attempted - written };
      log.info("book ingested", { characters: characters.length, chunks: index.chunks, checkpoints: `${written} written, ${attempted - written} failed`, skipped });
      return { bookId: job.bookId, characters, checkpoints: checkpointReport, index, skipped, durations };
    } catch (err) {
      if (err instanceof BookDeletedError) {
        await removeWhatWasWritten(run);
      } else if (err instanceof BookRejectedError) {
        log.error("book failed", { reason: err.reason, cause: err.cause });
        await setProcessingStatus(deps.db, job.bookId, "failed", { error: err.reason }, log);
      }
      throw err;
    } finally {
      await rm(workDir, { recursive: true, force: true });
    }
  });
}

/** What the chat's spoiler guard checks replies against (api/chat/spoiler-filter.ts): the book's passages (built beside the other phases) and its characters' names (common/spoiler-guard/people.ts). */
async function saveGuard(run: Run, text: string, characters: readonly SavedCharacter[], people: readonly NamedPerson[], shingles: ShingleIndex): Promise<void> {
  run.progress("guard", 0, 1);
  const guarded = guardCharacters(text, characters.map((c) => c.character), people);
  const encoded = shingles.encode();
  await saveSpoilerGuard(run.deps.db, run.job.bookId, { characters: guarded, shingles: encoded });
  run.progress("guard", 1, 1);
  run.log.info("spoiler guard written", { shingles: shingles.size, window: shingles.window, stored_bytes: encoded.length });
}

async function verifyBook(run: Run): Promise<Book> {
  const book = await getBook(run.deps.db, run.job.bookId);
  if (!book) throw new BookRejectedError(run.job.bookId, "book not found");
  await setProcessingStatus(run.deps.db, book.id, "processing", {}, run.log);
  return book;
}

function indexOptions(run: Run): IndexOptions {
  return {
    ...run.options.index,
    retry: run.retry,
    ...(run.signal ? { signal: run.signal } : {}),
    onSkip: (kind, store, chunkIndexes, err) => run.skip(kind, err, { store, chunks: chunkIndexes.join(",") }),
    onProgress: (done, total) => run.progress("index", done, total),
  };
}

/**
 * Runs two branches of a job at once. When one fails the other is stopped (its signal aborted) and
 * awaited, so nothing of it runs on after the job, and the job fails with the first failure.
 */
async function sideBySide<A, B>(run: Run, first: (branch: Run) => Promise<A>, second: (branch: Run) => Promise<B>): Promise<[A, B]> {
  const stop = new AbortController();
  const signal = run.signal ? AbortSignal.any([run.signal, stop.signal]) : stop.signal;
  const branch: Run = { ...run, signal, retry: { ...run.retry, signal } };
  let failure: { error: unknown } | undefined;
  const guarded = <T>(work: Promise<T>) =>
    work.catch((error: unknown) => {
      failure ??= { error };
      stop.abort(error);
      throw error;
    });
  const [a, b] = await Promise.allSettled([guarded(first(branch)), guarded(second(branch))]);
  if (failure) throw failure.error;
  return [(a as PromiseFulfilledResult<A>).value, (b as PromiseFulfilledResult<B>).value];
}
