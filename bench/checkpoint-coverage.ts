/**
 * Spoiler-safe checkpoints: what they cost and whom they leave mute. Each book is ingested by
 * `bun run ingest` in its own process on a fresh data dir, once with CHARACTER_CHECKPOINTS=1 (the
 * whole book only) and once with the setting given (default: the configured default), against the
 * loopback gateway of the ingestion tests, which counts the model calls. Then the book's database is
 * read as chat reads it: for each character and each position 5 %, 10 %, … 95 %, a character the
 * reader has met (first appearance before the position) counts as mute when no checkpoint of theirs
 * is at or before it (chat then builds the persona from the name alone). "Main" characters are the
 * book's six most important. Runs alone: `bun bench/checkpoint-coverage.ts [--checkpoints N] <book.txt>…`.
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { listCharacters } from "../common/db/characters.ts";
import { createPgliteDatabase } from "../common/db/pglite.ts";
import { getBookReadingPositions, getCharacterKnowledge } from "../common/db/reading-positions.ts";
import { knowledgeAt } from "../api/chat/knowledge.ts";
import { DEFAULT_CHARACTER_CHECKPOINTS } from "../common/config-defaults.ts";
import { startScriptedGateway } from "../tests/fixtures/ingest/harness.ts";
import { measuredSpawn } from "./measured-spawn.ts";
import { answerHelp, freshDataDir, machineHeader, markdownTable } from "./support.ts";

const CLI = resolve(import.meta.dir, "..", "ingest", "cli.ts");
const POSITIONS = Array.from({ length: 19 }, (_, i) => (i + 1) / 20);
const MAIN_CHARACTERS = 6;

interface Coverage {
  met: number;
  mute: number;
}

interface Measured {
  chatCalls: number;
  characters: number;
  checkpoints: number;
  main: Coverage;
  all: Coverage;
}

async function measure(book: string, checkpoints: number, gateway: ReturnType<typeof startScriptedGateway>): Promise<Measured> {
  const dataDir = await freshDataDir();
  gateway.clearRequests();
  const run = await measuredSpawn([process.execPath, CLI, book], {
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      DATA_DIR: dataDir,
      LLM_GATEWAY_URL: gateway.baseURL,
      LOG_LEVEL: "warn",
      CHARACTER_CHECKPOINTS: String(checkpoints),
    },
  });
  const id = /^book ([0-9a-f-]{36}):/m.exec(`${run.stderr}\n${run.stdout}`)?.[1];
  if (run.exitCode !== 0 || !id) throw new Error(`bun run ingest failed on ${book} (exit ${run.exitCode}):\n${run.stderr}\n${run.stdout}`);
  const chatCalls = gateway.chatRequests().length;
  const db = await createPgliteDatabase({ dataDir: resolve(dataDir, "pg") });
  try {
    const characters = await listCharacters(db, id);
    const attempted = (await getBookReadingPositions(db, id))?.checkpoints ?? [];
    const ranked = [...characters].sort((a, b) => b.importance - a.importance);
    const main: Coverage = { met: 0, mute: 0 };
    const all: Coverage = { met: 0, mute: 0 };
    let written = 0;
    for (const [rank, character] of ranked.entries()) {
      const knowledge = await getCharacterKnowledge(db, character.id);
      written += knowledge.checkpoints.length;
      for (const position of POSITIONS) {
        if (knowledge.firstAppearance === null || knowledge.firstAppearance >= position) continue;
        const mute = knowledgeAt(position, attempted, knowledge.checkpoints).kind === "name-only" ? 1 : 0;
        for (const c of rank < MAIN_CHARACTERS ? [main, all] : [all]) {
          c.met++;
          c.mute += mute;
        }
      }
    }
    return { chatCalls, characters: characters.length, checkpoints: written, main, all };
  } finally {
    await db.close();
  }
}

const share = (c: Coverage) => `${((100 * c.mute) / Math.max(1, c.met)).toFixed(1)} % (${c.mute}/${c.met})`;

if (import.meta.main) {
  answerHelp("usage: bun bench/checkpoint-coverage.ts [--checkpoints N] <book.txt>…\n\nModel calls per book for spoiler-safe checkpoints, and the share of (character, position) pairs where a character the reader has met speaks from the name alone.");
  const { values, positionals } = parseArgs({ args: Bun.argv.slice(2), allowPositionals: true, options: { checkpoints: { type: "string" } } });
  const checkpoints = Number(values.checkpoints ?? DEFAULT_CHARACTER_CHECKPOINTS);
  if (positionals.length === 0) {
    process.stderr.write("usage: bun bench/checkpoint-coverage.ts [--checkpoints N] <book.txt>…\n");
    process.exit(2);
  }
  const gateway = startScriptedGateway();
  const rows: (string | number)[][] = [];
  try {
    for (const book of positionals) {
      const one = await measure(book, 1, gateway);
      const many = await measure(book, checkpoints, gateway);
      rows.push([
        book.split("/").at(-1)!,
        many.characters,
        one.chatCalls,
        many.chatCalls,
        `${(many.chatCalls / one.chatCalls).toFixed(2)}×`,
        many.checkpoints,
        share(many.main),
        share(many.all),
      ]);
    }
  } finally {
    gateway.stop();
  }
  process.stdout.write(`${machineHeader()}\nCHARACTER_CHECKPOINTS=${checkpoints}\n\n`);
  process.stdout.write(
    `${markdownTable(["book", "characters", "model calls, 1 checkpoint", `model calls, ${checkpoints}`, "ratio", "checkpoints written", "met but mute (main 6)", "met but mute (all)"], rows)}\n`,
  );
}
