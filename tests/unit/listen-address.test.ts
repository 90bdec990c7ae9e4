import { describe, expect, test } from "bun:test";
import { isLoopbackHost, listenAddress, selfFileHost } from "../../common/listen-address.ts";

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

describe("isLoopbackHost and the URL that reaches a server", () => {
  test.each([
    ["127.0.0.1", true],
    ["127.0.0.2", true],
    ["127.255.255.254", true],
    ["::1", true],
    ["0:0:0:0:0:0:0:1", true],
    ["0000:0000:0000:0000:0000:0000:0000:0001", true],
    ["[::1]", true],
    ["::ffff:127.0.0.1", true],
    ["::ffff:7f00:2", true],
    ["localhost", true],
    ["LOCALHOST", true],
    ["app.localhost", true],
    ["ip6-localhost", true],
    ["ip6-loopback", true],
    ["0.0.0.0", false],
    ["::", false],
    ["0:0:0:0:0:0:0:0", false],
    ["::ffff:10.0.0.1", false],
    ["::127.0.0.1", false],
    ["128.0.0.1", false],
    ["192.168.1.20", false],
    ["localhost.evil.example", false],
    ["api", false],
  ])("%s is loopback: %p", (host, loopback) => {
    expect(isLoopbackHost(host)).toBe(loopback);
    expect(listenAddress(host, 3000).network).toBe(!loopback);
  });

  test.each([
    ["0.0.0.0", "http://127.0.0.1:3000"],
    ["::", "http://[::1]:3000"],
    ["0:0:0:0:0:0:0:0", "http://[::1]:3000"],
    ["0:0:0:0:0:0:0:1", "http://[0:0:0:0:0:0:0:1]:3000"],
    ["localhost", "http://localhost:3000"],
  ])("a server on %s is reached at %s", (host, url) => {
    expect(listenAddress(host, 3000).url).toBe(url);
  });
});
