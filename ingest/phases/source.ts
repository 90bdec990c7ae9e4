import { copyFile, open, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Book } from "../../common/contract/rows.ts";
import { DEFAULT_DOWNLOAD_TIMEOUT_MS, downloadBook, FileUrlError } from "../../common/file-url.ts";
import { decodeBookBytes } from "../../common/text-decoding.ts";
import { withRetries } from "../../common/upstream.ts";
import { extractWork, hasProse } from "../book/book-text.ts";
import { BookRejectedError } from "../errors.ts";
import { languageEvidence, notLanguage } from "../book/text-language.ts";
import { detectScript, fitLanguage } from "../book/text-script.ts";
import type { Run } from "./pipeline-run.ts";

/** The book's text: downloaded (or copied from a local file), decoded, cut to the work, and the language it is written in. */

/** The file as downloaded (or copied), kept as it came. */
export const BOOK_FILE_NAME = "original.txt";
/** The work cut out of it, decoded to UTF-8 with LF line endings. */
export const WORK_FILE_NAME = "work.txt";
/** Transient download failures get this many further tries. */
export const DOWNLOAD_RETRIES = 2;

/** A connection that failed is tried again; a server that had its whole deadline, or sent too slowly, is not. */
const transientDownload = (err: unknown) => err instanceof FileUrlError && err.reason === "unreachable";

export async function download(run: Run, workDir: string): Promise<string> {
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
export async function readBookText(run: Run, path: string, workDir: string): Promise<{ text: string; textPath: string }> {
  const decoded = decodeBookBytes(await readFile(path));
  if (!decoded.ok) throw new BookRejectedError(run.job.bookId, decoded.reason);
  if (decoded.text.trim() === "") throw new BookRejectedError(run.job.bookId, "file is empty");
  const work = extractWork(decoded.text);
  if (!hasProse(work.text)) {
    const reason = work.stripped.length > 0 ? "no text of the work is left once the Project Gutenberg header, licence and contents are removed" : "file has no prose";
    throw new BookRejectedError(run.job.bookId, reason);
  }
  const evidence = languageEvidence(work.text);
  const garbled = notLanguage(evidence);
  if (garbled) throw new BookRejectedError(run.job.bookId, `${garbled} (read as ${decoded.encoding.toUpperCase()})`);
  for (const warning of work.warnings) run.log.warn(warning, { work: { start: work.start, end: work.end }, characters: decoded.text.length });
  if (decoded.replaced > 0) run.log.warn("invalid byte sequences in the file were replaced by U+FFFD", { encoding: decoded.encoding, replaced: decoded.replaced });
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
export function inLanguageOfText(run: Run, book: Book, text: string): Book {
  const script = detectScript(text);
  const fit = fitLanguage(book.language, script.script);
  if (!fit.mismatch) return book;
  run.log.warn(fit.mismatch, { registered: book.language, ingested_as: fit.language, latin_letters: script.latin, arabic_letters: script.arabic });
  return { ...book, language: fit.language };
}
