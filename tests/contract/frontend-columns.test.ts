import { describe, expect, test } from "bun:test";
import { checkExpression } from "../../common/db/processing-status.ts";
import { FRONTEND_COLUMNS, findSchemaProblem, type ColumnInfo } from "../../common/contract/frontend-columns.ts";

/** The frontend's columns exactly as the backend creates them, as information_schema describes them. */
function ours(): ColumnInfo[] {
  const types: Record<string, [string, string]> = {
    uuid: ["uuid", "uuid"],
    text: ["text", "text"],
    integer: ["integer", "int4"],
    timestamp: ["timestamp with time zone", "timestamptz"],
    list: ["ARRAY", "_text"],
  };
  return Object.entries(FRONTEND_COLUMNS).flatMap(([table, columns]) =>
    Object.entries(columns).map(([column, { family }]) => ({ table, column, dataType: types[family]![0], udtName: types[family]![1], enumLabels: null })),
  );
}

function replaced(table: string, column: string, change: Partial<ColumnInfo> | null): ColumnInfo[] {
  const columns = ours();
  const at = columns.findIndex((c) => c.table === table && c.column === column);
  if (change === null) columns.splice(at, 1);
  else columns[at] = { ...columns[at]!, ...change };
  return columns;
}

const STATUSES = ["pending", "processing", "completed", "failed"];

describe("checking the frontend's columns", () => {
  test.each([
    { name: "the backend's own schema", columns: ours(), problem: null },
    { name: "varchar for text", columns: replaced("books", "title", { dataType: "character varying", udtName: "varchar" }), problem: null },
    { name: "bigint for integer", columns: replaced("chat_sessions", "message_count", { dataType: "bigint", udtName: "int8" }), problem: null },
    { name: "timestamp without time zone", columns: replaced("chat_sessions", "updated_at", { dataType: "timestamp without time zone", udtName: "timestamp" }), problem: null },
    { name: "jsonb for a modifier list", columns: replaced("user_preferences", "speech_modifiers", { dataType: "jsonb", udtName: "jsonb" }), problem: null },
    {
      name: "an enum with every status the backend writes",
      columns: replaced("books", "processing_status", { dataType: "USER-DEFINED", udtName: "book_status", enumLabels: STATUSES }),
      problem: null,
    },
    { name: "a missing column", columns: replaced("chat_sessions", "preview", null), problem: "table chat_sessions has no column preview, which the backend needs (text)" },
    { name: "a missing table", columns: ours().filter((c) => c.table !== "user_preferences"), problem: "table user_preferences does not exist" },
    { name: "text where a uuid is needed", columns: replaced("books", "id", { dataType: "text", udtName: "text" }), problem: "column books.id is text; the backend needs uuid" },
    { name: "an integer array for a list", columns: replaced("user_preferences", "behavioral_modifiers", { udtName: "_int4" }), problem: "column user_preferences.behavioral_modifiers is int4[]; the backend needs list" },
    {
      // processing and failed are written only where the column accepts them (common/db/processing-status.ts).
      name: "an enum of the spec's two statuses only",
      columns: replaced("books", "processing_status", { dataType: "USER-DEFINED", udtName: "book_status", enumLabels: ["pending", "completed"] }),
      problem: null,
    },
    {
      name: "an enum without a status of the spec",
      columns: replaced("books", "processing_status", { dataType: "USER-DEFINED", udtName: "book_status", enumLabels: ["pending", "processing", "failed"] }),
      problem: "column books.processing_status (enum book_status) lacks the value completed, which the backend writes",
    },
    {
      name: "a user-defined type that is not an enum",
      columns: replaced("books", "title", { dataType: "USER-DEFINED", udtName: "citext_domain", enumLabels: null }),
      problem: "column books.title is of type citext_domain; the backend needs text",
    },
  ])("$name", ({ columns, problem }) => {
    expect(findSchemaProblem(columns)).toBe(problem);
  });
});

describe("reading a CHECK constraint on processing_status", () => {
  test.each([
    ["CHECK ((processing_status = ANY (ARRAY['pending'::text, 'completed'::text])))", "(processing_status = ANY (ARRAY['pending'::text, 'completed'::text]))"],
    ["CHECK ((processing_status <> 'failed'::text)) NOT VALID", "(processing_status <> 'failed'::text)"],
    ["FOREIGN KEY (x) REFERENCES y(id)", null],
  ])("%s", (definition, expression) => {
    expect(checkExpression(definition)).toBe(expression);
  });
});
