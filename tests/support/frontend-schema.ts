import { join } from "node:path";
import type { Database, Queryable } from "../../common/db/index.ts";
import { saveCharacters } from "../../common/db/characters.ts";

/** The frontend's own migration: its tables as it would create them before the backend starts. */
export const FRONTEND_SCHEMA_FILE = join(import.meta.dir, "..", "fixtures", "db", "frontend-schema.sql");

export async function createFrontendSchema(db: Queryable): Promise<void> {
  await db.exec(await Bun.file(FRONTEND_SCHEMA_FILE).text());
}

export interface FrontendRows {
  bookId: string;
  userId: string;
  characterId: string;
  sessionId: string;
}

/**
 * One insert per table of SPEC.md's Resources, each with exactly the columns the frontend sends
 * (SPEC: the upload form's fields, the session, message and preference routes, the payment
 * webhook, the admin settings); the character is the backend's own write.
 */
export async function insertFrontendRows(db: Database): Promise<FrontendRows> {
  const bookId = crypto.randomUUID();
  const userId = crypto.randomUUID();
  await db.query(
    `INSERT INTO books (id, title, slug, author, description, language, page_count, cover_image_url, file_path,
                        category_id, uploader_id, status, processing_status, is_public, is_free)
     VALUES ($1, 'Emma', $2, 'Jane Austen', 'A matchmaker in Highbury meddles.', 'English', 474,
             $3, $4, 3, $5, 'approved', 'pending', true, true)`,
    [bookId, `emma-${bookId.slice(0, 8)}`, `https://cdn.example/covers/${bookId}/emma.jpg`, `books/${bookId}/emma.txt`, userId],
  );
  await db.query("INSERT INTO user_library (user_id, book_id, reading_status, current_page) VALUES ($1, $2, 'unread', 0)", [userId, bookId]);
  const { characters } = await saveCharacters(db, bookId, [{ name: "Emma Woodhouse", systemPrompt: "I am Emma." }]);
  const characterId = characters[0]!.id;
  const [session] = await db.query<{ id: string }>(
    "INSERT INTO chat_sessions (user_id, character_id, book_id) VALUES ($1, $2, $3) RETURNING id",
    [userId, characterId, bookId],
  );
  const sessionId = session!.id;
  await db.query("INSERT INTO messages (session_id, role, content) VALUES ($1, 'user', 'Who is Mr. Knightley to you?')", [sessionId]);
  await db.query(
    `INSERT INTO user_preferences (user_id, character_id, relationship_mode, custom_relationship, speech_modifiers,
                                   behavioral_modifiers, preference_summary)
     VALUES ($1, $2, 'custom', 'my matchmaking rival', '{talk_less,be_informal}', '{be_funny}', 'Tease me.')`,
    [userId, characterId],
  );
  await db.query("INSERT INTO purchases (processor_session_id, user_id, book_id, amount, status) VALUES ($1, $2, $3, 499, 'completed')", [
    `cs_test_${bookId}`,
    userId,
    bookId,
  ]);
  await db.query(
    `INSERT INTO settings (key, value) VALUES ('max_file_size', '104857600'::jsonb)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
  );
  return { bookId, userId, characterId, sessionId };
}
