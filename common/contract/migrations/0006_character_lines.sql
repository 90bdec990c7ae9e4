-- What a character has said up to any point of the book, for a reader part-way through: every line the
-- book confidently gives them (at most 400, each at most 300 characters), in book order, each with the
-- position (0 to 1) at which it ends. A chat turn quotes a few of those before the reader's position in
-- the persona; no model call is made for them. Written when a book's ingestion completes.
CREATE TABLE IF NOT EXISTS character_lines (
  character_id uuid PRIMARY KEY REFERENCES characters (id) ON DELETE CASCADE,
  lines        jsonb NOT NULL CHECK (jsonb_typeof(lines) = 'array')
);
