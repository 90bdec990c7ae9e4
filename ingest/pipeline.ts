import { copyFile, mkdir, mkdtemp, open, readFile, rm, stat, writeFile } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import type { BookInfo } from "../common/prompt/character.ts";
import type { Config } from "../common/config.ts";
import { DatabaseError, type Database } from "../common/db/index.ts";
import { characterCacheKey, knowledgeCacheKey, readingPositionsCacheKey } from "../common/session/cache.ts";
import type { KeyValueStore } from "../common/kv/index.ts";
import { saveBookReadingPositions, saveCharacterKnowledge, type CharacterCheckpoint } from "../common/db/reading-positions.ts";
import type { Book, Character } from "../common/contract/rows.ts";
import { getBook } from "../common/db/books.ts";
import { setProcessingStatus } from "../common/db/ingestions.ts";
import { listPersonas, saveCharacters, type CharacterInput, type SavedCharacters } from "../common/db/characters.ts";
import { DEFAULT_DOWNLOAD_TIMEOUT_MS, downloadBook, FileUrlError, type DownloadOptions, type ResolveHost } from "../common/file-url.ts";
import type { LanguageModel } from "../common/llm/index.ts";
import type { Logger, LogFields } from "../common/log.ts";
import type { Metrics } from "../common/metrics/index.ts";
import { observePhase, type PipelinePhase } from "../common/metrics/processing.ts";
import { checkpointPositions } from "../common/prompt/reading-position.ts";
import type { TextIndex } from "../common/text/index.ts";
import { decodeBookBytes } from "../common/text-decoding.ts";
import { withRetries } from "../common/upstream.ts";
import type { VectorIndex } from "../common/vector/index.ts";
import { writeBackups } from "./backups.ts";
import { removeIndexesAndBackups } from "./book-removal.ts";
import { extractWork, hasProse } from "./book-text.ts";
import { createGate } from "./gate.ts";
import { NlpError, runBookNlpCommand, runInThread } from "./nlp-step.ts";
import { checkCharacterName, cleanAliases } from "./character-names.ts";
import { createTextLocator, firstMention, knownAt, placeCharacter } from "./checkpoints.ts";
import { characterStyle, describe, mergeDiscoveries, type FoundCharacter, type SampledDiscovery, type SelectionOptions } from "./characters.ts";
import { DEFAULT_DISCOVERY_SAMPLES, DEFAULT_SAMPLES_PER_CALL, discoverInSamples, discoveryCalls, sampleText } from "./discovery.ts";
import { prepareIndex, writeIndex, type IndexOptions, type IndexReport } from "./indexing.ts";
import { detectScript, fitLanguage } from "./text-script.ts";
import type { NlpTask } from "./nlp-thread.ts";
import { extractProfile, writePersona } from "./profiles.ts";
import { DEFAULT_ITEM_RETRIES, DEFAULT_ITEM_RETRY_BASE_DELAY_MS, mapBounded, retryItem, type ItemRetryOptions } from "./work-items.ts";

/**
 * One book from its books row to `completed`: verify → download → booknlp → extract → prompt →
 * index, each phase timed in processing_pipeline_duration_seconds{phase}.
 *
 * Errors come in two kinds. A book that cannot be ingested as it is (no books row, a file that cannot
 * be downloaded or is not text, text the NLP step cannot analyse) throws BookRejectedError after the
 * book is marked `failed` with the reason: retrying would not help. Anything else (a database, store
 * or model that is down) propagates as is, so the worker can retry the job later.
 */

export const BOOK_FILE_NAME = "original.txt";
/** The work cut out of it, decoded to UTF-8 with LF line endings. */
export const WORK_FILE_NAME = "work.txt";
/** Transient download failures get this many further tries. */
export const DOWNLOAD_RETRIES = 2;
/**
 * Below this many cores the index preparation starts once the NLP step has ended instead of beside
 * it. On two cores the two contend (War and Peace's NLP step: 1.36 s alone, 2.1–2.3 s beside the
 * chunking), and the NLP step is on the book's critical path while the index preparation is not: it
 * then runs while the character passes wait on the model. With 300 ms per model call and four
 * checkpoints the book takes 4.27 s instead of 4.92; when the passes are shorter than the index
 * preparation it costs time instead (a model that answers at once: 3.70 s instead of 3.21; one
 * checkpoint: 3.61 instead of 3.31). A real model's calls take seconds, so the passes are long.
 */
export const MIN_CORES_FOR_INDEX_BESIDE_NLP = 3;

export interface PipelineDeps {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  db: Database;
  /** Only to drop the chat cache's copies of the characters this run rewrites. */
  kv: KeyValueStore;
  llm: LanguageModel;
  vectorIndex: VectorIndex;
  textIndex: TextIndex;
}

/** Where the book's text comes from: the job's file_url, or a local file (the CLI). */
export type BookSource = { url: string } | { path: string };

export interface PipelineJob {
  bookId: string;
  source: BookSource;
  jobId?: string;
}

export type SkipKind = "character" | "embedding_batch" | "chunk_batch" | "discovery_batch";

export interface ProgressEvent {
  phase: Exclude<PipelinePhase, "total">;
  done: number;
  /** 0 when unknown (a download without Content-Length). */
  total: number;
}

export interface PipelineOptions {
  signal?: AbortSignal;
  /** Parent of the per-book temporary folder; the system's temp folder by default. */
  workDir?: string;
  selection?: SelectionOptions;
  /** Overrides the configured CHARACTER_CONCURRENCY. */
  characterConcurrency?: number;
  retries?: number;
  retryBaseDelayMs?: number;
  index?: { batchSize?: number; concurrency?: number; chunkTokens?: number };
  /**
   * Start the index preparation only once the NLP step has found the characters (English books, whose
   * NLP runs here); by default when the machine has fewer than MIN_CORES_FOR_INDEX_BESIDE_NLP cores.
   */
  indexAfterNlp?: boolean;
  discovery?: { samples?: number; samplesPerCall?: number };
  downloadTimeoutMs?: number;
  /** Overrides the configured CHARACTER_CHECKPOINTS. */
  characterCheckpoints?: number;
  /** Overrides DEFAULT_MIN_DOWNLOAD_BYTES_PER_SECOND and its grace period (common/file-url.ts). */
  downloadMinRate?: { bytesPerSecond: number; graceMs: number };
  booknlpTimeoutMs?: number;
  /** For tests: the fetch and DNS the download uses. */
  fetch?: DownloadOptions["fetch"];
  resolveHost?: ResolveHost;
  onProgress?: (event: ProgressEvent) => void;
}

export interface SavedCharacter {
  character: Character;
  backupPath: string;
}

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

/** A whole pass failed for every item: the model is down, not one character bad. Retried as a job. */
export class PassUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PassUnavailableError";
  }
}

interface Run {
  deps: PipelineDeps;
  job: PipelineJob;
  log: Logger;
  signal: AbortSignal | undefined;
  options: PipelineOptions;
  retry: ItemRetryOptions;
  skipped: Partial<Record<SkipKind, number>>;
  skip(kind: SkipKind, err: unknown, fields: LogFields): void;
  progress(phase: ProgressEvent["phase"], done: number, total: number): void;
}

export async function runPipeline(deps: PipelineDeps, job: PipelineJob, options: PipelineOptions = {}): Promise<PipelineResult> {
  const log = deps.logger.child({ book_id: job.bookId, ...(job.jobId ? { job_id: job.jobId } : {}) });
  const skipped: Partial<Record<SkipKind, number>> = {};
  const run: Run = {
    deps,
    job,
    log,
    signal: options.signal,
    options,
    retry: {
      retries: options.retries ?? DEFAULT_ITEM_RETRIES,
      baseDelayMs: options.retryBaseDelayMs ?? DEFAULT_ITEM_RETRY_BASE_DELAY_MS,
      ...(options.signal ? { signal: options.signal } : {}),
    },
    skipped,
    skip(kind, err, fields) {
      skipped[kind] = (skipped[kind] ?? 0) + 1;
      deps.metrics.processing.itemsSkipped.inc({ kind });
      log.warn("item skipped after retries", { kind, ...fields, error: err });
    },
    progress: (phase, done, total) => options.onProgress?.({ phase, done, total }),
  };
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
      const { text, textPath } = await readBookText(run, downloaded, workDir);
      const book = inLanguageOfText(run, registered, text);
      await stillThere(run);
      const checkpoints = checkpointPositions(options.characterCheckpoints ?? deps.config.characterCheckpoints);
      // The index needs only the text: it is chunked and embedded while the characters are found and
      // written (on a small machine, once they are found), and reaches the indexes only once they are
      // saved (see ingest/indexing.ts).
      let prepareSeconds = 0;
      // Only the NLP engine or BookNLP competes for the cores; discovery (other languages) waits on the model.
      const waitForNlp = book.language === "English" && (options.indexAfterNlp ?? availableParallelism() < MIN_CORES_FOR_INDEX_BESIDE_NLP);
      const nlpEnded = Promise.withResolvers<void>();
      const [{ characters, written, items }, prepared] = await sideBySide(
        run,
        async (branch) => {
          const extracted = await timed("booknlp", () => findCharacters(branch, book, text, textPath, workDir)).finally(() => nlpEnded.resolve());
          deps.metrics.processing.charactersExtracted.inc(extracted.length);
          const found = admitNames(branch, extracted);
          await stillThere(branch);
          const items = await timed("extract", () => extractProfiles(branch, book, text, found, checkpoints));
          await stillThere(branch);
          const saved = await timed("prompt", () => writePersonas(branch, book, text, found, items));
          deps.metrics.processing.charactersProcessed.inc({ status: "completed" }, saved.characters.length);
          return { ...saved, items };
        },
        async (branch) => {
          if (waitForNlp) await nlpEnded.promise;
          const started = performance.now();
          const prepared = await prepareIndex(deps, text, join(workDir, "index-spool"), indexOptions(branch));
          prepareSeconds = (performance.now() - started) / 1000;
          return prepared;
        },
      );
      await stillThere(run);
      const writeStarted = performance.now();
      const index = await writeIndex(deps, job.bookId, prepared, indexOptions(run));
      // The index phase's own work, both stages: the first ran beside the others, so the phases add up to more than the total.
      record("index", prepareSeconds + (performance.now() - writeStarted) / 1000);
      await saveBookReadingPositions(deps.db, job.bookId, { chunkEnds: index.chunkEnds, checkpoints });
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

function bookInfo(book: Book): BookInfo {
  return { title: book.title, author: book.author };
}

async function verifyBook(run: Run): Promise<Book> {
  const book = await getBook(run.deps.db, run.job.bookId);
  if (!book) throw new BookRejectedError(run.job.bookId, "book not found");
  await setProcessingStatus(run.deps.db, book.id, "processing", {}, run.log);
  return book;
}

// download ----------------------------------------------------------------------------------------

/** A connection that failed is tried again; a server that had its whole deadline, or sent too slowly, is not. */
const transientDownload = (err: unknown) => err instanceof FileUrlError && err.reason === "unreachable";

async function download(run: Run, workDir: string): Promise<string> {
  const { config } = run.deps;
  const target = join(workDir, BOOK_FILE_NAME);
  const source = run.job.source;
  if ("path" in source) {
    const { size } = await stat(source.path);
    if (size > config.maxBookBytes) throw new BookRejectedError(run.job.bookId, `file is larger than ${config.maxBookBytes} bytes`);
    await copyFile(source.path, target);
    run.progress("download", size, size);
    return target;
  }
  try {
    await withRetries(
      async () => {
        const file = await open(target, "w");
        let received = 0;
        try {
          await downloadBook(source.url, {
            allowedHosts: config.fileUrlAllowedHosts,
            maxBytes: config.maxBookBytes,
            timeoutMs: run.options.downloadTimeoutMs ?? DEFAULT_DOWNLOAD_TIMEOUT_MS,
            ...(run.options.downloadMinRate
              ? { minBytesPerSecond: run.options.downloadMinRate.bytesPerSecond, rateGraceMs: run.options.downloadMinRate.graceMs }
              : {}),
            ...(run.signal ? { signal: run.signal } : {}),
            ...(run.options.fetch ? { fetch: run.options.fetch } : {}),
            ...(run.options.resolveHost ? { resolveHost: run.options.resolveHost } : {}),
            onChunk: async (chunk) => {
              await file.write(chunk);
              received += chunk.byteLength;
              run.progress("download", received, 0);
            },
          });
        } finally {
          await file.close();
        }
      },
      { maxRetries: DOWNLOAD_RETRIES, baseDelayMs: run.retry.baseDelayMs, shouldRetry: transientDownload, ...(run.signal ? { signal: run.signal } : {}) },
    );
  } catch (err) {
    if (err instanceof FileUrlError) throw new BookRejectedError(run.job.bookId, `download failed: ${err.message}`, { cause: err });
    throw err;
  }
  return target;
}

/**
 * The work as every later phase reads it: the file decoded (see common/text-decoding.ts), its
 * Project Gutenberg wrapping and contents cut (see book-text.ts), written beside the download for
 * the NLP step, which reads a file. The download itself is kept as it came.
 */
async function readBookText(run: Run, path: string, workDir: string): Promise<{ text: string; textPath: string }> {
  const decoded = decodeBookBytes(await readFile(path));
  if (!decoded.ok) throw new BookRejectedError(run.job.bookId, decoded.reason);
  if (decoded.text.trim() === "") throw new BookRejectedError(run.job.bookId, "file is empty");
  const work = extractWork(decoded.text);
  if (!hasProse(work.text)) {
    const reason = work.stripped.length > 0 ? "no text of the work is left once the Project Gutenberg header, licence and contents are removed" : "file has no prose";
    throw new BookRejectedError(run.job.bookId, reason);
  }
  run.log.info("book text read", {
    encoding: decoded.encoding,
    characters: decoded.text.length,
    work: { start: work.start, end: work.end, characters: work.text.length },
    stripped: work.stripped.map((s) => `${s.what} ${s.start}-${s.end}`),
  });
  const textPath = join(workDir, WORK_FILE_NAME);
  await writeFile(textPath, work.text);
  return { text: work.text, textPath };
}

/** The book as the pipeline proceeds with it: in the language its text is written in when the two disagree. */
function inLanguageOfText(run: Run, book: Book, text: string): Book {
  const script = detectScript(text);
  const fit = fitLanguage(book.language, script.script);
  if (!fit.mismatch) return book;
  run.log.warn(fit.mismatch, { registered: book.language, ingested_as: fit.language, latin_letters: script.latin, arabic_letters: script.arabic });
  return { ...book, language: fit.language };
}

// booknlp -----------------------------------------------------------------------------------------

/** One book at a time in the NLP step per process, whatever the worker's concurrency. */
const nlpGate = createGate();

async function findCharacters(run: Run, book: Book, text: string, textPath: string, workDir: string): Promise<FoundCharacter[]> {
  if (book.language !== "English") return discover(run, book, text);
  return nlpGate.run(() => runBookNlp(run, book, textPath, workDir));
}

async function runBookNlp(run: Run, book: Book, textPath: string, workDir: string): Promise<FoundCharacter[]> {
  const selection = run.options.selection ?? {};
  const command = run.deps.config.booknlpCommand;
  run.progress("booknlp", 0, 1);
  try {
    let task: NlpTask = { kind: "native", textPath, selection };
    if (command) {
      const dir = join(workDir, "booknlp");
      await mkdir(dir);
      await runBookNlpCommand(command, textPath, dir, book.id, {
        ...(run.options.booknlpTimeoutMs ? { timeoutMs: run.options.booknlpTimeoutMs } : {}),
        ...(run.signal ? { signal: run.signal } : {}),
      });
      task = { kind: "files", textPath, dir, id: book.id, selection };
    }
    const found = await runInThread(task, run.signal);
    run.progress("booknlp", 1, 1);
    run.log.info("characters found", { engine: command ? "booknlp" : "native", characters: found.length });
    return found;
  } catch (err) {
    if (err instanceof NlpError) throw new BookRejectedError(book.id, `text could not be analysed: ${err.message}`, { cause: err });
    throw err;
  }
}

/** Books BookNLP cannot read: the model finds the characters in samples spread over the book. */
async function discover(run: Run, book: Book, text: string): Promise<FoundCharacter[]> {
  const samples = sampleText(text, run.options.discovery?.samples ?? DEFAULT_DISCOVERY_SAMPLES, run.options.index?.chunkTokens);
  const calls = discoveryCalls(samples, run.options.discovery?.samplesPerCall ?? DEFAULT_SAMPLES_PER_CALL);
  let done = 0;
  run.progress("booknlp", 0, calls.length);
  const answers = await mapBounded(calls, run.options.characterConcurrency ?? run.deps.config.characterConcurrency, async (call, i) => {
    try {
      return await retryItem(() => discoverInSamples(run.deps.llm, bookInfo(book), book.language, call, run.signal), run.retry);
    } catch (err) {
      if (run.signal?.aborted) throw err;
      run.skip("discovery_batch", err, { call: i, samples: call.length });
      return undefined;
    } finally {
      run.progress("booknlp", ++done, calls.length);
    }
  });
  const ok = answers.filter((a): a is SampledDiscovery => a !== undefined);
  if (calls.length > 0 && ok.length === 0) throw new PassUnavailableError("character discovery failed for every sample");
  const found = mergeDiscoveries(text, ok, run.options.selection);
  run.log.info("characters found", { engine: "llm discovery", language: book.language, characters: found.length });
  return found;
}

/** Characters whose names can be stored, cleaned; each refused one is skipped and counted, never the book. */
function admitNames(run: Run, found: readonly FoundCharacter[]): FoundCharacter[] {
  const admitted: FoundCharacter[] = [];
  const refuse = (reason: string, name: string) => {
    run.deps.metrics.processing.charactersProcessed.inc({ status: "failed" });
    run.skip("character", new Error(`name refused: ${reason}`), { character: name.length > 40 ? `${name.slice(0, 40)}…` : name });
  };
  for (const character of found) {
    const check = checkCharacterName(character.name);
    if (!check.ok) refuse(check.reason, character.name);
    else if (admitted.some((c) => c.name === check.name)) refuse("another character has the same name", check.name);
    else {
      admitted.push({ ...character, name: check.name, aliases: cleanAliases(check.name, character.aliases) });
    }
  }
  return admitted;
}

// extract and prompt ------------------------------------------------------------------------------

/**
 * One character as the passes see it: as of the whole book, or (spoiler-safe chat) as of a
 * checkpoint, fed only what comes before it.
 */
interface PassItem {
  character: FoundCharacter;
  /** The checkpoint's position; undefined for the whole book. */
  at?: number;
}

interface Profiled extends PassItem {
  profile: Awaited<ReturnType<typeof extractProfile>>;
}

/** The whole-book items, then each character as known at each checkpoint where the book has something of them before it. */
function passItems(text: string, found: readonly FoundCharacter[], checkpoints: readonly number[]): PassItem[] {
  const items: PassItem[] = found.map((character) => ({ character }));
  if (checkpoints.length === 0) return items;
  const locate = createTextLocator(text);
  const cast = found.map((c) => placeCharacter(c, locate, text.length));
  for (const at of checkpoints) {
    const cutoff = Math.floor(at * text.length);
    for (const placed of cast) {
      const character = knownAt(placed, cutoff, text, cast);
      if (character) items.push({ character, at });
    }
  }
  return items;
}

/**
 * Runs one LLM pass over the items with bounded concurrency (whole-book and checkpoint items share
 * one pool). A whole-book item that fails after its retries is skipped and counted; if every one
 * failed, the model is unavailable and the attempt fails. A checkpoint item that fails is only logged:
 * chat then uses an earlier checkpoint, never a later one, and the book does not fail for it.
 */
async function characterPass<T extends PassItem, R>(run: Run, phase: "extract" | "prompt", items: readonly T[], fn: (item: T) => Promise<R>): Promise<(R | undefined)[]> {
  let done = 0;
  let lastError: unknown;
  run.progress(phase, 0, items.length);
  const results = await mapBounded(items, run.options.characterConcurrency ?? run.deps.config.characterConcurrency, async (item) => {
    try {
      return await retryItem(() => fn(item), run.retry);
    } catch (err) {
      if (run.signal?.aborted) throw err;
      if (item.at !== undefined) {
        run.log.warn("checkpoint pass failed; chat falls back to an earlier checkpoint", { character: item.character.name, checkpoint: item.at, pass: phase, error: err });
        return undefined;
      }
      lastError = err;
      run.deps.metrics.processing.charactersProcessed.inc({ status: "failed" });
      run.skip("character", err, { character: item.character.name, pass: phase });
      return undefined;
    } finally {
      run.progress(phase, ++done, items.length);
    }
  });
  const whole = items.filter((item) => item.at === undefined).length;
  if (whole > 0 && !results.some((r, i) => r !== undefined && items[i]!.at === undefined)) {
    throw new PassUnavailableError(`the ${phase} pass failed for every character`, { cause: lastError });
  }
  return results;
}

async function extractProfiles(run: Run, book: Book, text: string, found: readonly FoundCharacter[], checkpoints: readonly number[]): Promise<Profiled[]> {
  const items = passItems(text, found, checkpoints);
  const profiles = await characterPass(run, "extract", items, (item) => extractProfile(run.deps.llm, bookInfo(book), item.character, run.signal));
  return items.flatMap((item, i) => (profiles[i] === undefined ? [] : [{ ...item, profile: profiles[i] }]));
}

async function writePersonas(
  run: Run,
  book: Book,
  text: string,
  found: readonly FoundCharacter[],
  profiled: readonly Profiled[],
): Promise<{ characters: SavedCharacter[]; written: number }> {
  const prompts = await characterPass(run, "prompt", profiled, (p) => writePersona(run.deps.llm, bookInfo(book), p.character, p.profile, run.signal));
  const personas = profiled.flatMap((p, i) => (prompts[i] === undefined ? [] : [{ ...p, systemPrompt: prompts[i] }]));
  const whole = personas.filter((p) => p.at === undefined);
  const rows = await storeCharacters(
    run,
    book.id,
    whole.map(({ character, profile, systemPrompt }) => ({
      name: character.name,
      aliases: character.aliases,
      description: describe(profile),
      profileJson: profile,
      systemPrompt,
      ...characterStyle(character.name),
      importance: character.importance,
    })),
    found.map((c) => c.name),
  );
  const checkpointsOf = new Map<string, CharacterCheckpoint[]>();
  for (const p of personas) {
    if (p.at === undefined) continue;
    const list = checkpointsOf.get(p.character.name) ?? [];
    list.push({ position: p.at, profileJson: p.profile, systemPrompt: p.systemPrompt });
    checkpointsOf.set(p.character.name, list);
  }
  const firstSeen = firstAppearances(text, found);
  await saveCharacterKnowledge(
    run.deps.db,
    rows.map((row) => ({ characterId: row.id, firstAppearance: firstSeen.get(row.name) ?? 0, checkpoints: checkpointsOf.get(row.name) ?? [] })),
  );
  await forgetCached(run, rows.flatMap((row) => [characterCacheKey(row.id), knowledgeCacheKey(row.id)]));
  // The backups are written from the rows once saved, so they are the rows' personas, no more and no
  // fewer: a character kept from an earlier run (its pass failed now, or it is retired for a reader's
  // sake) keeps its backup, and one the database refused gets none.
  const kept = await listPersonas(run.deps.db, book.id);
  const paths = await writeBackups(run.deps.config.systemPromptStoragePath, book.id, kept);
  const pathOf = new Map(kept.map((p, i) => [p.name, paths[i]!]));
  const written = rows.reduce((n, row) => n + (checkpointsOf.get(row.name)?.length ?? 0), 0);
  return { characters: rows.map((character) => ({ character, backupPath: pathOf.get(character.name)! })), written };
}

/** Where each character is first mentioned, as a position (0 when not found: shown rather than hidden). */
function firstAppearances(text: string, found: readonly FoundCharacter[]): Map<string, number> {
  const locate = createTextLocator(text);
  return new Map(found.map((c) => [c.name, (firstMention(c, locate) ?? 0) / Math.max(1, text.length)]));
}

/**
 * Saves the run's characters in one statement; should the database refuse it, one at a time, so a
 * row it refuses costs only its own character. A character whose pass failed this time (found, not
 * written) keeps what the previous run wrote for it, and its readers' sessions.
 */
async function storeCharacters(run: Run, bookId: string, inputs: CharacterInput[], foundNames: string[]): Promise<Character[]> {
  const { db, metrics } = run.deps;
  const options = { alsoFound: foundNames };
  let saved: SavedCharacters;
  try {
    saved = await saveCharacters(db, bookId, inputs, options);
  } catch (err) {
    if (!(err instanceof DatabaseError) || err.code === "connection") throw err;
    run.log.warn("the database refused the book's characters; saving them one at a time", { error: err });
    saved = { characters: [], retired: 0, removed: 0 };
    for (const input of inputs) {
      try {
        const one = await saveCharacters(db, bookId, [input], options);
        saved = { characters: [...saved.characters, ...one.characters], retired: one.retired, removed: saved.removed + one.removed };
      } catch (e) {
        if (!(e instanceof DatabaseError) || e.code === "connection") throw e;
        metrics.processing.charactersProcessed.inc({ status: "failed" });
        run.skip("character", new Error(`the database refused the character (${e.code})`), { character: input.name });
      }
    }
  }
  if (saved.retired > 0 || saved.removed > 0) {
    run.log.info("characters no longer found", { kept_for_readers: saved.retired, removed: saved.removed });
  }
  return saved.characters;
}

/** Chat caches characters, their checkpoints and the book's positions for an hour; a re-ingestion must reach the next chat turn. */
async function forgetCached(run: Run, keys: readonly string[]): Promise<void> {
  const results = await Promise.allSettled(keys.map((key) => run.deps.kv.del(key)));
  if (results.some((r) => r.status === "rejected")) {
    run.log.warn("could not drop cached characters or positions; chat may serve the old ones for up to an hour", { book_id: run.job.bookId });
  }
}

// index -------------------------------------------------------------------------------------------

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
