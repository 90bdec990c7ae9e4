import type { RetrievalResult } from "./retriever.ts";

/**
 * Why a chat turn has no passages of the book, told to the reader in the `done` event
 * (`sources_missing`) and to the operator in the log, instead of an empty `sources` alone:
 * - `before_first_passage`: the reader has not finished the book's first passage, so none may be shown;
 * - `index_loading`: a search went on without the book because its index is still loading into
 *   memory (a large book on the embedded indexes, for the first turns after the API starts);
 * - `search_failed`: the query's embedding or a search failed (the log has the error);
 * - `no_match`: the searches ran and found nothing.
 * The first that holds is given. Pure: no I/O.
 */
export const NO_SOURCES_REASONS = ["before_first_passage", "index_loading", "search_failed", "no_match"] as const;
export type NoSourcesReason = (typeof NO_SOURCES_REASONS)[number];

export function noSourcesReason(maxChunkIndex: number | undefined, retrieved: Pick<RetrievalResult, "chunks" | "degraded" | "loading">): NoSourcesReason | undefined {
  if (retrieved.chunks.length > 0) return undefined;
  if (maxChunkIndex === -1) return "before_first_passage";
  if (retrieved.loading.length > 0) return "index_loading";
  if (retrieved.degraded.some((step) => step !== "rerank")) return "search_failed";
  return "no_match";
}
