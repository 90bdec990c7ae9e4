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

export interface CharacterKnowledge {
  characterId: string;
  firstAppearance: number;
  /** The checkpoints written for the character this run; the ones that failed are absent. */
  checkpoints: CharacterCheckpoint[];
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
 * Replaces the first appearance and checkpoints of the given characters in one statement (a
 * character's checkpoints from an earlier run are dropped, so a failed pass never leaves a stale,
 * later-looking one behind). Characters not listed keep what they had.
 */
export async function saveCharacterKnowledge(db: Queryable, knowledge: readonly CharacterKnowledge[]): Promise<void> {
  if (knowledge.length === 0) return;
  const appearances = knowledge.map((k) => ({ character_id: k.characterId, position: k.firstAppearance }));
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
     )
     INSERT INTO character_checkpoints (character_id, position, profile_json, system_prompt)
     SELECT character_id, position, profile_json, system_prompt
       FROM jsonb_to_recordset($2::jsonb) AS c (character_id uuid, position double precision, profile_json jsonb, system_prompt text)
     ON CONFLICT (character_id, position) DO UPDATE SET profile_json = EXCLUDED.profile_json, system_prompt = EXCLUDED.system_prompt, created_at = now()`,
    [appearances, checkpoints],
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
