/**
 * The worker side of a PGlite database run off the main thread (see createPgliteDatabase's `thread`
 * option). Requests are handled strictly in arrival order, one at a time, as they would be on one
 * connection; each answer carries the request's id and either a value or the DatabaseError fields.
 */
import { parentPort } from "node:worker_threads";
import { PGlite } from "@electric-sql/pglite";
import { pgliteCreateOptions } from "./pglite-options.ts";
import { DatabaseError } from "./index.ts";

export type ThreadRequest =
  | { id: number; op: "open"; dataDir: string | undefined }
  | { id: number; op: "query"; text: string; params: unknown[] }
  | { id: number; op: "exec"; sql: string }
  | { id: number; op: "close" };

export type ThreadAnswer =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: { message: string; code: DatabaseError["code"]; sqlState: string | undefined } };

let pg: PGlite | undefined;

async function handle(request: ThreadRequest): Promise<unknown> {
  if (request.op === "open") {
    pg = await PGlite.create(pgliteCreateOptions(request.dataDir));
    return undefined;
  }
  if (!pg) throw new DatabaseError("the database is not open", "connection");
  switch (request.op) {
    case "query":
      return (await pg.query(request.text, request.params)).rows;
    case "exec":
      await pg.exec(request.sql);
      return undefined;
    case "close":
      await pg.close();
      pg = undefined;
      return undefined;
  }
}

let queue: Promise<void> = Promise.resolve();
parentPort?.on("message", (data: ThreadRequest) => {
  queue = queue.then(async () => {
    let answer: ThreadAnswer;
    try {
      answer = { id: data.id, ok: true, value: await handle(data) };
    } catch (err) {
      const error = DatabaseError.from(err);
      answer = { id: data.id, ok: false, error: { message: error.message, code: error.code, sqlState: error.sqlState } };
    }
    parentPort?.postMessage(answer);
  });
});
