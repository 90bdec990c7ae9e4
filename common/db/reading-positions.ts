import type { Queryable } from "./index.ts";
import { isUuid } from "./row-lookup.ts";

/**
 * The backend's own tables for spoiler-safe chat (migration 0004): where each chunk of a book ends,
 * where each character first appears, and each character's profile and persona at the book's
 * checkpoints. Positions are fractions of the book's text (common/retrieval/reading-position.ts).
 */

export interface BookReadingPositions {
  /** Position at which chunk i ends, ascending. */
  chunkEnds: number[];
  /** The checkpoint positions ingestion attempted; empty when characters are known only as of the whole book. */
  checkpoints: number[];
}

export interface CharacterCheckpoint {
  position: number;
  profileJson: Record<string, unknown>;
  systemPrompt: string;
}

/** A line of the character's, with the position (0–1) at which it ends in the book. */
export interface CharacterLine {
  position: number;
  text: string;
}

export interface CharacterKnowledge {
  characterId: string;
  firstAppearance: number;
  /** The checkpoints written for the character this run; the ones that failed are absent. */
  checkpoints: CharacterCheckpoint[];
  /** Their lines in book order (migration 0006). */
  lines: CharacterLine[];
}

export async function saveBookReadingPositions(db: Queryable, bookId: string, positions: BookReadingPositions): Promise<void> {
  await db.query(
    `INSERT INTO book_reading_positions (book_id, chunk_ends, checkpoints) VALUES ($1, $2::jsonb, $3::jsonb)
     ON CONFLICT (book_id) DO UPDATE SET chunk_ends = EXCLUDED.chunk_ends, checkpoints = EXCLUDED.checkpoints, updated_at = now()`,
    [bookId, positions.chunkEnds, positions.checkpoints],
  );
}

export async function getBookReadingPositions(db: Queryable, bookId: string): Promise<BookReadingPositions | null> {
  if (!isUuid(bookId)) return null;
  const [row] = await db.query<{ chunk_ends: number[]; checkpoints: number[] }>(
    "SELECT chunk_ends, checkpoints FROM book_reading_positions WHERE book_id = $1",
    [bookId],
  );
  return row ? { chunkEnds: row.chunk_ends, checkpoints: row.checkpoints } : null;
}

/**
 * Replaces the first appearance, checkpoints and lines of the given characters in one statement (a
 * character's checkpoints from an earlier run are dropped, so a failed pass never leaves a stale,
 * later-looking one behind). Characters not listed keep what they had.
 */
export async function saveCharacterKnowledge(db: Queryable, knowledge: readonly CharacterKnowledge[]): Promise<void> {
  if (knowledge.length === 0) return;
  const appearances = knowledge.map((k) => ({ character_id: k.characterId, position: k.firstAppearance }));
  const lines = knowledge.map((k) => ({ character_id: k.characterId, lines: k.lines }));
  const checkpoints = knowledge.flatMap((k) =>
    k.checkpoints.map((c) => ({ character_id: k.characterId, position: c.position, profile_json: c.profileJson, system_prompt: c.systemPrompt })),
  );
  await db.query(
    `WITH listed AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS x (character_id uuid, position double precision)
     ), appearances AS (
       INSERT INTO character_first_appearances (character_id, position)
       SELECT character_id, position FROM listed
       ON CONFLICT (character_id) DO UPDATE SET position = EXCLUDED.position
     ), dropped AS (
       DELETE FROM character_checkpoints WHERE character_id IN (SELECT character_id FROM listed)
     ), said AS (
       INSERT INTO character_lines (character_id, lines)
       SELECT character_id, lines FROM jsonb_to_recordset($3::jsonb) AS l (character_id uuid, lines jsonb)
       ON CONFLICT (character_id) DO UPDATE SET lines = EXCLUDED.lines
     )
     INSERT INTO character_checkpoints (character_id, position, profile_json, system_prompt)
     SELECT character_id, position, profile_json, system_prompt
       FROM jsonb_to_recordset($2::jsonb) AS c (character_id uuid, position double precision, profile_json jsonb, system_prompt text)
     ON CONFLICT (character_id, position) DO UPDATE SET profile_json = EXCLUDED.profile_json, system_prompt = EXCLUDED.system_prompt, created_at = now()`,
    [appearances, checkpoints, lines],
  );
}

/** A character's first appearance (null when ingestion has not recorded one) and checkpoints, earliest first. */
export async function getCharacterKnowledge(
  db: Queryable,
  characterId: string,
): Promise<{ firstAppearance: number | null; checkpoints: CharacterCheckpoint[] }> {
  if (!isUuid(characterId)) return { firstAppearance: null, checkpoints: [] };
  const [row] = await db.query<{ first_appearance: number | null; checkpoints: { position: number; profile_json: Record<string, unknown>; system_prompt: string }[] }>(
    `SELECT (SELECT position FROM character_first_appearances WHERE character_id = $1) AS first_appearance,
            COALESCE((SELECT jsonb_agg(jsonb_build_object('position', position, 'profile_json', profile_json, 'system_prompt', system_prompt) ORDER BY position)
                        FROM character_checkpoints WHERE character_id = $1), '[]'::jsonb) AS checkpoints`,
    [characterId],
  );
  return {
    firstAppearance: row?.first_appearance ?? null,
    checkpoints: (row?.checkpoints ?? []).map((c) => ({ position: c.position, profileJson: c.profile_json, systemPrompt: c.system_prompt })),
  };
}

/** A character's lines in book order (empty when ingestion has not recorded them). */
export async function getCharacterLines(db: Queryable, characterId: string): Promise<CharacterLine[]> {
  if (!isUuid(characterId)) return [];
  const [row] = await db.query<{ lines: unknown }>("SELECT lines FROM character_lines WHERE character_id = $1", [characterId]);
  return validLines(row?.lines);
}

/** The lines a row holds, those of the right shape only, in book order: a row is read, never trusted. */
function validLines(value: unknown): CharacterLine[] {
  if (!Array.isArray(value)) return [];
  return value
    .filter((l): l is CharacterLine => typeof l === "object" && l !== null && typeof l.text === "string" && typeof l.position === "number" && l.position >= 0 && l.position <= 1)
    .map((l) => ({ position: l.position, text: l.text }))
    .sort((a, b) => a.position - b.position);
}
