/**
 * What the Qdrant and Typesense wire suites share on top of the recorder: scripting its answers by
 * operationId, reading back what the adapter sent, and checking that the committed spec subset is
 * still what the published document yields.
 */
import { afterEach, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_SPECS_DIR } from "../fixtures/openapi/extract.ts";
import {
  startRecorder,
  type Contract,
  type Exchange,
  type Json,
  type RecordedRequest,
  type Recorder,
  type RecorderOptions,
  type ScriptedResponse,
} from "./openapi-recorder.ts";

export type Route = ScriptedResponse | ((request: RecordedRequest) => ScriptedResponse);

/**
 * A `serve(routes)` that starts a recorder answering each operationId from `routes` (an unscripted
 * call is a problem the recorder reports); the recorder of each test is closed after it.
 */
export function scriptedServer(contract: Contract): (routes: Record<string, Route>, options?: RecorderOptions) => Recorder {
  let recorder: Recorder | undefined;
  afterEach(async () => {
    await recorder?.close();
    recorder = undefined;
  });
  return (routes, options) => {
    recorder = startRecorder(
      contract,
      (request, operation) => {
        const route = operation && routes[operation.operationId];
        if (!route) throw new Error(`unscripted ${request.method} ${request.path}`);
        return typeof route === "function" ? route(request) : route;
      },
      options,
    );
    return recorder;
  };
}

/** The operationIds called, in order; a request matching none is named by its method and path. */
export const operationIds = (r: Recorder) => r.exchanges.map((e) => e.operation?.operationId ?? `${e.request.method} ${e.request.path}`);
export const queryOf = (e: Exchange) => Object.fromEntries(e.request.query);

/** The freshness test, skipped with a printed reason where the published document is not at hand. */
export function subsetFreshnessTest(service: string, specFile: string, subset: { [key: string]: Json }, extract: () => unknown): void {
  const specPath = join(DEFAULT_SPECS_DIR, specFile);
  const specsPresent = existsSync(specPath);
  if (!specsPresent) console.log(`skipping ${service} subset freshness check: ${specPath} is absent`);
  test.skipIf(!specsPresent)(`the committed ${service} spec subset equals a fresh extraction from the published spec`, () => {
    expect(subset).toEqual(extract() as { [key: string]: Json });
  });
}
