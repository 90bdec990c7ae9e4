/**
 * The Qdrant and Typesense wire contracts: the committed subsets of their published OpenAPI
 * documents (tests/fixtures/openapi), loaded with what each SDK and server are known to do beside
 * the letter of the document. The wire suites and the index stand-in check exchanges against them.
 */
import { spyOn } from "bun:test";
import { readFileSync } from "node:fs";
import { TYPESENSE_ERRATA } from "../fixtures/openapi/errata.ts";
import { QDRANT_SUBSET_PATH, TYPESENSE_SUBSET_PATH } from "../fixtures/openapi/extract.ts";
import { loadContract, type Contract, type Json } from "./openapi-recorder.ts";

export const qdrantSubset = JSON.parse(readFileSync(QDRANT_SUBSET_PATH, "utf8")) as { [key: string]: Json };
export const typesenseSubset = JSON.parse(readFileSync(TYPESENSE_SUBSET_PATH, "utf8")) as { [key: string]: Json };

export function qdrantContract(): Contract {
  return loadContract(qdrantSubset, { requireCredentials: true });
}

export function typesenseContract(): Contract {
  return loadContract(typesenseSubset, {
    requireCredentials: true,
    errata: TYPESENSE_ERRATA,
    // typesense-js sends imports as text/plain and servers answer them as "text/plain; charset=utf8";
    // the document says application/octet-stream both ways. The bytes are JSON lines either way.
    contentTypeAliases: { "text/plain": "application/octet-stream" },
    // typesense-js forwards its own client-side option as a query parameter; servers ignore it.
    ignoredQueryParameters: ["throwOnFail"],
    jsonLinesOperations: ["importDocuments"],
  });
}

/**
 * The Qdrant SDK warns once per client when a key travels over plain http, as it must on loopback;
 * every other warning still shows. Returns the restore function (for afterAll).
 */
export function quietQdrantKeyWarning(): () => void {
  const original = console.warn;
  const warn = spyOn(console, "warn").mockImplementation((...args: unknown[]) => {
    if (!String(args[0]).startsWith("Api key is used with unsecure connection")) original(...args);
  });
  return () => warn.mockRestore();
}
