import { describe, expect, test } from "bun:test";
import { selfFileHost } from "../../common/local/listen-address.ts";

describe("selfFileHost", () => {
  const cases: [host: string, port: number, entry: string | undefined][] = [
    ["127.0.0.1", 3000, "127.0.0.1:3000"],
    ["127.0.0.2", 3000, "127.0.0.2:3000"],
    ["localhost", 8080, "localhost:8080"],
    ["::1", 3000, "[::1]:3000"],
    // The default port is written too: a bare host entry would allow every port of it.
    ["127.0.0.1", 80, "127.0.0.1:80"],
    ["0.0.0.0", 3000, undefined],
    ["::", 3000, undefined],
    ["192.168.1.20", 3000, undefined],
    ["api.internal", 3000, undefined],
  ];
  test.each(cases)("listening on %s:%d allows %p for the server's own files", (host, port, entry) => {
    expect(selfFileHost(host, port)).toBe(entry);
  });
});
