import { z } from "zod";

/**
 * What the spoiler guard (api/chat/spoiler-filter.ts) knows of a book's people, built once at ingestion
 * from the book's text (ingest/spoiler-guard/people.ts) and stored with the book: every person's names and name words, each with where the book first uses it for them,
 * and how the book uses each word (as a name, on its own, or as an ordinary word), so that a turn can
 * list the names a reader has not met yet (lateNames) and tell a name from an ordinary word.
 *
 * The stored format only; pure.
 */

/**
 * A person as the guard knows them: where they first appear, and each name and name word with its
 * own first occurrence for them (positions 0–1); per word, the share of the book's uses of that word
 * that are ordinary, lower-case ones (absent when none is); and for a one-word term, whether the book
 * uses it on its own as a name (absent in rows written before: taken as yes). `character_id` is "" for
 * a person the book names who is not one of the book's characters.
 */
export const GuardCharacter = z.object({
  character_id: z.string(),
  first: z.number(),
  terms: z.array(z.object({ text: z.string(), first: z.number(), ordinary: z.array(z.number()).optional(), alone: z.boolean().optional() })),
});
export type GuardCharacter = z.infer<typeof GuardCharacter>;

/** A name word used as an ordinary word at least this often (share of its uses) is not taken for a name where capitals say nothing. */
export const MOSTLY_ORDINARY = 0.5;
