import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { FileUrlError, checkFileUrlHost, checkFileUrlSyntax, downloadBook, type DownloadOptions } from "../../common/file-url.ts";

async function refusal(p: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof p === "function" ? p() : p);
  } catch (err) {
    if (err instanceof FileUrlError) return err.reason;
    throw err;
  }
  return "accepted";
}

describe("checkFileUrlSyntax", () => {
  test.each([
    ["https://books.example.com/a/pride.txt", "accepted"],
    ["http://books.example.com/notes.MD", "accepted"],
    ["https://books.example.com/a%20b.txt?sig=1", "accepted"],
    ["ftp://books.example.com/pride.txt", "scheme"],
    ["file:///etc/passwd.txt", "scheme"],
    ["data:text/plain,hello.txt", "scheme"],
    ["https://books.example.com/pride.pdf", "extension"],
    ["https://books.example.com/pride.txt.exe", "extension"],
    ["https://books.example.com/", "extension"],
    ["https://user:pw@books.example.com/pride.txt", "invalid_url"],
    ["not a url", "invalid_url"],
  ])("%s → %s", async (url, expected) => {
    expect(await refusal(() => checkFileUrlSyntax(url))).toBe(expected);
  });
});

describe("checkFileUrlHost", () => {
  const resolveHost = async (host: string) =>
    ({ "public.example": ["93.184.215.14"], "sneaky.example": ["93.184.215.14", "127.0.0.1"], "meta.example": ["169.254.169.254"] })[host] ?? [];

  test.each([
    ["http://public.example/a.txt", [], "accepted"],
    ["http://sneaky.example/a.txt", [], "forbidden_host"],
    ["http://meta.example/a.txt", [], "forbidden_host"],
    ["http://nowhere.example/a.txt", [], "unresolvable"],
    ["http://127.0.0.1/a.txt", [], "forbidden_host"],
    ["http://2130706433/a.txt", [], "forbidden_host"],
    ["http://0x7f.1/a.txt", [], "forbidden_host"],
    ["http://0177.0.0.1/a.txt", [], "forbidden_host"],
    ["http://[::ffff:127.0.0.1]/a.txt", [], "forbidden_host"],
    ["http://[::1]:8080/a.txt", [], "forbidden_host"],
    ["http://0.0.0.0/a.txt", [], "forbidden_host"],
    ["http://10.0.0.5/a.txt", [], "forbidden_host"],
    ["http://127.0.0.1:8080/a.txt", ["127.0.0.1:8080"], "accepted"],
    ["http://127.0.0.1:8081/a.txt", ["127.0.0.1:8080"], "forbidden_host"],
    ["http://127.0.0.1:9/a.txt", ["127.0.0.1"], "accepted"],
    ["http://sneaky.example/a.txt", ["sneaky.example"], "accepted"],
  ] as const)("%s with allow-list %p → %s", async (url, allowedHosts, expected) => {
    expect(await refusal(checkFileUrlHost(new URL(url), { allowedHosts, resolveHost }))).toBe(expected);
  });
});

describe("downloadBook", () => {
  let server: ReturnType<typeof Bun.serve>;
  let other: ReturnType<typeof Bun.serve>;
  let base: string;
  const big = "x".repeat(5000);
  const utf8Across64k = "a".repeat(65535) + "é" + "b".repeat(10);

  beforeAll(() => {
    other = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("secret") });
    server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch(req) {
        const path = new URL(req.url).pathname;
        switch (path) {
          case "/book.txt":
            return new Response("It was a bright cold day.\n");
          case "/big.txt":
            return new Response(big);
          case "/streamed-big.txt":
            return new Response(
              new ReadableStream({
                pull(c) {
                  c.enqueue(new TextEncoder().encode(big));
                  c.close();
                },
              }),
            );
          case "/binary.txt":
            return new Response(new Uint8Array([104, 105, 0, 1, 2]));
          case "/latin1.txt":
            return new Response(new Uint8Array([0x63, 0x61, 0x66, 0xe9]));
          case "/seam.txt":
            return new Response(utf8Across64k);
          case "/missing.txt":
            return new Response("gone", { status: 404 });
          case "/to-other.txt":
            return Response.redirect(`http://127.0.0.1:${other.port}/x.txt`, 302);
          case "/to-self.txt":
            return Response.redirect(`/book.txt`, 301);
          case "/to-file.txt":
            return new Response(null, { status: 302, headers: { location: "file:///etc/passwd" } });
          case "/loop.txt":
            return Response.redirect(`/loop.txt`, 302);
          case "/slow.txt":
            return new Promise<Response>((r) => setTimeout(() => r(new Response("late")), 2000));
          case "/trickle.txt": {
            // A byte every 50 ms, for ever: the answer starts at once but never gets anywhere.
            let timer: ReturnType<typeof setInterval> | undefined;
            return new Response(
              new ReadableStream({
                start(c) {
                  timer = setInterval(() => c.enqueue(new TextEncoder().encode("a")), 50);
                },
                cancel: () => clearInterval(timer),
              }),
            );
          }
        }
        return new Response("no", { status: 404 });
      },
    });
    base = `http://127.0.0.1:${server.port}`;
  });
  afterAll(() => {
    server.stop(true);
    other.stop(true);
  });

  const options = (extra: Partial<DownloadOptions> = {}): DownloadOptions => ({
    allowedHosts: [`127.0.0.1:${server.port}`],
    maxBytes: 1000,
    ...extra,
  });

  test("a text file on an allow-listed host is streamed to the sink", async () => {
    const chunks: string[] = [];
    const result = await downloadBook(`${base}/book.txt`, options({ onChunk: (c) => void chunks.push(new TextDecoder().decode(c)) }));
    expect(chunks.join("")).toBe("It was a bright cold day.\n");
    expect(result.bytes).toBe(26);
  });

  test.each([
    ["/big.txt", "too_large"],
    ["/streamed-big.txt", "too_large"],
    ["/binary.txt", "not_text"],
    ["/missing.txt", "http_status"],
    ["/to-other.txt", "forbidden_host"],
    ["/to-file.txt", "scheme"],
    ["/loop.txt", "too_many_redirects"],
  ])("%s is refused as %s", async (path, reason) => {
    expect(await refusal(downloadBook(`${base}${path}`, options()))).toBe(reason);
  });

  test("a Windows-1252 file is accepted as text and streamed as it came", async () => {
    const chunks: Uint8Array[] = [];
    await downloadBook(`${base}/latin1.txt`, options({ onChunk: (c) => void chunks.push(c) }));
    expect(Buffer.concat(chunks)).toEqual(Buffer.from([0x63, 0x61, 0x66, 0xe9]));
  });

  test("a binary file is refused with what makes it binary", async () => {
    await expect(downloadBook(`${base}/binary.txt`, options())).rejects.toThrow("file is not text: it contains NUL bytes");
  });

  test("a redirect within the allow-listed host is followed", async () => {
    expect((await downloadBook(`${base}/to-self.txt`, options())).bytes).toBe(26);
  });

  test("a multi-byte character cut by the 64 KiB text check is still text", async () => {
    expect((await downloadBook(`${base}/seam.txt`, options({ maxBytes: 100_000 }))).bytes).toBe(65547);
  });

  test("a server slower than the timeout is refused as a timeout", async () => {
    expect(await refusal(downloadBook(`${base}/slow.txt`, options({ timeoutMs: 200 })))).toBe("timeout");
  });

  test("a server that trickles the file slower than the minimum rate is refused once the grace period is over, long before the timeout", async () => {
    const error = await downloadBook(`${base}/trickle.txt`, options({ minBytesPerSecond: 1000, rateGraceMs: 300, timeoutMs: 30_000 })).catch((e: unknown) => e);
    expect((error as FileUrlError).reason).toBe("too_slow");
    expect((error as FileUrlError).message).toMatch(/^file_url sent \d+ bytes in \d+ s, slower than 1000 bytes\/s$/);
  });

  test("the minimum rate is an average: a few bytes now and then do not keep a download alive", async () => {
    const error = await downloadBook(`${base}/trickle.txt`, options({ minBytesPerSecond: 100_000, rateGraceMs: 200 })).catch((e: unknown) => e);
    expect((error as FileUrlError).reason).toBe("too_slow");
  });

  test("loopback is refused when not allow-listed, before any request is made", async () => {
    let requested = false;
    const spy: DownloadOptions["fetch"] = async (input, init) => {
      requested = true;
      return fetch(input, init);
    };
    expect(await refusal(downloadBook(`${base}/book.txt`, options({ allowedHosts: [], fetch: spy })))).toBe("forbidden_host");
    expect(requested).toBe(false);
  });

  test("a closed port is refused as unreachable", async () => {
    const closed = Bun.serve({ port: 0, fetch: () => new Response("") });
    const port = closed.port;
    closed.stop(true);
    expect(await refusal(downloadBook(`http://127.0.0.1:${port}/a.txt`, options({ allowedHosts: [`127.0.0.1:${port}`] })))).toBe(
      "unreachable",
    );
  });
});
