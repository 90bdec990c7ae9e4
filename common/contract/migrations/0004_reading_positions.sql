-- Spoiler-safe chat. A position is a fraction (0 to 1) of the book's text, counted in characters.
--
-- Written when a book's ingestion completes. chunk_ends[i] is the position at which chunk i ends
-- (ascending, one entry per chunk), so chat searches only the chunks a reader has read past;
-- checkpoints lists the positions at which character checkpoints were attempted (empty: the book's
-- characters are known only as of the whole book).
CREATE TABLE IF NOT EXISTS book_reading_positions (
  book_id     uuid PRIMARY KEY REFERENCES books (id) ON DELETE CASCADE,
  chunk_ends  jsonb NOT NULL CHECK (jsonb_typeof(chunk_ends) = 'array'),
  checkpoints jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(checkpoints) = 'array'),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Where each character is first mentioned, so a frontend can hide the characters a reader has not met.
CREATE TABLE IF NOT EXISTS character_first_appearances (
  character_id uuid PRIMARY KEY REFERENCES characters (id) ON DELETE CASCADE,
  position     double precision NOT NULL CHECK (position >= 0 AND position <= 1)
);

-- A character's profile and persona as known at a checkpoint before the end of the book, written from
-- the quotes, aliases and passages before it. The whole-book ones stay in characters.
CREATE TABLE IF NOT EXISTS character_checkpoints (
  character_id  uuid NOT NULL REFERENCES characters (id) ON DELETE CASCADE,
  position      double precision NOT NULL CHECK (position > 0 AND position < 1),
  profile_json  jsonb NOT NULL,
  system_prompt text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (character_id, position)
);
