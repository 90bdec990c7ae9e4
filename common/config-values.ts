import { z } from "zod";

/**
 * How one environment variable's text becomes a value (common/config.ts reads the environment): each
 * is a schema that takes an empty or blank string as unset and refuses anything else it cannot read,
 * naming what it expected.
 */

export const empty = (v: unknown) => (typeof v === "string" && v.trim() === "" ? undefined : v);
export const optionalString = z.preprocess(empty, z.string().optional());

export function url(protocols: readonly string[], what: string) {
  return z.preprocess(
    empty,
    z
      .string()
      .refine((v) => {
        try {
          return protocols.includes(new URL(v).protocol);
        } catch {
          return false;
        }
      }, what)
      .optional(),
  );
}

export function integer(min: number, max: number, what: string) {
  return z.preprocess(
    empty,
    z
      .string()
      .regex(/^\d+$/, what)
      .transform(Number)
      .refine((n) => n >= min && n <= max, what)
      .optional(),
  );
}

const commaList = (v: string) =>
  v
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);

export const hostList = z.preprocess(
  empty,
  z
    .string()
    .transform((v) => commaList(v).map((h) => h.toLowerCase()))
    .refine((hosts) => hosts.every((h) => /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/.test(h)), "a comma list of host[:port]")
    .optional(),
);

export const httpUrl = url(["http:", "https:"], "an http(s) URL");

/** `*`, or a comma list whose every item passes `valid`, normalised by `normalise`. */
export function listOrAny(valid: (item: string) => boolean, normalise: (item: string) => string, what: string) {
  return z.preprocess(
    empty,
    z
      .string()
      .transform(commaList)
      .refine((items) => (items.length === 1 && items[0] === "*") || (items.length > 0 && items.every(valid)), what)
      .transform((items): string[] | "*" => (items[0] === "*" ? "*" : items.map(normalise)))
      .optional(),
  );
}

/** A dotted quad of decimals 0-255. */
export const IPV4_LITERAL = /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/** A name whose last label is a number (as the URL standard reads hosts): no DNS name, an IPv4 address in some spelling. */
export const endsInNumber = (host: string) => /(^|\.)(\d+|0x[0-9a-f]*)\.?$/.test(host);

export const HOST_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i;

export function isOrigin(value: string): boolean {
  try {
    const parsed = new URL(value);
    return (parsed.protocol === "http:" || parsed.protocol === "https:") && parsed.origin === value.replace(/\/$/, "").toLowerCase();
  } catch {
    return false;
  }
}
