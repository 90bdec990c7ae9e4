-- The file a book was ingested from by `npm run ingest` (SHA-256 of its bytes). Ingesting the same
-- file again updates that book instead of adding a copy. Ours: the frontend's books table is not
-- given a column for it.
CREATE TABLE IF NOT EXISTS book_sources (
  book_id      uuid PRIMARY KEY REFERENCES books (id) ON DELETE CASCADE,
  content_hash text NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
  created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS book_sources_content_hash ON book_sources (content_hash);
