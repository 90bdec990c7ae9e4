/** What the index stand-in's two services share in reading a request (dev/edge/index-stand-in.ts). */
import type { Json, RecordedRequest } from "../../tests/support/openapi-recorder.ts";

export type JsonObject = { [key: string]: Json };
/** A call the stand-in does not serve: recorded as a problem and answered with a 500. */
export class Unsupported extends Error {
  constructor(what: string) {
    super(`the index stand-in does not serve ${what}`);
  }
}

export const isObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value);

export function jsonBody(request: RecordedRequest): unknown {
  try {
    return JSON.parse(request.bodyText);
  } catch {
    return undefined;
  }
}

export function refuseKeys(where: string, object: JsonObject, allowed: readonly string[]): void {
  const extra = Object.keys(object).filter((k) => !allowed.includes(k) && object[k] !== null);
  if (extra.length > 0) throw new Unsupported(`${where} with ${extra.join(", ")}`);
}

export const asList = (value: Json | undefined): Json[] => (value === undefined || value === null ? [] : Array.isArray(value) ? value : [value]);
