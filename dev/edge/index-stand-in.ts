/**
 * Qdrant and Typesense as one loopback server that keeps what it is sent and answers searches over
 * it, for suites that need the production index adapters to work end to end where neither server
 * can be installed. Both speak the wire format of the published documents: every request and every
 * answer is checked against the same contracts as the wire suites (tests/support/index-contracts.ts).
 *
 *   const indexes = startIndexStandIn();
 *   // QDRANT_URL=indexes.qdrant.url, QDRANT_API_KEY=indexes.qdrant.apiKey, and the same for TYPESENSE_
 *   indexes.problems();                       // [] while every exchange kept to the contract
 *   indexes.typesense.documents(bookId);      // what the adapter stored
 *
 * Only what the adapters call is served (common/vector/qdrant.ts, common/text-index/typesense.ts):
 *
 *   Qdrant     create a collection (one unnamed vector, Cosine or Dot), create a payload index,
 *              upsert points, query by a vector (a filter of must/should/must_not over match and
 *              range conditions and has_id), count points, drop a collection.
 *   Typesense  create, describe and drop a collection, import documents (JSON lines, create or
 *              upsert), search: `q` over the `query_by` fields ranked by BM25 (tokens are runs of
 *              letters and digits, case and accents folded; no typos, prefixes or dropped tokens),
 *              or `*` for every document; `filter_by` clauses joined by `&&` (numeric comparisons
 *              and lists, `field:=value` and `field:=[a,b]` on strings).
 *
 * Anything else (another operation, parameter or filter form) is not guessed at: it is answered with
 * a 500 and listed by `problems()`, so a suite notices when an adapter starts asking for more.
 */
import { checkExchange, recordRequest, type Contract, type Exchange, type RecordedRequest, type Responder } from "../../tests/support/openapi-recorder.ts";
import { qdrantContract, typesenseContract } from "../../tests/support/index-contracts.ts";
import { byPointId, qdrantResponder, type QdrantCollection, type StoredPoint } from "./qdrant-stand-in.ts";
import type { JsonObject } from "./stand-in-requests.ts";
import { typesenseResponder, type TypesenseCollection } from "./typesense-stand-in.ts";

export type { StoredPoint };

export const QDRANT_PATH = "/qdrant";
export const TYPESENSE_PATH = "/typesense";

export interface StandInService {
  /** What the adapter is configured with: the server's address and this service's mount point. */
  readonly url: string;
  readonly apiKey: string;
  readonly exchanges: readonly Exchange[];
  /** Exchanges of one operationId, in order. */
  calls(operationId: string): Exchange[];
}

export interface IndexStandIn {
  readonly url: string;
  readonly qdrant: StandInService & {
    /** The points of a collection, by id; [] when it does not exist. */
    points(collection: string): StoredPoint[];
  };
  readonly typesense: StandInService & {
    /** The documents of a collection, in import order; [] when it does not exist. */
    documents(collection: string): JsonObject[];
  };
  /** Every request or answer that broke its contract, and every call the stand-in does not serve. */
  problems(): string[];
  close(): Promise<void>;
}

export interface IndexStandInOptions {
  qdrantApiKey?: string;
  typesenseApiKey?: string;
}

/** One service of the stand-in: what tests read of it, and how it answers a request. */
function createService(contract: Contract, url: string, apiKey: string, respond: Responder) {
  const exchanges: Exchange[] = [];
  const service: StandInService = {
    url,
    apiKey,
    exchanges,
    calls: (operationId) => exchanges.filter((e) => e.operation?.operationId === operationId),
  };
  const handle = (request: RecordedRequest): Response => {
    const { exchange, response } = checkExchange(contract, request, respond);
    exchanges.push(exchange);
    return response ?? new Response(null, { status: 500 });
  };
  return { service, handle };
}


export function startIndexStandIn(options: IndexStandInOptions = {}): IndexStandIn {
  const qdrantCollections = new Map<string, QdrantCollection>();
  const typesenseCollections = new Map<string, TypesenseCollection>();
  /** Mount point -> service; filled once the server's port is known. */
  const services = new Map<string, ReturnType<typeof createService>>();
  const strays: string[] = [];

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const { pathname } = new URL(req.url);
      for (const [prefix, service] of services) {
        if (pathname.startsWith(`${prefix}/`)) return service.handle(await recordRequest(req, prefix));
      }
      strays.push(`no service at ${req.method} ${pathname}`);
      return new Response("not found", { status: 404 });
    },
  });
  const url = `http://127.0.0.1:${server.port}`;
  const qdrantKey = options.qdrantApiKey ?? "stand-in-qdrant-key";
  const typesenseKey = options.typesenseApiKey ?? "stand-in-typesense-key";
  const qdrant = createService(qdrantContract(), `${url}${QDRANT_PATH}`, qdrantKey, qdrantResponder(qdrantKey, qdrantCollections));
  const typesense = createService(typesenseContract(), `${url}${TYPESENSE_PATH}`, typesenseKey, typesenseResponder(typesenseKey, typesenseCollections));
  services.set(QDRANT_PATH, qdrant).set(TYPESENSE_PATH, typesense);

  return {
    url,
    qdrant: {
      ...qdrant.service,
      points: (collection) => [...(qdrantCollections.get(collection)?.points.values() ?? [])].sort(byPointId),
    },
    typesense: {
      ...typesense.service,
      documents: (collection) => [...(typesenseCollections.get(collection)?.documents.values() ?? [])],
    },
    problems: () => [...strays, ...[qdrant, typesense].flatMap(({ service }) => service.exchanges.flatMap((e) => e.problems))],
    close: () => server.stop(true),
  };
}
