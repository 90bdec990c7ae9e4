import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Book } from "../../../common/contract/rows.ts";
import { checkCharacterName, cleanAliases } from "../../characters/character-names.ts";
import type { FoundCharacter } from "../../characters/character-selection.ts";
import { mergeDiscoveries, type SampledDiscovery } from "../../characters/discovered-characters.ts";
import { DEFAULT_DISCOVERY_SAMPLES, DEFAULT_SAMPLES_PER_CALL, discoverInSamples, discoveryCalls, sampleText } from "../../characters/discovery.ts";
import { BookRejectedError, PassUnavailableError } from "../../errors.ts";
import { createSerialGate } from "./serial-gate.ts";
import { NlpError, runBookNlpCommand, runInThread } from "./step.ts";
import type { NlpResult, NlpTask } from "./thread.ts";
import { mapBounded, retryItem } from "../isolate-failures.ts";
import { bookInfo, type Run } from "../pipeline-run.ts";

/** The book's characters: the NLP step (native engine or BookNLP) for English, the model's discovery in samples otherwise; then the names that can be stored. */

/** One book at a time in the NLP step per process, whatever the worker's concurrency. */
const nlpGate = createSerialGate();

export async function findCharacters(run: Run, book: Book, text: string, textPath: string, workDir: string): Promise<NlpResult> {
  // Discovery names the characters only: the spoiler guard gets no other people from it.
  if (book.language !== "English") return { characters: await discover(run, book, text), people: [], quotes: 0 };
  return nlpGate.run(() => runBookNlp(run, book, textPath, workDir));
}

async function runBookNlp(run: Run, book: Book, textPath: string, workDir: string): Promise<NlpResult> {
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
    run.log.info("characters found", { engine: command ? "booknlp" : "native", characters: found.characters.length, quotes: found.quotes });
    if (found.characters.length === 0) run.log.warn(noCharactersReason(found.quotes), { engine: command ? "booknlp" : "native" });
    return found;
  } catch (err) {
    if (err instanceof NlpError) throw new BookRejectedError(book.id, `text could not be analysed: ${err.message}`, { cause: err });
    throw err;
  }
}

/** Why an English book has no characters: they are the people who speak, so a book without dialogue has none. */
function noCharactersReason(quotes: number): string {
  return quotes === 0
    ? "no characters found: the text has no quoted speech, and characters are the people who speak (dialogue in quotation marks)"
    : `no characters found: the text has ${quotes} quotations, but none is said by a named person`;
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
export function admitNames(run: Run, found: readonly FoundCharacter[]): FoundCharacter[] {
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
