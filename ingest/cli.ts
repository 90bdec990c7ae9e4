// npm run ingest -- <file> [--title …] [--author …] [--language English|Urdu|both] [--max-characters N] [--write-frontend-tables]
// npm run ingest -- --delete <book id or title> [--write-frontend-tables]
//
// Registers a local book in the configured database (the embedded one by default), runs the whole
// pipeline in this process with a progress bar per phase (stderr, terminals only), and prints the
// characters found. The log goes to $DATA_DIR/ingest.log; a warning also shows as one line, so the bar stays readable.

import { readFile } from "node:fs/promises";
import { basename, extname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { sha256 } from "../common/hash.ts";
import { findRunningInstance } from "../common/local/control-file.ts";
import { loadConfigOrExit, secretsOf, type Config } from "../common/config.ts";
import { buildDepsOrExit, type Deps } from "../common/deps.ts";
import { LANGUAGES, type Language } from "../common/contract/rows.ts";
import { findBookBySource, recordBookSource } from "../common/db/books.ts";
import { setProcessingStatus } from "../common/db/ingestions.ts";
import { FRONTEND_WRITES_FLAG, frontendWritesAllowed, insertBook, setBookDetails, type BookDetails } from "../common/db/frontend-rows.ts";
import { decodeBookBytes } from "../common/text-decoding.ts";
import type { Logger } from "../common/log.ts";
import { terminalLogger } from "../common/local/terminal-log.ts";
import { npmRun, usage } from "../common/cli-usage.ts";
import { PIPELINE_PHASES } from "../common/metrics/processing.ts";
import { deleteBook, findBooks } from "./book-removal.ts";
import { extractWork, openingTitle } from "./book/book-text.ts";
import { BookRejectedError } from "./errors.ts";
import { runPipeline, type PipelineResult, type ProgressEvent } from "./pipeline.ts";
import { parseLanguage } from "./book/text-script.ts";

const USAGE = `${usage("ingest", `<book.txt> [--title <title>] [--author <author>] [--language English|Urdu|both] [--max-characters <n>] [${FRONTEND_WRITES_FLAG}]`)}
${usage("ingest", `--delete <book id or title> [${FRONTEND_WRITES_FLAG}]`)}`;
const HELP = `${USAGE}

Adds a plain-text book (UTF-8, UTF-16 or Windows-1252) to the configured database (the embedded one under DATA_DIR unless
DATABASE_URL is set), finds its characters, writes their personas and indexes the text, with a
progress bar per phase. Stop \`npm start\` first when it runs on the same DATA_DIR. Run from the
project folder (npm runs scripts there, so a relative path is read from it).

  --title <title>          the book's title (default: the "Title:" of a Project Gutenberg header, else the
                           title above a "by" line or the first chapter in the file's opening lines, else
                           the file name); given again for a book ingested before, it replaces the title
  --author <author>        its author (default: the header's "Author:", else the opening lines' "by" line);
                           given again, it replaces the author
  --language <language>    English (default), Urdu or both, in any case; given again for a book
                           ingested before, it replaces the book's language
  --max-characters <n>     keep at most n characters (default 12)
  ${FRONTEND_WRITES_FLAG}  allow the books row to be written to the frontend's tables of a shared
                           (DATABASE_URL) database
  --delete <id|title>      delete a book: its row, characters, sessions, indexes and persona backups
  --help                   this text

Warnings show as one line; details go to $DATA_DIR/ingest.log.
`;
const BAR_WIDTH = 24;
/** What a flag given again for a book ingested before replaces in its row. */
const REPLACEABLE = ["title", "author", "language"] as const;

interface Bar {
  update(event: ProgressEvent): void;
  done(): void;
}

/**
 * One line per phase, redrawn in place; the line is kept when the next phase starts. The index runs
 * beside the NLP and the character passes: until they are done its progress rides on their line.
 */
function progressBar(enabled: boolean): Bar {
  if (!enabled) return { update: () => {}, done: () => {} };
  let phase: string | undefined;
  let last: ProgressEvent | undefined;
  let beside = "";
  const shareOf = (e: ProgressEvent) => (e.total > 0 ? Math.min(1, e.done / e.total) : 0);
  const draw = (e: ProgressEvent) => {
    const share = shareOf(e);
    const filled = Math.round(share * BAR_WIDTH);
    const count =
      e.phase === "download" ? `${(e.done / 1e6).toFixed(1)} MB` : e.phase === "index" ? `${Math.round(share * 100)}%` : `${e.done}/${e.total}`;
    const side = e.phase === "index" ? "" : beside;
    process.stderr.write(`\r${e.phase.padEnd(9)} [${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}] ${count.padEnd(10)}${side.padEnd(14)}`);
  };
  const charactersDone = () => last?.phase === "prompt" && last.done >= last.total;
  const finish = () => {
    if (!last) return;
    draw(last.total > 0 ? { ...last, done: last.total } : last);
    process.stderr.write("\n");
  };
  return {
    update(e) {
      if (e.phase === "index" && last?.phase !== "index" && !charactersDone()) {
        beside = ` · index ${Math.round(shareOf(e) * 100)}%`;
        if (last && last.phase !== "download") draw(last);
        return;
      }
      if (phase !== undefined && e.phase !== phase) finish();
      phase = e.phase;
      last = e;
      draw(e);
    },
    done: finish,
  };
}

function report(result: PipelineResult, title: string): string {
  const lines = [`${title}: ${result.characters.length} characters, ${result.index.chunks} chunks`, ""];
  const width = Math.max(4, ...result.characters.map((c) => c.character.name.length));
  for (const { character, backupPath } of result.characters) {
    const aliases = character.aliases.slice(0, 3).join(", ");
    lines.push(`  ${character.emoji ?? " "} ${character.name.padEnd(width)}  importance ${String(character.importance).padStart(6)}  ${aliases ? `(${aliases})  ` : ""}${backupPath}`);
  }
  const skipped = Object.entries(result.skipped).map(([kind, n]) => `${kind} ${n}`);
  if (skipped.length > 0) lines.push("", `skipped after retries: ${skipped.join(", ")}`);
  const { written, failed } = result.checkpoints;
  if (written + failed > 0) lines.push("", `spoiler-safe checkpoints: ${written} profiles and personas written${failed > 0 ? `, ${failed} failed` : ""}`);
  const durations = PIPELINE_PHASES.map((p) => `${p} ${(result.durations[p] ?? 0).toFixed(2)} s`);
  lines.push("", `time: ${durations.join(", ")}`);
  return `${lines.join("\n")}\n`;
}

export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        title: { type: "string" },
        author: { type: "string" },
        language: { type: "string" },
        "max-characters": { type: "string" },
        delete: { type: "string" },
        [FRONTEND_WRITES_FLAG.slice(2)]: { type: "boolean" },
        help: { type: "boolean" },
      },
    });
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n${USAGE}\n`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const frontendWrites = parsed.values[FRONTEND_WRITES_FLAG.slice(2)] === true;
  if (parsed.values.delete !== undefined) {
    if (parsed.positionals.length > 0) {
      process.stderr.write(`${USAGE}\n`);
      return 2;
    }
    return deleteCommand(parsed.values.delete, frontendWrites);
  }
  const [file] = parsed.positionals;
  const maxCharacters = parsed.values["max-characters"] === undefined ? undefined : Number(parsed.values["max-characters"]);
  if (!file || parsed.positionals.length > 1) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const givenLanguage = parsed.values.language === undefined ? undefined : parseLanguage(parsed.values.language, LANGUAGES);
  if (parsed.values.language !== undefined && givenLanguage === undefined) {
    process.stderr.write(`--language must be one of ${LANGUAGES.join(", ")}\n`);
    return 2;
  }
  const language: Language = givenLanguage ?? "English";
  const blank = (["title", "author"] as const).find((flag) => parsed.values[flag]?.trim() === "");
  if (blank) {
    process.stderr.write(`--${blank} must not be empty\n`);
    return 2;
  }
  if (maxCharacters !== undefined && !(Number.isInteger(maxCharacters) && maxCharacters >= 0)) {
    process.stderr.write("--max-characters must be a whole number\n");
    return 2;
  }
  if (!(await Bun.file(file).exists())) {
    process.stderr.write(`no such file: ${file}\n`);
    return 1;
  }

  // Read here as the pipeline reads it: a file that is not text adds no book, and the same text in
  // another encoding or with other line endings is the same book.
  const bytes = await readFile(file);
  const decoded = decodeBookBytes(bytes);
  if (!decoded.ok) {
    process.stderr.write(`failed: ${decoded.reason}\n`);
    return 1;
  }
  const work = extractWork(decoded.text);
  // A Gutenberg file opens with its header's boilerplate, not with its title page.
  const named = work.stripped.some((s) => s.what === "gutenberg header") ? work.header : openingTitle(decoded.text);
  const given: BookDetails = { title: parsed.values.title?.trim(), author: parsed.values.author?.trim(), language: givenLanguage };
  const title = given.title ?? named.title ?? basename(file, extname(file));
  const author = given.author ?? named.author;

  const config = loadConfigOrExit();
  // Not POST /character/processing: a local install refuses loopback and local file URLs, so that cannot work here.
  if (await refuseWhileRunning(config, `then run this again; at the next ${npmRun("start")} the book is on the chat page and in ${npmRun("chat")}`)) return 1;
  const contentHash = sha256(decoded.text);
  const logger = terminalLogger({
    file: join(config.dataDir, "ingest.log"),
    level: config.logLevel,
    secrets: secretsOf(config),
    // A warning starts on a line of its own, not inside a progress bar being redrawn.
    print: (line) => process.stderr.write(`${process.stderr.isTTY ? "\n" : ""}${line}\n`),
  });
  const deps = await buildDepsOrExit(config, { logger });
  // The same text again: the book it made is ingested again (characters keep their ids), not copied.
  // Books recorded before the text was what identified them carry their file's hash.
  const existing = (await findBookBySource(deps.db, contentHash)) ?? (await findBookBySource(deps.db, sha256(bytes)));
  // Only what was given replaces: a title the frontend set is not overwritten by one read from the text.
  const replaced = existing ? REPLACEABLE.filter((key) => given[key] !== undefined && given[key] !== existing[key]) : [];
  if ((!existing || replaced.length > 0) && !frontendWritesAllowed(deps.db, frontendWrites)) {
    await deps.close();
    process.stderr.write(
      existing
        ? `this database is shared with the frontend, and replacing a book's ${replaced.join(" and ")} writes its books table: pass ${FRONTEND_WRITES_FLAG} to allow it, ` +
            `or leave out ${replaced.map((key) => `--${key}`).join(" and ")}\n`
        : `this database is shared with the frontend, and adding a book writes its books table: pass ${FRONTEND_WRITES_FLAG} to allow it, ` +
            "or let the frontend add the book and submit it with POST /character/processing\n",
    );
    return 2;
  }
  const controller = new AbortController();
  const interrupt = () => controller.abort(new Error("interrupted"));
  process.once("SIGINT", interrupt);
  const bar = progressBar(process.stderr.isTTY === true);
  try {
    const book =
      existing ?? (await insertBook(deps.db, { title, ...(author ? { author } : {}), language: language as Language, filePath: resolve(file) }));
    await recordBookSource(deps.db, book.id, contentHash);
    if (existing) {
      process.stderr.write(`this text was ingested before as book ${book.id} ("${book.title}"): updating that book\n`);
      if (replaced.length > 0) await setBookDetails(deps.db, book.id, given);
      for (const key of replaced) process.stderr.write(`its ${key}: ${given[key]} (was ${existing[key]})\n`);
    } else {
      process.stderr.write(`book ${book.id}: ${title}${author ? ` by ${author}` : ""} (${language})\n`);
    }
    try {
      const result = await runPipeline(deps, { bookId: book.id, source: { path: resolve(file) } }, {
        signal: controller.signal,
        onProgress: bar.update,
        ...(maxCharacters !== undefined ? { selection: { maxCharacters } } : {}),
      });
      bar.done();
      process.stdout.write(report(result, given.title ?? book.title));
      return 0;
    } catch (err) {
      bar.done();
      const rejected = err instanceof BookRejectedError;
      process.stderr.write(`failed: ${rejected ? err.reason : err instanceof Error ? err.message : String(err)}\n`);
      // A book this run added and could not finish has nothing to chat with: it is removed, not left
      // as an empty row. One ingested before keeps what it had, marked failed.
      if (!existing) await forgetNewBook(deps, book.id, logger);
      else if (!rejected) await setProcessingStatus(deps.db, book.id, "failed", { error: controller.signal.aborted ? "interrupted" : String(err) }).catch(() => {});
      return controller.signal.aborted && !rejected ? 130 : 1;
    }
  } finally {
    process.off("SIGINT", interrupt);
    await deps.close();
  }
}

async function forgetNewBook(deps: Deps, bookId: string, logger: Logger): Promise<void> {
  try {
    const removed = await deleteBook(deps, bookId);
    if (removed.failed.length > 0) logger.error("a failed book's indexes or persona backups could not all be removed", { book_id: bookId, errors: removed.failed });
    process.stderr.write(`book ${bookId} was not added\n`);
  } catch (err) {
    logger.error("a failed book could not be removed", { book_id: bookId, error: err });
    process.stderr.write(`book ${bookId} is left marked failed: remove it with ${npmRun("ingest")} -- --delete ${bookId}\n`);
  }
}

/** Two processes on one embedded database each work on a private copy: what one writes, the other loses. */
async function refuseWhileRunning(config: Config, instead: string): Promise<boolean> {
  const running = config.database.driver === "pglite" ? await findRunningInstance(config.dataDir) : undefined;
  if (running) process.stderr.write(`npm start is running on ${config.dataDir} (pid ${running.pid}); stop it first (Ctrl-C in its terminal), ${instead}\n`);
  return running !== undefined;
}

async function deleteCommand(idOrTitle: string, frontendWrites: boolean): Promise<number> {
  const config = loadConfigOrExit();
  if (await refuseWhileRunning(config, "then run this again")) return 1;
  const logger = terminalLogger({ file: join(config.dataDir, "ingest.log"), level: config.logLevel, secrets: secretsOf(config), print: (line) => process.stderr.write(`${line}\n`) });
  const deps = await buildDepsOrExit(config, { logger });
  try {
    if (!frontendWritesAllowed(deps.db, frontendWrites)) {
      process.stderr.write(`this database is shared with the frontend, and deleting a book deletes its books row: pass ${FRONTEND_WRITES_FLAG} to allow it\n`);
      return 2;
    }
    const matches = await findBooks(deps.db, idOrTitle);
    if (matches.length !== 1) {
      const listed = matches.map((b) => `  ${b.id}  ${b.title} (${b.processing_status})`).join("\n");
      process.stderr.write(matches.length === 0 ? `no book has the id or title "${idOrTitle}"\n` : `"${idOrTitle}" names ${matches.length} books; give the id of one:\n${listed}\n`);
      return 1;
    }
    const [book] = matches as [(typeof matches)[number]];
    const removed = await deleteBook(deps, book.id);
    logger.info("book deleted", { book_id: book.id, title: book.title, characters: removed.characters, left_behind: removed.failed });
    if (removed.failed.length > 0) {
      process.stderr.write(`deleted book ${book.id} ("${book.title}"), but some of its indexes or persona backups could not be removed: see ${join(config.dataDir, "ingest.log")}\n`);
      return 1;
    }
    process.stdout.write(`deleted book ${book.id} ("${book.title}"): ${removed.characters} characters, its indexes and persona backups\n`);
    return 0;
  } finally {
    await deps.close();
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
