/**
 * The shape of the prompts the app sends, as far as a provider may rely on it: the marker lines
 * before the JSON payloads of the ingestion passes (and the payloads' schemas), and the headings and
 * labels of the chat-turn prompts. The prompt builders (common/prompt/) write them; a provider that
 * answers from the prompt's own material (the offline one) reads them back. It sits in the LLM port
 * so that both can import it without the adapter depending on the app's prompt assembly. Pure: no I/O.
 */
import { z } from "zod";
import type { ChatMessage } from "./index.ts";

// Ingestion passes: each user message is a marker line followed by the input as JSON ----------------

export const EXTRACTION_MARKER = "CHARACTER DATA (JSON):";
export const PERSONA_MARKER = "PERSONA DATA (JSON):";
export const DISCOVERY_MARKER = "BOOK SAMPLES (JSON):";

/** Models sometimes drop an empty list; a missing list means "none", not an invalid answer. */
const stringList = z.array(z.string()).default([]);

export const CharacterProfile = z.object({
  psychology: z.string().trim().min(1),
  voice: z.string().trim().min(1),
  motivations: stringList,
  relationships: z.array(z.object({ name: z.string().trim().min(1), type: z.string().trim().min(1) })).default([]),
  signatureThemes: stringList,
});
export type CharacterProfile = z.infer<typeof CharacterProfile>;

export const BookInfo = z.object({ title: z.string(), author: z.string().nullable() });
export type BookInfo = z.infer<typeof BookInfo>;

export const ExtractionInput = z.object({
  book: BookInfo,
  character: z.object({
    name: z.string(),
    aliases: z.array(z.string()),
    gender: z.string().nullable(),
    quotes: z.array(z.string()),
    mentionCount: z.number(),
    quoteCount: z.number(),
  }),
  /** Characters named near this one, most frequent first. */
  cooccurring: z.array(z.object({ name: z.string(), count: z.number() })),
  /** Short passages in which the character appears. */
  passages: z.array(z.string()),
});
export type ExtractionInput = z.infer<typeof ExtractionInput>;

export const PersonaInput = z.object({
  book: BookInfo,
  name: z.string(),
  profile: CharacterProfile,
  quotes: z.array(z.string()),
});
export type PersonaInput = z.infer<typeof PersonaInput>;

export const DiscoveryInput = z.object({
  book: BookInfo,
  language: z.string(),
  /** Chunks of the book sampled from beginning to end. */
  samples: z.array(z.string()),
});
export type DiscoveryInput = z.infer<typeof DiscoveryInput>;

export const Discovery = z.object({
  characters: z
    .array(
      z.object({
        name: z.string().trim().min(1),
        aliases: stringList,
        quotes: stringList,
      }),
    )
    .default([]),
});
export type Discovery = z.infer<typeof Discovery>;

/**
 * The JSON payload after `marker` in the last user message, or undefined when there is no such
 * message, no marker, or no valid JSON after it. For providers that answer from the data itself.
 */
export function readPayload(messages: readonly ChatMessage[], marker: string): unknown {
  const last = messages.findLast((m) => m.role === "user");
  if (!last) return undefined;
  const at = last.content.indexOf(marker);
  if (at < 0) return undefined;
  try {
    return JSON.parse(last.content.slice(at + marker.length));
  } catch {
    return undefined;
  }
}

// Chat turn -------------------------------------------------------------------------------------

export const SUMMARY_MAX_WORDS = 150;
export const PREFERENCES_HEADING = "## USER PREFERENCE MODIFIERS";
export const PASSAGES_HEADING = "## Relevant Passages";
export const SUMMARY_HEADING = "## Conversation Summary";
export const READING_POSITION_HEADING = "## How Far the Reader Has Read";
/** The character's own lines up to the reader's position, part of the persona (api/chat/knowledge.ts chooses them). */
export const OWN_LINES_HEADING = "## What You Have Said So Far";
export const PASSAGE_OPEN = "<<<BOOK PASSAGE>>>";
export const PASSAGE_CLOSE = "<<<END BOOK PASSAGE>>>";
/** Labels of the user-message sections of the rewrite and summary prompts (read back by the offline provider). */
export const REWRITE_HISTORY_LABEL = "Recent conversation:";
export const REWRITE_MESSAGE_LABEL = "The reader's latest message:";
export const SUMMARY_PREVIOUS_LABEL = "Current summary:";
export const SUMMARY_MESSAGES_LABEL = "Messages to fold in:";
export const NO_SUMMARY_YET = "(none yet)";
/** The summary section before anything has been folded into a summary (the first turns of a session). */
export const NO_SUMMARY_SECTION = "None yet: everything you and the reader have said to each other is in the messages that follow.";
/** Speaker label of the reader's lines in a transcript; the character's lines carry its name. */
export const READER_LABEL = "Reader";
