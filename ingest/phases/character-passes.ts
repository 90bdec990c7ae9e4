import { characterCacheKey, knowledgeCacheKey } from "../../common/contract/cache-keys.ts";
import { DatabaseError } from "../../common/db/index.ts";
import { saveCharacterKnowledge, type CharacterCheckpoint } from "../../common/db/reading-positions.ts";
import { listPersonas, saveCharacters, type CharacterInput, type SavedCharacters } from "../../common/db/characters.ts";
import { type Book, type Character } from "../../common/contract/rows.ts";
import { writeBackups } from "../characters/backups.ts";
import { createTextLocator, firstMention, knownAt, materialEnds, placeCharacter, placeCheckpoints, placedLines } from "../characters/checkpoints.ts";
import type { FoundCharacter } from "../characters/character-selection.ts";
import { characterStyle, listDescription } from "../characters/character-style.ts";
import { PassUnavailableError } from "../errors.ts";
import { extractProfile, writePersona } from "../characters/profiles.ts";
import { mapBounded, retryItem } from "./isolate-failures.ts";
import { bookInfo, forgetCached, type Run } from "./pipeline-run.ts";

/** The two model passes over the found characters (extract a profile, write a persona), then the characters saved and backed up. */

export interface SavedCharacter {
  character: Character;
  backupPath: string;
}

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

/**
 * The whole-book items, then each character as known at each of their own checkpoints, placed where
 * their material accumulates within the book's budget (ingest/characters/checkpoints.ts), most important
 * characters first within each round.
 */
function passItems(text: string, found: readonly FoundCharacter[], budget: number): PassItem[] {
  const items: PassItem[] = found.map((character) => ({ character }));
  if (budget <= 0) return items;
  const locate = createTextLocator(text);
  const cast = found.map((c) => placeCharacter(c, locate, text.length));
  const ranked = [...cast].sort((a, b) => b.character.importance - a.character.importance);
  const positions = placeCheckpoints(ranked.map(materialEnds), text.length, { budget });
  ranked.forEach((placed, i) => {
    for (const at of positions[i]!) {
      const character = knownAt(placed, Math.floor(at * text.length), text, cast);
      if (character) items.push({ character, at });
    }
  });
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

/** `checkpointBudget`: the most checkpoints the book gets, all characters together (0: the whole book only). */
export async function extractProfiles(run: Run, book: Book, text: string, found: readonly FoundCharacter[], checkpointBudget: number): Promise<Profiled[]> {
  const items = passItems(text, found, checkpointBudget);
  const profiles = await characterPass(run, "extract", items, (item) => extractProfile(run.deps.llm, bookInfo(book), item.character, run.signal));
  return items.flatMap((item, i) => (profiles[i] === undefined ? [] : [{ ...item, profile: profiles[i] }]));
}

export async function writePersonas(
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
      description: listDescription(profile),
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
  const locate = createTextLocator(text);
  const byName = new Map(found.map((c) => [c.name, c]));
  const placed = (name: string) => {
    const character = byName.get(name);
    return {
      firstAppearance: character ? (firstMention(character, locate) ?? 0) / Math.max(1, text.length) : 0,
      lines: character ? placedLines(character, locate, text.length) : [],
    };
  };
  await saveCharacterKnowledge(
    run.deps.db,
    rows.map((row) => ({ characterId: row.id, ...placed(row.name), checkpoints: checkpointsOf.get(row.name) ?? [] })),
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
