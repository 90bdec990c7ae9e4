
/**
 * The columns the backend reads or writes in the tables the frontend owns, and the column types it
 * can work with. Where the frontend created a table, the backend never alters it: a missing or
 * incompatible column stops start-up with one line naming it, instead of failing chats and books
 * later with a database error.
 *
 * Types are compared by family, so the frontend's own choices pass where the backend's SQL works the
 * same: varchar for text, bigint for integer, timestamp for timestamptz, jsonb or json for text[],
 * and a Postgres enum for a text column whose values the backend reads or writes (its labels must
 * then include every value the backend must write; processing_status needs only the spec's two).
 */

type Family = "uuid" | "text" | "integer" | "timestamp" | "list";

interface Expected {
  family: Family;
  /** Values the backend writes to this column; an enum type must have them all. */
  writes?: readonly string[];
}

export const FRONTEND_COLUMNS: Readonly<Record<string, Readonly<Record<string, Expected>>>> = {
  books: {
    id: { family: "uuid" },
    title: { family: "text" },
    author: { family: "text" },
    description: { family: "text" },
    language: { family: "text" },
    file_path: { family: "text" },
    // Spoiler-safe chat: the reader's position is current_page / page_count.
    page_count: { family: "integer" },
    // Also `processing` and `failed` where the column accepts them (common/db/processing-status.ts).
    processing_status: { family: "text", writes: ["pending", "completed"] },
  },
  user_library: {
    user_id: { family: "uuid" },
    book_id: { family: "uuid" },
    current_page: { family: "integer" },
  },
  chat_sessions: {
    id: { family: "uuid" },
    user_id: { family: "uuid" },
    character_id: { family: "uuid" },
    book_id: { family: "uuid" },
    message_count: { family: "integer" },
    preview: { family: "text" },
    updated_at: { family: "timestamp" },
  },
  user_preferences: {
    user_id: { family: "uuid" },
    character_id: { family: "uuid" },
    relationship_mode: { family: "text" },
    custom_relationship: { family: "text" },
    speech_modifiers: { family: "list" },
    behavioral_modifiers: { family: "list" },
    preference_summary: { family: "text" },
  },
};

/** information_schema's data_type (and udt_name for arrays and enums) → family. */
const FAMILIES: Record<Family, readonly string[]> = {
  uuid: ["uuid"],
  text: ["text", "character varying", "character", "citext", "USER-DEFINED"],
  integer: ["integer", "bigint", "smallint"],
  timestamp: ["timestamp with time zone", "timestamp without time zone"],
  list: ["ARRAY:_text", "ARRAY:_varchar", "jsonb", "json"],
};

export class SchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SchemaError";
  }
}

export interface ColumnInfo {
  table: string;
  column: string;
  dataType: string;
  udtName: string;
  /** The enum's labels when the column's type is an enum. */
  enumLabels: string[] | null;
}

/** The first problem with the frontend's columns, as one line, or null. Pure: takes what the catalogue says. */
export function findSchemaProblem(columns: readonly ColumnInfo[]): string | null {
  const byKey = new Map(columns.map((c) => [`${c.table}.${c.column}`, c]));
  for (const [table, expected] of Object.entries(FRONTEND_COLUMNS)) {
    if (!columns.some((c) => c.table === table)) return `table ${table} does not exist`;
    for (const [column, { family, writes }] of Object.entries(expected)) {
      const found = byKey.get(`${table}.${column}`);
      if (!found) return `table ${table} has no column ${column}, which the backend needs (${family})`;
      const type = found.dataType === "ARRAY" ? `ARRAY:${found.udtName}` : found.dataType;
      if (!FAMILIES[family].includes(type)) {
        return `column ${table}.${column} is ${found.dataType === "ARRAY" ? `${found.udtName.slice(1)}[]` : found.dataType}; the backend needs ${family}`;
      }
      if (found.dataType === "USER-DEFINED") {
        if (!found.enumLabels) return `column ${table}.${column} is of type ${found.udtName}; the backend needs ${family}`;
        const missing = (writes ?? []).filter((v) => !found.enumLabels!.includes(v));
        if (missing.length > 0) {
          return `column ${table}.${column} (enum ${found.udtName}) lacks the value${missing.length > 1 ? "s" : ""} ${missing.join(", ")}, which the backend writes`;
        }
      }
    }
  }
  return null;
}
