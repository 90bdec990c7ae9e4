import { describe, expect, test } from "bun:test";
import { asHttpError, HttpError } from "../../api/errors.ts";
import { NotFoundError, StoreUnavailableError, UnusableInputError } from "../../api/service-errors.ts";

describe("the services' errors as HTTP answers", () => {
  const cause = new Error("connection refused");
  test.each([
    ["a missing session is a 404", new NotFoundError("session not found"), 404, "session not found"],
    ["a book that is not in the database is a 422", new UnusableInputError("book not found"), 422, "book not found"],
    ["a database that fails is a 500 naming only the store", new StoreUnavailableError("database unavailable", { cause }), 500, "database unavailable"],
    ["an HttpError keeps its own status", new HttpError(413, "too large"), 413, "too large"],
  ] as const)("%s", (_name, error, status, message) => {
    const answer = asHttpError(error);
    expect(answer?.status).toBe(status);
    expect(answer?.message).toBe(message);
  });

  test("the cause of a store failure is kept for the log", () => {
    expect(asHttpError(new StoreUnavailableError("queue unavailable", { cause }))?.cause).toBe(cause);
  });

  test("any other error is not an HTTP answer, so it stays a 500 'internal error'", () => {
    expect(asHttpError(new Error("bug"))).toBeUndefined();
    expect(asHttpError("not an error")).toBeUndefined();
  });
});
