-- The spec's resources that this backend reads or writes, plus purchases and settings so that a
-- local database is complete. Users live in the frontend's system: user_id columns are plain uuids.

CREATE TABLE books (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  title             text NOT NULL CHECK (length(title) > 0),
  author            text,
  description       text,
  cover_image_url   text,
  language          text NOT NULL DEFAULT 'English' CHECK (language IN ('English', 'Urdu', 'both')),
  file_path         text,
  price_cents       integer NOT NULL DEFAULT 0 CHECK (price_cents >= 0),
  processing_status text NOT NULL DEFAULT 'pending'
                    CHECK (processing_status IN ('pending', 'processing', 'completed', 'failed')),
  processing_error  text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE user_library (
  user_id    uuid NOT NULL,
  book_id    uuid NOT NULL REFERENCES books (id) ON DELETE CASCADE,
  added_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, book_id)
);

CREATE TABLE characters (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  book_id       uuid NOT NULL REFERENCES books (id) ON DELETE CASCADE,
  name          text NOT NULL CHECK (length(name) > 0),
  aliases       jsonb NOT NULL DEFAULT '[]'::jsonb,
  description   text,
  profile_json  jsonb,
  system_prompt text,
  color         text CHECK (color ~ '^#[0-9a-fA-F]{6}$'),
  emoji         text,
  importance    integer NOT NULL DEFAULT 0,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  UNIQUE (book_id, name)
);

-- Characters are upserted by (book_id, name) on re-ingestion so that sessions keep pointing at them;
-- a character that disappears from a book takes its sessions and preferences with it (CASCADE).
CREATE TABLE chat_sessions (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id       uuid NOT NULL,
  character_id  uuid NOT NULL REFERENCES characters (id) ON DELETE CASCADE,
  book_id       uuid NOT NULL REFERENCES books (id) ON DELETE CASCADE,
  title         text,
  message_count integer NOT NULL DEFAULT 0 CHECK (message_count >= 0),
  preview       text,
  summary       text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chat_sessions_user_idx ON chat_sessions (user_id, updated_at DESC);
CREATE INDEX chat_sessions_character_idx ON chat_sessions (character_id);

-- seq orders messages: both halves of an exchange are written in one transaction, so they share
-- created_at (now() is the transaction's start time).
CREATE TABLE messages (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  seq        bigint GENERATED ALWAYS AS IDENTITY,
  session_id uuid NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
  role       text NOT NULL CHECK (role IN ('user', 'assistant')),
  content    text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX messages_session_idx ON messages (session_id, seq);

CREATE TABLE user_preferences (
  user_id              uuid NOT NULL,
  character_id         uuid NOT NULL REFERENCES characters (id) ON DELETE CASCADE,
  relationship_mode    text NOT NULL DEFAULT 'neutral'
                       CHECK (relationship_mode IN ('neutral', 'friend', 'mentor', 'confidant', 'rival', 'romantic')),
  speech_modifiers     jsonb NOT NULL DEFAULT '[]'::jsonb,
  behavioral_modifiers jsonb NOT NULL DEFAULT '[]'::jsonb,
  preference_summary   text,
  updated_at           timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, character_id)
);

CREATE TABLE purchases (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id      uuid NOT NULL,
  book_id      uuid NOT NULL REFERENCES books (id) ON DELETE RESTRICT,
  amount_cents integer NOT NULL CHECK (amount_cents >= 0),
  currency     text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
  status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed', 'refunded', 'failed')),
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX purchases_user_idx ON purchases (user_id);

CREATE TABLE settings (
  user_id            uuid PRIMARY KEY,
  language           text NOT NULL DEFAULT 'English' CHECK (language IN ('English', 'Urdu', 'both')),
  spoiler_protection boolean NOT NULL DEFAULT true,
  updated_at         timestamptz NOT NULL DEFAULT now()
);
