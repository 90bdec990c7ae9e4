import type { Logger } from "../log.ts";
import { DatabaseError, type Queryable } from "./index.ts";

/**
 * What books.processing_status accepts. SPEC shows only `pending` and `completed` (SPEC: States and transitions); the backend also
 * writes `processing` (a worker holds the job) and `failed` (it gave up), but only where the
 * frontend's column accepts them: an enum without those labels, or a CHECK that lists only the
 * spec's two values, would refuse the write. Where a value is refused, the book's row keeps what it
 * had (`pending` while processing, and `pending` after a failure: the reason is in book_ingestions),
 * and the job carries on.
 *
 * The column is read from the catalogue once per database handle, without a statement that can
 * fail (a failed statement would poison a caller's transaction): an enum's labels from pg_enum, and
 * each CHECK constraint on that column alone evaluated for the value. A constraint the catalogue
 * check cannot see (one over several columns, a trigger) is caught when the write is refused.
 */

export const SPEC_PROCESSING_STATUSES = ["pending", "completed"] as const;
export const OPTIONAL_PROCESSING_STATUSES = ["processing", "failed"] as const;
export type OptionalProcessingStatus = (typeof OPTIONAL_PROCESSING_STATUSES)[number];

interface Accepted {
  statuses: Set<OptionalProcessingStatus>;
  /** Set once the refusal has been logged, so it is logged once per database handle. */
  logged: boolean;
}

const known = new WeakMap<Queryable, Promise<Accepted>>();

export function isOptionalStatus(status: string): status is OptionalProcessingStatus {
  return (OPTIONAL_PROCESSING_STATUSES as readonly string[]).includes(status);
}

/** The CHECK expression of a pg_get_constraintdef text: `CHECK ((expr))` or `CHECK ((expr)) NOT VALID`. */
export function checkExpression(definition: string): string | null {
  const match = /^CHECK \((.*)\)(?: NOT VALID)?$/s.exec(definition.trim());
  return match ? match[1]! : null;
}

/** Reads the catalogue: which of the optional statuses the column accepts. */
export async function probeProcessingStatuses(db: Queryable): Promise<Set<OptionalProcessingStatus>> {
  const [column] = await db.query<{ type: string; labels: string[] | null; checks: string[] | null }>(
    `SELECT format_type(a.atttypid, a.atttypmod) AS type,
            (SELECT jsonb_agg(e.enumlabel) FROM pg_enum e WHERE e.enumtypid = a.atttypid) AS labels,
            (SELECT jsonb_agg(pg_get_constraintdef(c.oid)) FROM pg_constraint c
              WHERE c.conrelid = a.attrelid AND c.contype = 'c' AND c.conkey = ARRAY[a.attnum]) AS checks
       FROM pg_attribute a
      WHERE a.attrelid = to_regclass('books') AND a.attname = 'processing_status' AND NOT a.attisdropped`,
  );
  const accepted = new Set<OptionalProcessingStatus>();
  if (!column) return accepted;
  const expressions = (column.checks ?? []).map(checkExpression);
  for (const status of OPTIONAL_PROCESSING_STATUSES) {
    if (column.labels && !column.labels.includes(status)) continue;
    if (expressions.includes(null)) continue;
    if (expressions.length > 0) {
      // The column's own constraints, evaluated for the value under the column's name and type;
      // a CHECK passes unless false (SQL: null passes).
      const [row] = await db.query<{ ok: boolean }>(
        `SELECT (${expressions.join(") AND (")}) IS NOT FALSE AS ok FROM (SELECT $1::text::${column.type} AS processing_status) AS books`,
        [status],
      );
      if (!row?.ok) continue;
    }
    accepted.add(status);
  }
  return accepted;
}

function acceptedBy(db: Queryable): Promise<Accepted> {
  let entry = known.get(db);
  if (!entry) {
    entry = probeProcessingStatuses(db).then((statuses) => ({ statuses, logged: false }));
    // A probe that failed (the database was down) is tried again next time.
    entry.catch(() => known.delete(db));
    known.set(db, entry);
  }
  return entry;
}

function logRefused(accepted: Accepted, log: Logger | undefined): void {
  const refused = OPTIONAL_PROCESSING_STATUSES.filter((s) => !accepted.statuses.has(s));
  if (accepted.logged || refused.length === 0 || !log) return;
  accepted.logged = true;
  log.warn("books.processing_status does not accept some of the values the backend writes; those are not written", {
    refused: refused.join(", "),
    written: [...SPEC_PROCESSING_STATUSES, ...accepted.statuses].join(", "),
  });
}

/** Reads what the column accepts once (at start-up) and logs what will not be written. */
export async function detectProcessingStatuses(db: Queryable, log: Logger): Promise<Set<OptionalProcessingStatus>> {
  const accepted = await acceptedBy(db);
  logRefused(accepted, log);
  return accepted.statuses;
}

/** Whether to write `status` to books.processing_status on this database. */
export async function writesStatus(db: Queryable, status: string, log?: Logger): Promise<boolean> {
  if (!isOptionalStatus(status)) return true;
  const accepted = await acceptedBy(db);
  logRefused(accepted, log);
  return accepted.statuses.has(status);
}

/**
 * The column refused an optional value after all (a constraint the catalogue check could not read):
 * that value is not written again on this database handle. True when the error was that refusal.
 */
export async function refusedStatus(db: Queryable, status: string, err: unknown, log?: Logger): Promise<boolean> {
  if (!isOptionalStatus(status) || !(err instanceof DatabaseError) || (err.code !== "check_violation" && err.code !== "invalid_input")) return false;
  const accepted = await acceptedBy(db);
  accepted.statuses.delete(status);
  accepted.logged = false;
  logRefused(accepted, log);
  return true;
}
