import { expect } from "bun:test";
import { UpstreamError, type UpstreamService } from "../../common/upstream.ts";

/**
 * How a call ended, for the adapter suites whose cases are about failures: the error a call must
 * reject with, and what a stream yielded before it stopped.
 */

/** The UpstreamError the call rejects with (of `service`, when given); fails the test if it resolves or throws anything else. */
export async function upstreamFailure(promise: Promise<unknown>, service?: UpstreamService): Promise<UpstreamError> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(UpstreamError);
  if (service) expect((error as UpstreamError).service).toBe(service);
  return error as UpstreamError;
}

/** Every delta a stream yielded, and the error that ended it early, if one did. */
export async function collectDeltas(stream: AsyncIterable<string>): Promise<{ deltas: string[]; error?: unknown }> {
  const deltas: string[] = [];
  try {
    for await (const delta of stream) deltas.push(delta);
    return { deltas };
  } catch (error) {
    return { deltas, error };
  }
}
