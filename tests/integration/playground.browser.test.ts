import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { createApp } from "../../api/app.ts";
import { loadConfig } from "../../common/config.ts";
import { buildDeps, type Deps } from "../../common/deps.ts";
import { silentLogger } from "../../common/log.ts";
import { SAMPLE_BOOK, seedSampleBook } from "../../ingest/sample-book.ts";
import { REPO_ROOT } from "../support/process.ts";

// An embedded Postgres is created (initdb) and the sample story ingested.
setDefaultTimeout(120_000);

const CHROMIUM = "/usr/bin/chromium";
const available = existsSync(CHROMIUM);
if (!available) console.warn(`skipping the chat page browser test: ${CHROMIUM} is absent (apt-get install chromium)`);
/** Where the screenshot goes; CI keeps the folder with the test output. */
const SCREENSHOT = join(REPO_ROOT, "test-results", "playground.png");

/**
 * Hands the reply stream to the browser one network write at a time, a moment apart, as a model
 * would: otherwise the offline provider's whole reply can reach the page in one read, and "tokens
 * arriving" could not be told from "a reply appearing".
 */
function paced(response: Response): Response {
  if (!response.body) return response;
  const body = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      async transform(chunk, controller) {
        controller.enqueue(chunk);
        await Bun.sleep(15);
      },
    }),
  );
  return new Response(body, { status: response.status, headers: response.headers });
}

describe.skipIf(!available)("the chat page in a headless browser", () => {
  let dataDir: string;
  let deps: Deps;
  let server: ReturnType<typeof Bun.serve>;
  let browser: Browser;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "playground-"));
    deps = await buildDeps(loadConfig({ DATA_DIR: dataDir }), { logger: silentLogger });
    expect((await seedSampleBook(deps)).status).toBe("ingested");
    const { fetch } = createApp({ ...deps, probeBook: async (url) => ({ url, bytes: 0, contentType: "text/plain" }), playground: {} });
    server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        const response = await fetch(request);
        return new URL(request.url).pathname === "/character/chat" ? paced(response) : response;
      },
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop(true);
    await deps?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  test("pick the book and Jonah, type a message: the reply streams in token by token, then the passages it used are shown", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
    const outside: string[] = [];
    await page.route("**/*", (route) => {
      const url = new URL(route.request().url());
      if (url.hostname === "127.0.0.1") return route.continue();
      outside.push(url.href);
      return route.abort();
    });
    await page.goto(`http://127.0.0.1:${server.port}/playground`);
    await page.waitForSelector("#message:not([disabled])");
    expect(await page.locator("#book option").allTextContents()).toEqual([SAMPLE_BOOK.title]);
    expect(await page.locator("#character option").allTextContents()).toEqual([
      expect.stringContaining("Ottilie"),
      expect.stringContaining("Jonah"),
      expect.stringContaining("Mr. Crane"),
    ]);
    await page.locator("#character").selectOption({ label: (await page.locator("#character option").nth(1).textContent())! });
    await page.waitForFunction(() => document.getElementById("status")?.textContent?.startsWith("Chatting with Jonah"));
    await page.waitForSelector("#message:not([disabled])");

    // Every text the reply shows before it is complete, recorded as the page changes it.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { seen: string[] }).seen = seen;
      new MutationObserver(() => {
        const reply = document.querySelector(".character .reply");
        if (reply && !document.querySelector(".sources") && reply.textContent) seen.push(reply.textContent);
      }).observe(document.getElementById("log")!, { childList: true, subtree: true, characterData: true });
    });
    await page.locator("#message").fill("What did you think of the man with the fur collar?");
    await page.locator("#send").click();
    await page.waitForSelector(".sources blockquote");
    await page.waitForSelector("#message:not([disabled])");

    const seen = await page.evaluate(() => (window as unknown as { seen: string[] }).seen);
    const reply = (await page.locator(".character .reply").textContent())!;
    expect(new Set(seen).size).toBeGreaterThan(3);
    for (const partial of seen) expect(reply.startsWith(partial)).toBe(true);
    expect(reply.length).toBeGreaterThan(seen[0]!.length);

    const passages = await page.locator(".sources blockquote").allTextContents();
    expect(passages.length).toBeGreaterThan(0);
    for (const passage of passages) expect(passage).toMatch(/^\[passage \d+ · score [\d.]+\]\n\S/);
    expect(await page.locator(".error").count()).toBe(0);
    expect(outside).toEqual([]);

    await mkdir(join(REPO_ROOT, "test-results"), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    console.log(`chat page screenshot: ${SCREENSHOT}`);
  });

  test("the reading slider below 100% sends the reader's position with the message; at 100% none is sent", async () => {
    const page = await browser.newPage();
    const bodies: Record<string, unknown>[] = [];
    page.on("request", (request) => {
      if (request.url().endsWith("/character/chat")) bodies.push(JSON.parse(request.postData() ?? "{}") as Record<string, unknown>);
    });
    await page.goto(`http://127.0.0.1:${server.port}/playground`);
    await page.waitForSelector("#message:not([disabled])");
    expect(await page.locator("#position-value").textContent()).toBe("the whole book");

    await page.locator("#position").fill("40");
    expect(await page.locator("#position-value").textContent()).toBe("40%");
    await page.locator("#message").fill("Who is Mr. Crane?");
    await page.locator("#send").click();
    await page.waitForFunction(() => document.querySelectorAll(".character").length === 1 && !document.querySelector("#message[disabled]"));
    expect(await page.locator(".error").count()).toBe(0);
    expect((await page.locator(".character .reply").textContent())!.length).toBeGreaterThan(0);

    await page.locator("#position").fill("100");
    await page.locator("#message").fill("And now?");
    await page.locator("#send").click();
    await page.waitForFunction(() => document.querySelectorAll(".character").length === 2 && !document.querySelector("#message[disabled]"));
    expect(bodies.map((b) => b.reading_position)).toEqual([0.4, undefined]);
  });

  test("the page and its helper routes are not part of the documented API", async () => {
    const spec = (await (await fetch(`http://127.0.0.1:${server.port}/docs/json`)).json()) as { paths: Record<string, object> };
    expect(Object.keys(spec.paths).filter((p) => p.startsWith("/playground"))).toEqual([]);
  });
});
