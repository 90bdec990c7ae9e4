import type { Character, CharacterRow } from "../contract/rows.ts";
import { type Database, DatabaseError, type Queryable } from "./index.ts";
import { camelize, findById, isUuid } from "./row-lookup.ts";

/** Characters (ours): what an ingestion found in a book, matched by name from one run to the next. */

const CHARACTER_COLUMNS =
  "id, book_id, name, description, system_prompt, profile_json, avatar_url, color, emoji, aliases, importance, retired_at, created_at, updated_at";

export interface CharacterInput {
  name: string;
  aliases?: string[];
  description?: string | null;
  profileJson?: Record<string, unknown> | null;
  systemPrompt?: string | null;
  color?: string | null;
  emoji?: string | null;
  importance?: number;
}

export function getCharacter(db: Queryable, id: string): Promise<Character | null> {
  return findById<CharacterRow>(db, "characters", CHARACTER_COLUMNS, id);
}

/** A book's characters that its latest ingestion found, most important first. */
export async function listCharacters(db: Queryable, bookId: string): Promise<Character[]> {
  if (!isUuid(bookId)) return [];
  const rows = await db.query<CharacterRow>(
    `SELECT ${CHARACTER_COLUMNS} FROM characters WHERE book_id = $1 AND retired_at IS NULL ORDER BY importance DESC, name`,
    [bookId],
  );
  return rows.map(camelize);
}

/**
 * Every persona the book's characters rows hold, retired characters' included, oldest row first (so a
 * backup's file name, which depends on the order when two names collide, stays the same across runs).
 */
export async function listPersonas(db: Queryable, bookId: string): Promise<{ name: string; systemPrompt: string }[]> {
  if (!isUuid(bookId)) return [];
  const rows = await db.query<{ name: string; system_prompt: string }>(
    "SELECT name, system_prompt FROM characters WHERE book_id = $1 AND system_prompt IS NOT NULL ORDER BY created_at, id",
    [bookId],
  );
  return rows.map(camelize);
}

export interface SaveCharactersOptions {
  /**
   * Names this run found but could not write (a profile or persona pass failed for them): such a
   * character keeps what the previous run wrote, untouched.
   */
  alsoFound?: readonly string[];
}

export interface SavedCharacters {
  /** The written characters, in the order given. */
  characters: Character[];
  /** Characters no longer found that a reader has a session or preferences with: kept, marked retired. */
  retired: number;
  /** Characters no longer found that nobody has used: deleted. */
  removed: number;
}

/**
 * Writes one ingestion run's characters in one transaction. A character is matched by name and
 * updated in place, so it keeps its id and every session and preference pointing at it. A character
 * the run did not find is deleted only when no reader has a session or preferences with it;
 * otherwise it stays, with its last persona, marked retired. Nothing a reader made is ever deleted,
 * even where the frontend's foreign keys cascade: the book's character rows are locked first, so a
 * session being created for one of them either commits before the check that keeps it, or waits and
 * then fails on its foreign key instead of being cascaded away.
 */
export async function saveCharacters(
  db: Database,
  bookId: string,
  characters: readonly CharacterInput[],
  options: SaveCharactersOptions = {},
): Promise<SavedCharacters> {
  const names = characters.map((c) => c.name);
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate !== undefined) {
    throw new DatabaseError(`character "${duplicate}" appears twice in one book`, "unique_violation");
  }
  const found = new Set([...names, ...(options.alsoFound ?? [])]);
  return db.transaction(async (tx) => {
    const existing = await tx.query<{ id: string; name: string }>(
      "SELECT id, name FROM characters WHERE book_id = $1 ORDER BY created_at, id FOR UPDATE",
      [bookId],
    );
    const idByName = new Map<string, string>();
    for (const row of existing) if (!idByName.has(row.name)) idByName.set(row.name, row.id);
    const records = characters.map((c) => ({
      id: idByName.get(c.name) ?? null,
      name: c.name,
      aliases: c.aliases ?? [],
      description: c.description ?? null,
      profile_json: c.profileJson ?? null,
      system_prompt: c.systemPrompt ?? null,
      color: c.color ?? null,
      emoji: c.emoji ?? null,
      importance: c.importance ?? 0,
    }));

    const gone = existing.filter((row) => !found.has(row.name)).map((row) => row.id);
    let removed = 0;
    let retired = 0;
    if (gone.length > 0) {
      const deleted = await tx.query(
        `DELETE FROM characters c WHERE c.id IN (SELECT jsonb_array_elements_text($1::jsonb)::uuid)
           AND NOT EXISTS (SELECT 1 FROM chat_sessions s WHERE s.character_id = c.id)
           AND NOT EXISTS (SELECT 1 FROM user_preferences p WHERE p.character_id = c.id)
         RETURNING c.id`,
        [gone],
      );
      removed = deleted.length;
      const kept = await tx.query(
        `UPDATE characters SET retired_at = COALESCE(retired_at, now())
         WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb)::uuid) RETURNING id`,
        [gone],
      );
      retired = kept.length;
    }

    // One statement for the updates and one for the inserts: a round trip per character adds up over a WebSocket.
    const recordset = `jsonb_to_recordset($1::jsonb) AS x(id uuid, name text, aliases jsonb, description text, profile_json jsonb,
                                                     system_prompt text, color text, emoji text, importance integer)`;
    const updates = records.filter((r) => r.id !== null);
    const inserts = records.filter((r) => r.id === null);
    const rows: CharacterRow[] = [];
    if (updates.length > 0) {
      rows.push(
        ...(await tx.query<CharacterRow>(
          `UPDATE characters c SET aliases = x.aliases, description = x.description, profile_json = x.profile_json,
             system_prompt = x.system_prompt, color = x.color, emoji = x.emoji, importance = x.importance,
             retired_at = NULL, updated_at = now()
           FROM ${recordset} WHERE c.id = x.id
           RETURNING ${CHARACTER_COLUMNS.split(", ").map((c) => `c.${c}`).join(", ")}`,
          [updates],
        )),
      );
    }
    if (inserts.length > 0) {
      rows.push(
        ...(await tx.query<CharacterRow>(
          `INSERT INTO characters (book_id, name, aliases, description, profile_json, system_prompt, color, emoji, importance)
           SELECT $2, x.name, x.aliases, x.description, x.profile_json, x.system_prompt, x.color, x.emoji, x.importance
           FROM ${recordset}
           RETURNING ${CHARACTER_COLUMNS}`,
          [inserts, bookId],
        )),
      );
    }
    const byName = new Map(rows.map((r) => [r.name, camelize(r)]));
    return { characters: names.map((n) => byName.get(n)!), retired, removed };
  });
}
