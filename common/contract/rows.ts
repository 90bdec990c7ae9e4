/**
 * The rows the backend reads and writes, declared once in the database's snake_case (SPEC: Resources;
 * our own tables in common/contract/migrations/), and the camelCase shapes common/db returns them in.
 */

export const PROCESSING_STATUSES = ["pending", "processing", "completed", "failed"] as const;
export type ProcessingStatus = (typeof PROCESSING_STATUSES)[number];
export const LANGUAGES = ["English", "Urdu", "both"] as const;
export type Language = (typeof LANGUAGES)[number];
export type MessageRole = "user" | "assistant";

/** What the backend reads of a books row (the frontend's table; SPEC: Resources, books). */
export type BookRow = {
  id: string;
  title: string;
  author: string | null;
  description: string | null;
  language: Language;
  file_path: string | null;
  processing_status: ProcessingStatus;
};

export type CharacterRow = {
  id: string;
  book_id: string;
  name: string;
  description: string | null;
  system_prompt: string | null;
  profile_json: Record<string, unknown> | null;
  avatar_url: string | null;
  color: string | null;
  emoji: string | null;
  /** Ours: other names the book uses for the character. */
  aliases: string[];
  /** Ours: rank among the book's characters (mentions and quotes). */
  importance: number;
  /** Ours: when a re-ingestion last stopped finding the character, kept for a reader's sake; null while found. */
  retired_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

/** What the backend reads of a chat_sessions row (the frontend's table). */
export type ChatSessionRow = {
  id: string;
  user_id: string;
  character_id: string;
  book_id: string;
  /** Exchanges (a user message and its reply), not single messages. */
  message_count: number;
  preview: string | null;
  updated_at: Date;
};

export type MessageRow = {
  id: string;
  session_id: string;
  role: MessageRole;
  content: string;
  created_at: Date;
};

/** What the backend reads of a user_preferences row (the frontend's table), the lists as JSON arrays whatever their column type. */
export type UserPreferencesRow = {
  user_id: string;
  character_id: string;
  relationship_mode: string;
  custom_relationship: string | null;
  speech_modifiers: string[];
  behavioral_modifiers: string[];
  preference_summary: string | null;
};

export type BookIngestionRow = {
  book_id: string;
  attempts: number;
  last_error: string | null;
  chunk_count: number | null;
  /** The queue's job_id of the run that last completed the book. */
  completed_job_id: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  updated_at: Date;
};

type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;
export type Camelize<T> = { [K in keyof T as CamelCase<K & string>]: T[K] };

export type Book = Camelize<BookRow>;
export type Character = Camelize<CharacterRow>;
export type ChatSession = Camelize<ChatSessionRow>;
export type Message = Camelize<MessageRow>;
export type UserPreferences = Camelize<UserPreferencesRow>;
export type BookIngestion = Camelize<BookIngestionRow>;
