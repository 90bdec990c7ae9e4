/**
 * Worker-thread entry for the CPU-heavy part of the booknlp phase: run the native engine (or read
 * the files real BookNLP wrote), parse them and select the characters. Off the main thread so the
 * worker keeps renewing its job lease and answering /metrics while a large book is analysed.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parentPort } from "node:worker_threads";
import { characterList, selectCharacters, type FoundCharacter, type SelectionOptions } from "../../characters/character-selection.ts";
import { parseBookNlp, type ParsedBookNlp } from "../../nlp/booknlp-files.ts";
import { analyze, render } from "../../nlp/engine.ts";
import { readForNlp } from "./windows.ts";

export type NlpTask =
  | { kind: "native"; textPath: string; selection: SelectionOptions }
  /** Files `{dir}/{id}.tokens` etc., as BookNLP writes them. */
  | { kind: "files"; textPath: string; dir: string; id: string; selection: SelectionOptions };

/** A person the NLP step names, selected as a character or not: the spoiler guard knows them all. */
export interface NamedPerson {
  name: string;
  aliases: string[];
}

export interface NlpResult {
  characters: FoundCharacter[];
  /** Every person found, the most mentioned first, at most MAX_NAMED_PEOPLE. */
  people: NamedPerson[];
  /** Quotations the analysis found: none says why a book has no characters. */
  quotes: number;
}

export type NlpReply = ({ ok: true } & NlpResult) | { ok: false; error: string };

/** People passed on beside the characters: more than any book's cast, few enough to check every word of a reply against. */
const MAX_NAMED_PEOPLE = 500;

function found(parsed: ParsedBookNlp, selection: SelectionOptions, book: Parameters<typeof selectCharacters>[2]): NlpResult {
  const list = characterList(parsed);
  const people = [...list]
    .sort((a, b) => b.mentionCount - a.mentionCount)
    .slice(0, MAX_NAMED_PEOPLE)
    .map((c) => ({ name: c.name, aliases: c.aliases }));
  return { characters: selectCharacters(parsed, selection, book, list), people, quotes: parsed.quotes.length };
}

/** The .supersense file is not needed for characters. */
const NEEDED_FILES = ["tokens", "entities", "quotes", "book"] as const;

async function readIfPresent(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

async function runTask(task: NlpTask): Promise<NlpResult> {
  if (task.kind === "native") {
    // The engine's token arrays stand in for its .tokens file: parsing that back would cost more
    // memory than the whole analysis. A very large book is read in windows (see nlp-windows.ts).
    const analysed = await readForNlp(task.textPath);
    const analysis = analyze(analysed);
    const { entities, quotes, book } = render(analysis);
    const { tok } = analysis;
    const tokens = { paragraph: tok.paragraph, word: tok.text, start: tok.start, end: tok.end, offsets: "utf16" as const };
    return found(parseBookNlp({ entities, quotes, book }), task.selection, { text: analysed, tokens });
  }
  const text = await readFile(task.textPath, "utf8");
  const read = await Promise.all(NEEDED_FILES.map((ext) => readIfPresent(join(task.dir, `${task.id}.${ext}`))));
  const files = Object.fromEntries(NEEDED_FILES.map((ext, i) => [ext, read[i]]));
  if (files.entities === undefined && files.book === undefined) {
    throw new Error(`BookNLP wrote neither ${task.id}.entities nor ${task.id}.book`);
  }
  return found(parseBookNlp(files), task.selection, { text });
}

if (parentPort) {
  const port = parentPort;
  port.once("message", async (task: NlpTask) => {
    let reply: NlpReply;
    try {
      reply = { ok: true, ...(await runTask(task)) };
    } catch (err) {
      reply = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    port.postMessage(reply);
  });
}
