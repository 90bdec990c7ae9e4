-- The spoiler guard on chat replies (common/prompt/spoiler-guard.ts), written when a book's ingestion
-- completes. characters: per character, where they first appear and where each of their names and
-- name words first occurs (positions 0 to 1); shingles: the book's 8-word runs with where each first
-- ends (common/prompt/book-shingles.ts), base64, about 10 bytes per word of the book. A book without a
-- row (ingested before this table) is guarded by nothing until it is ingested again.
CREATE TABLE IF NOT EXISTS book_spoiler_guards (
  book_id    uuid PRIMARY KEY REFERENCES books (id) ON DELETE CASCADE,
  characters jsonb NOT NULL CHECK (jsonb_typeof(characters) = 'array'),
  shingles   text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
