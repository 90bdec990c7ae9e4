-- The platform's tables (SPEC.md, Resources) and the backend's own.
--
-- Frontend-owned tables (books, user_library, chat_sessions, user_preferences, purchases, settings)
-- are created only where they do not exist yet (the embedded database, a developer's Postgres,
-- tests), with exactly the spec's fields plus ids and timestamps. Where the frontend created them,
-- IF NOT EXISTS leaves them as they are: the backend never alters them, and checks at start-up that
-- the columns it reads and writes are there (common/db/schema.ts).
--
-- Backend-owned tables (characters, messages and the private tables below) are created when missing
-- and otherwise extended: ADD COLUMN IF NOT EXISTS adds what is missing and never touches a column
-- that is there.
--
-- The frontend-owned tables are made as a hosted frontend most plausibly has them, cascades
-- included (deleting a book or a character takes its sessions and preferences with it). So the
-- backend itself never deletes a character a reader has a session or preferences with
-- (repositories.ts, saveCharacters), and never deletes a book.

-- Frontend-owned ----------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS books (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  title             text NOT NULL CHECK (char_length(title) >= 1),
  slug              text NOT NULL UNIQUE,
  author            text NOT NULL CHECK (char_length(author) >= 1),
  description       text NOT NULL CHECK (char_length(description) >= 10),
  language          text NOT NULL DEFAULT 'English' CHECK (language IN ('English', 'Urdu', 'both')),
  page_count        integer CHECK (page_count >= 0),
  cover_image_url   text,
  file_path         text,
  category_id       integer,
  uploader_id       uuid,
  status            text NOT NULL DEFAULT 'approved',
  processing_status text NOT NULL DEFAULT 'pending'
                    CHECK (processing_status IN ('pending', 'processing', 'completed', 'failed')),
  is_public         boolean NOT NULL DEFAULT true,
  is_free           boolean NOT NULL DEFAULT true,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS user_library (
  user_id        uuid NOT NULL,
  book_id        uuid NOT NULL REFERENCES books (id) ON DELETE CASCADE,
  reading_status text NOT NULL DEFAULT 'unread',
  current_page   integer NOT NULL DEFAULT 0 CHECK (current_page >= 0),
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, book_id)
);

-- Backend-owned: characters (needed before the frontend tables that reference it) ------------------

CREATE TABLE IF NOT EXISTS characters (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  book_id       uuid NOT NULL REFERENCES books (id) ON DELETE CASCADE,
  name          text NOT NULL CHECK (char_length(name) >= 1),
  description   text,
  system_prompt text,
  profile_json  jsonb,
  avatar_url    text,
  color         text CHECK (color ~ '^#[0-9a-fA-F]{6}$'),
  emoji         text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
-- The spec's columns, for a characters table made by the platform without some of them.
ALTER TABLE characters ADD COLUMN IF NOT EXISTS description text;
ALTER TABLE characters ADD COLUMN IF NOT EXISTS system_prompt text;
ALTER TABLE characters ADD COLUMN IF NOT EXISTS profile_json jsonb;
ALTER TABLE characters ADD COLUMN IF NOT EXISTS avatar_url text;
ALTER TABLE characters ADD COLUMN IF NOT EXISTS color text;
ALTER TABLE characters ADD COLUMN IF NOT EXISTS emoji text;
ALTER TABLE characters ADD COLUMN IF NOT EXISTS created_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE characters ADD COLUMN IF NOT EXISTS updated_at timestamptz NOT NULL DEFAULT now();
-- Ours: other names the book uses, rank among the book's characters, and when a re-ingestion last
-- stopped finding the character (kept because a reader has a session or preferences with it).
ALTER TABLE characters ADD COLUMN IF NOT EXISTS aliases jsonb NOT NULL DEFAULT '[]'::jsonb;
ALTER TABLE characters ADD COLUMN IF NOT EXISTS importance integer NOT NULL DEFAULT 0;
ALTER TABLE characters ADD COLUMN IF NOT EXISTS retired_at timestamptz;
CREATE INDEX IF NOT EXISTS characters_book_idx ON characters (book_id);

-- Frontend-owned, continued ---------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS chat_sessions (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id       uuid NOT NULL,
  character_id  uuid NOT NULL REFERENCES characters (id) ON DELETE CASCADE,
  book_id       uuid NOT NULL REFERENCES books (id) ON DELETE CASCADE,
  message_count integer NOT NULL DEFAULT 0 CHECK (message_count >= 0),
  preview       text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS user_preferences (
  id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id              uuid NOT NULL,
  character_id         uuid NOT NULL REFERENCES characters (id) ON DELETE CASCADE,
  relationship_mode    text NOT NULL DEFAULT 'stranger'
                       CHECK (relationship_mode IN ('stranger', 'friend', 'sibling', 'parent', 'child', 'partner', 'custom')),
  custom_relationship  text,
  speech_modifiers     text[] NOT NULL DEFAULT '{}'
                       CHECK (speech_modifiers <@ ARRAY['talk_less', 'no_analogies', 'use_simple_words', 'be_formal', 'be_informal']::text[]),
  behavioral_modifiers text[] NOT NULL DEFAULT '{}'
                       CHECK (behavioral_modifiers <@ ARRAY['be_funny', 'be_serious', 'be_flirty', 'be_protective', 'be_warm', 'be_cold']::text[]),
  preference_summary   text,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  UNIQUE (user_id, character_id)
);

CREATE TABLE IF NOT EXISTS purchases (
  id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  processor_session_id text NOT NULL UNIQUE,
  user_id              uuid,
  book_id              uuid REFERENCES books (id) ON DELETE SET NULL,
  amount               integer NOT NULL CHECK (amount >= 0),
  status               text NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS settings (
  key        text PRIMARY KEY,
  value      jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Backend-owned: messages ----------------------------------------------------------------------

-- The frontend inserts (session_id, role, content) directly, so every other column has a default.
-- The frontend orders messages by created_at: a saved exchange gives its reply a later created_at
-- than its question (repositories.ts, appendExchange).
CREATE TABLE IF NOT EXISTS messages (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  session_id uuid NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
  role       text NOT NULL CHECK (role IN ('user', 'assistant')),
  content    text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE messages ADD COLUMN IF NOT EXISTS id uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE messages ADD COLUMN IF NOT EXISTS created_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX IF NOT EXISTS messages_session_created_idx ON messages (session_id, created_at);

-- Backend-owned private tables -------------------------------------------------------------------

-- What ingestion knows about a book beyond books.processing_status.
CREATE TABLE IF NOT EXISTS book_ingestions (
  book_id      uuid PRIMARY KEY REFERENCES books (id) ON DELETE CASCADE,
  attempts     integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  last_error   text,
  chunk_count  integer CHECK (chunk_count >= 0),
  started_at   timestamptz,
  finished_at  timestamptz,
  updated_at   timestamptz NOT NULL DEFAULT now()
);

-- The rolling conversation summary of a session (messages that left the 10-message window).
CREATE TABLE IF NOT EXISTS chat_session_summaries (
  session_id uuid PRIMARY KEY REFERENCES chat_sessions (id) ON DELETE CASCADE,
  summary    text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
