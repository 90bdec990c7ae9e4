import { Counter, Histogram, type Registry } from "./prom.ts";
import { HTTP_BUCKETS } from "./http.ts";

/** The indexing metrics of SPEC's catalogue (SPEC: POST /character/chat, Metric catalogue), on the worker. */

/**
 * indexing_duration_seconds{pipeline}: how long one batch of chunks took through one of the two
 * index pipelines, retries included. `vector`: embedding the batch and writing it to the vector
 * index; `full_text`: writing it to the full-text index.
 */
export const INDEXING_PIPELINES = ["vector", "full_text"] as const;
export type IndexingPipeline = (typeof INDEXING_PIPELINES)[number];
/** The `store` label of indexing metrics names the role of the index, whichever adapter serves it. */
export type IndexStoreLabel = "qdrant" | "typesense";
export const INDEX_STORES: readonly IndexStoreLabel[] = ["qdrant", "typesense"];

export interface IndexingMetrics {
  chunksGenerated: Counter;
  chunksIndexed: Counter<"store">;
  embeddingsGenerated: Counter;
  duration: Histogram<"pipeline">;
  writeDuration: Histogram<"store">;
  errors: Counter<"store">;
}

export function createIndexingMetrics(worker: Registry[]): IndexingMetrics {
  return {
    chunksGenerated: new Counter({
      name: "indexing_chunks_generated_total",
      help: "Chunks the books were split into.",
      registers: worker,
    }),
    chunksIndexed: new Counter({
      name: "indexing_chunks_indexed_total",
      help: "Chunks written to an index, by store (qdrant = vector index, typesense = full-text index, whichever adapter serves it).",
      labelNames: ["store"],
      registers: worker,
    }),
    embeddingsGenerated: new Counter({
      name: "indexing_embeddings_generated_total",
      help: "Chunk embeddings received from the embedding model.",
      registers: worker,
    }),
    duration: new Histogram({
      name: "indexing_duration_seconds",
      help: "Time for one batch of chunks through an index pipeline, retries included (vector = embed and write to the vector index; full_text = write to the full-text index).",
      labelNames: ["pipeline"],
      buckets: HTTP_BUCKETS,
      registers: worker,
    }),
    writeDuration: new Histogram({
      name: "indexing_write_duration_seconds",
      help: "Time of one try at writing a batch of chunks to an index, by store.",
      labelNames: ["store"],
      buckets: HTTP_BUCKETS,
      registers: worker,
    }),
    errors: new Counter({
      name: "indexing_errors_total",
      help: "Failed index writes, by store.",
      labelNames: ["store"],
      registers: worker,
    }),
  };
}
