import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { createApp } from "../../api/app.ts";
import { loadConfig } from "../../common/config.ts";
import { buildDeps, type Deps } from "../../common/deps.ts";
import { silentLogger } from "../../common/log.ts";
import { SAMPLE_BOOK, seedSampleBook } from "../../ingest/sample-book.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { appendExchange } from "../../common/db/sessions.ts";
import { openLocalChat } from "../../common/local/sessions.ts";
import { runPipeline } from "../../ingest/pipeline.ts";
import { FIXTURES, URDU_BOOK } from "../fixtures/ingest/harness.ts";
import { REPO_ROOT } from "../support/process.ts";

// An embedded Postgres is created (initdb) and the sample story ingested.
setDefaultTimeout(120_000);

const CHROMIUM = "/usr/bin/chromium";
const available = existsSync(CHROMIUM);
if (!available) console.warn(`skipping the chat page browser test: ${CHROMIUM} is absent (apt-get install chromium)`);
/** Where the screenshots go; CI keeps the folder with the test output. */
const RESULTS = join(REPO_ROOT, "test-results");

async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(RESULTS, { recursive: true });
  const path = join(RESULTS, `${name}.png`);
  await page.screenshot({ path });
  console.log(`chat page screenshot: ${path}`);
}

/** A book file as Project Gutenberg prints one: every paragraph hard-wrapped, its continuation lines indented. */
function hardWrapped(text: string, width: number): string {
  return text
    .split("\n")
    .map((line) => {
      const lines: string[] = [];
      let current = "";
      for (const word of line.split(" ")) {
        if (current && `${current} ${word}`.length > width) {
          lines.push(current);
          current = word;
        } else current = current ? `${current} ${word}` : word;
      }
      lines.push(current);
      return lines.map((l, i) => (i === 0 ? l : `  ${l}`)).join("\n");
    })
    .join("\n");
}

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
  let urduBookId: string;
  let urduParagraphs: string[];
  let emptyBookId: string;
  let base: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "playground-"));
    deps = await buildDeps(loadConfig({ DATA_DIR: dataDir }), { logger: silentLogger });
    expect((await seedSampleBook(deps)).status).toBe("ingested");
    // A short Urdu story, hard-wrapped as a Gutenberg file is, and a book in which ingestion found no one to talk to.
    const urdu = await readFile(join(FIXTURES, URDU_BOOK), "utf8");
    urduParagraphs = urdu.split("\n").filter((l) => l.length > 60);
    const urduPath = join(dataDir, "urdu-wrapped.txt");
    await writeFile(urduPath, hardWrapped(urdu, 50));
    urduBookId = (await insertBook(deps.db, { title: "چراغ والی گلی", language: "Urdu", filePath: urduPath })).id;
    expect((await runPipeline(deps, { bookId: urduBookId, source: { path: urduPath } })).characters.length).toBeGreaterThan(0);
    emptyBookId = (await insertBook(deps.db, { title: "A Ledger Without Voices", processingStatus: "completed" })).id;
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
    base = `http://127.0.0.1:${server.port}/playground`;
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop(true);
    await deps?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  test("pick the book and Jonah, type a message: the reply streams in token by token, then the passages it used are offered collapsed, as prose without scores", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
    const outside: string[] = [];
    await page.route("**/*", (route) => {
      const url = new URL(route.request().url());
      if (url.hostname === "127.0.0.1") return route.continue();
      outside.push(url.href);
      return route.abort();
    });
    await page.goto(`${base}#book=${SAMPLE_BOOK.id}`);
    await page.waitForSelector("#message:not([disabled])");
    expect(await page.locator("#book option").allTextContents()).toEqual(expect.arrayContaining([SAMPLE_BOOK.title, "چراغ والی گلی", "A Ledger Without Voices"]));
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
        const reply = document.querySelector(".character:not(.earlier) .reply");
        if (reply && !document.querySelector(".sources") && reply.textContent) seen.push(reply.textContent);
      }).observe(document.getElementById("log")!, { childList: true, subtree: true, characterData: true });
    });
    await page.locator("#message").fill("What did you think of the man with the fur collar?");
    await page.locator("#send").click();
    await page.waitForSelector(".sources");
    await page.waitForSelector("#message:not([disabled])");

    const seen = await page.evaluate(() => (window as unknown as { seen: string[] }).seen);
    const reply = (await page.locator(".character:not(.earlier) .reply").last().textContent())!;
    expect(new Set(seen).size).toBeGreaterThan(3);
    for (const partial of seen) expect(reply.startsWith(partial)).toBe(true);
    expect(reply.length).toBeGreaterThan(seen[0]!.length);

    // Collapsed: nothing of the passages is shown (or fetched) until the reader opens them.
    expect(await page.locator(".sources").last().evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    expect(await page.locator(".sources blockquote").count()).toBe(0);
    await page.locator(".sources summary").last().click();
    await page.waitForSelector(".sources blockquote p");
    const passages = await page.locator(".sources blockquote").allTextContents();
    expect(passages.length).toBeGreaterThan(0);
    for (const passage of passages) {
      expect(passage).toMatch(/^Passage \d+\S/);
      expect(passage).not.toMatch(/score|\d\.\d{3}/);
    }
    expect(await page.locator(".error").count()).toBe(0);
    expect(outside).toEqual([]);
    await screenshot(page, "playground");
  });

  test("a reload keeps the chosen book and character and shows the earlier messages of the session", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
    await page.goto(`${base}#book=${SAMPLE_BOOK.id}`);
    await page.waitForSelector("#message:not([disabled])");
    const crane = (await page.locator("#character option").nth(2).getAttribute("value"))!;
    await page.locator("#character").selectOption(crane);
    await page.waitForFunction(() => document.getElementById("status")?.textContent?.startsWith("Chatting with Mr. Crane"));
    await page.waitForSelector("#message:not([disabled])");
    const before = await page.locator(".turn").count();
    await page.locator("#message").fill("Where did the diary come from, Mr. Crane?");
    await page.locator("#send").click();
    await page.waitForSelector(".sources");
    await page.waitForSelector("#message:not([disabled])");
    const reply = (await page.locator(".character .reply").last().textContent())!;

    await page.reload();
    await page.waitForFunction(() => document.getElementById("status")?.textContent?.startsWith("Chatting with Mr. Crane"));
    expect(await page.locator("#book").inputValue()).toBe(SAMPLE_BOOK.id);
    expect(await page.locator("#character").inputValue()).toBe(crane);
    expect(await page.locator(".turn").count()).toBe(before + 2);
    expect(await page.locator(".turn.you.earlier").last().textContent()).toBe("Where did the diary come from, Mr. Crane?");
    expect(await page.locator(".character.earlier .reply").last().textContent()).toBe(reply);
    expect(await page.locator("#status").textContent()).toMatch(/\(\d+ earlier exchanges?\)/);
    await screenshot(page, "playground-reload");
  });

  test("earlier replies show emphasis and quoted lines rendered, markup-looking text as text, and the message box stays in view on a long conversation", async () => {
    const chat = await openLocalChat(deps.db, { book: SAMPLE_BOOK.id, character: "Ottilie" });
    for (let i = 0; i < 30; i++) await appendExchange(deps.db, chat.session_id, `Question ${i}?`, `Answer ${i}.`, `Answer ${i}.`);
    await appendExchange(deps.db, chat.session_id, "<img src=x onerror=\"document.title='owned'\">", "_You_ ask a great deal.\n> The binding holds, *mostly*.\nsnake_case stays.", "");
    const page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(`${base}#book=${SAMPLE_BOOK.id}&character=${chat.character_id}`);
    await page.waitForFunction(() => document.getElementById("status")?.textContent?.startsWith("Chatting with Ottilie"));
    await page.waitForSelector("#message:not([disabled])");

    const last = page.locator(".character.earlier .reply").last();
    expect(await last.textContent()).toBe("You ask a great deal.The binding holds, mostly.snake_case stays.");
    expect(await last.locator("em").allTextContents()).toEqual(["You", "mostly"]);
    expect(await last.locator("p.quoted").textContent()).toBe("The binding holds, mostly.");
    expect(await page.locator(".turn.you.earlier").last().textContent()).toBe("<img src=x onerror=\"document.title='owned'\">");
    expect(await page.locator("#log img").count()).toBe(0);
    expect(await page.title()).toBe("Book character chat");
    expect(await page.locator("#status").textContent()).toContain("the last 50 messages shown");

    // The conversation scrolls inside its list; the message box stays on the screen, the newest message above it.
    const viewport = page.viewportSize()!;
    const box = (await page.locator("#message").boundingBox())!;
    expect(box.y + box.height).toBeLessThanOrEqual(viewport.height);
    expect(await page.locator("#log").evaluate((log) => log.scrollHeight > log.clientHeight)).toBe(true);
    const lastTurn = (await page.locator(".turn").last().boundingBox())!;
    expect(lastTurn.y + lastTurn.height).toBeLessThanOrEqual(box.y);
    await screenshot(page, "playground-long");
  });

  test("an Urdu book reads right to left: the reader's message, the reply and the passages, the passages' hard wraps joined", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
    await page.goto(`${base}#book=${urduBookId}`);
    await page.waitForFunction(() => document.getElementById("status")?.textContent?.startsWith("Chatting with زینب"));
    await page.waitForSelector("#message:not([disabled])");
    await page.locator("#message").fill("رحیم چاچا چراغ کیوں جلاتے تھے؟");
    await page.locator("#send").click();
    await page.waitForSelector(".sources");
    await page.waitForSelector("#message:not([disabled])");
    const direction = (selector: string) => page.locator(selector).last().evaluate((e) => getComputedStyle(e).direction);
    expect(await direction(".turn.you p")).toBe("rtl");
    expect(await direction(".character .reply p")).toBe("rtl");
    await page.locator(".sources summary").last().click();
    await page.waitForSelector(".sources blockquote p");
    expect(await direction(".sources blockquote p")).toBe("rtl");
    const shown = await page.locator(".sources blockquote p").allTextContents();
    for (const paragraph of shown) expect(paragraph).not.toMatch(/\n|\s{2}/);
    expect(shown.some((p) => urduParagraphs.includes(p))).toBe(true);
    expect(await page.locator(".error").count()).toBe(0);
    await screenshot(page, "playground-urdu");
  });

  test("a book in which ingestion found no characters says so, instead of an empty list and a silently disabled box", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(`${base}#book=${emptyBookId}`);
    await page.waitForSelector("#empty");
    expect(await page.locator("#empty").textContent()).toContain("“A Ledger Without Voices” has no characters to chat with");
    expect(await page.locator("#empty").isVisible()).toBe(true);
    expect(await page.locator("#character").isDisabled()).toBe(true);
    expect(await page.locator("#message").isDisabled()).toBe(true);
    expect(await page.locator("#message").getAttribute("placeholder")).toBe("No one to talk to in this book");
    await screenshot(page, "playground-empty");
  });

  /** The page on the sample book, ready to type, with the body of every chat request it sends. */
  async function openSampleBookRecordingChat() {
    const page = await browser.newPage();
    const bodies: Record<string, unknown>[] = [];
    page.on("request", (request) => {
      if (request.url().endsWith("/character/chat")) bodies.push(JSON.parse(request.postData() ?? "{}") as Record<string, unknown>);
    });
    await page.goto(`${base}#book=${SAMPLE_BOOK.id}`);
    await page.waitForSelector("#message:not([disabled])");
    return { page, bodies };
  }

  test("the reading slider below 100% sends the reader's position with the message; at 100% none is sent", async () => {
    const { page, bodies } = await openSampleBookRecordingChat();
    expect(await page.locator("#position-value").textContent()).toBe("the whole book");

    await page.locator("#position").fill("40");
    expect(await page.locator("#position-value").textContent()).toBe("40%");
    await page.locator("#message").fill("Who is Mr. Crane?");
    await page.locator("#send").click();
    await page.waitForFunction(() => document.querySelectorAll(".character:not(.earlier)").length === 1 && !document.querySelector("#message[disabled]"));
    expect(await page.locator(".error").count()).toBe(0);
    expect((await page.locator(".character:not(.earlier) .reply").first().textContent())!.length).toBeGreaterThan(0);

    await page.locator("#position").fill("100");
    await page.locator("#message").fill("And now?");
    await page.locator("#send").click();
    await page.waitForFunction(() => document.querySelectorAll(".character:not(.earlier)").length === 2 && !document.querySelector("#message[disabled]"));
    expect(bodies.map((b) => b.reading_position)).toEqual([0.4, undefined]);
  });

  test("the reading slider is kept per book across a reload and still sent, and the status counts each new exchange", async () => {
    const { page, bodies } = await openSampleBookRecordingChat();
    await page.locator("#position").fill("30");

    await page.reload();
    await page.waitForSelector("#message:not([disabled])");
    expect(await page.locator("#position").inputValue()).toBe("30");
    expect(await page.locator("#position-value").textContent()).toBe("30%");
    const exchanges = () => page.locator("#status").textContent().then((t) => Number(/\((\d+) earlier exchanges?/.exec(t ?? "")?.[1]));
    const before = await exchanges();
    await page.locator("#message").fill("Who is Mr. Crane?");
    await page.locator("#send").click();
    await page.waitForFunction(() => document.querySelectorAll(".character:not(.earlier)").length === 1 && !document.querySelector("#message[disabled]"));
    expect(await page.locator(".error").count()).toBe(0);
    expect(await exchanges()).toBe(before + 1);
    expect(bodies.map((b) => b.reading_position)).toEqual([0.3]);
  });

  test("the page and its helper routes are not part of the documented API", async () => {
    const spec = (await (await fetch(`http://127.0.0.1:${server.port}/docs/json`)).json()) as { paths: Record<string, object> };
    expect(Object.keys(spec.paths).filter((p) => p.startsWith("/playground"))).toEqual([]);
  });
});
