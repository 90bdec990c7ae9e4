import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { localFilePath } from "../../api/local-file.ts";
import type { ProcessingAccepted } from "../../common/contract/schemas.ts";
import { SAMPLE_BOOK } from "../../ingest/sample-book.ts";
import { buildTestApp } from "../support/app.ts";
import { startDemo, type Demo } from "../support/npm-start.ts";

const CHROMIUM = "/usr/bin/chromium";
const available = existsSync(CHROMIUM);
if (!available) console.warn(`skipping the Swagger UI browser test: ${CHROMIUM} is absent (apt-get install chromium)`);

const launchBrowser = () =>
  chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-quic",
      "--no-first-run",
      "--disable-sync",
    ],
  });

/** A page whose requests beyond loopback are recorded in `outside` and refused, as on a network without a CDN. */
async function loopbackOnlyPage(browser: Browser, outside: string[]): Promise<Page> {
  const page = await browser.newPage();
  await page.route("**/*", (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === "127.0.0.1" || url.hostname === "localhost") return route.continue();
    outside.push(url.href);
    return route.abort();
  });
  return page;
}

describe.skipIf(!available)("Swagger UI in a headless browser with no network beyond loopback", () => {
  let server: ReturnType<typeof Bun.serve>;
  let browser: Browser;
  const outside: string[] = [];

  beforeAll(async () => {
    const { fetch } = await buildTestApp();
    server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    server?.stop(true);
  });

  test("renders every operation and executes GET /health from Try it out", async () => {
    const page = await loopbackOnlyPage(browser, outside);
    await page.goto(`http://127.0.0.1:${server.port}/docs`);
    await page.waitForSelector(".opblock", { timeout: 30_000 });

    const operations = await page.$$eval(".opblock .opblock-summary-path", (nodes) => nodes.map((n) => n.getAttribute("data-path") ?? n.textContent?.trim()));
    const spec = (await (await fetch(`http://127.0.0.1:${server.port}/docs/json`)).json()) as { paths: Record<string, object> };
    const expected = Object.entries(spec.paths).flatMap(([path, methods]) => Object.keys(methods).map(() => path));
    expect(operations.sort()).toEqual(expected.sort());

    const health = page.locator(".opblock-get", { has: page.locator('[data-path="/health"]') });
    await health.locator(".opblock-summary").click();
    await health.locator("button.try-out__btn").click();
    await health.locator("button.execute").click();
    const status = health.locator(".live-responses-table tbody .response-col_status").first();
    await status.waitFor({ timeout: 30_000 });
    expect((await status.textContent())?.trim()).toBe("200");
    expect(await health.locator(".live-responses-table tbody .response-col_description pre").first().textContent()).toContain("ok");
    expect(outside).toEqual([]);
  });
});

describe.skipIf(!available)("Swagger UI under npm start", () => {
  let dataDir: string;
  let demo: Demo;
  let browser: Browser;
  const outside: string[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "swagger-npm-start-"));
    demo = await startDemo(dataDir);
    browser = await launchBrowser();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await demo?.service.stop("SIGINT");
    await rm(dataDir, { recursive: true, force: true });
  });

  test("Try it out on POST /character/processing sends the sample story as filled in and shows 202", async () => {
    const page = await loopbackOnlyPage(browser, outside);
    await page.goto(`${demo.ready.api}/docs`);
    const processing = page.locator(".opblock-post", { has: page.locator('[data-path="/character/processing"]') });
    await processing.waitFor({ timeout: 30_000 });
    await processing.locator(".opblock-summary").click();
    await processing.locator("button.try-out__btn").click();
    const body = JSON.parse(await processing.locator("textarea.body-param__text").inputValue()) as { file_url: string; book_id: string };
    expect(body).toMatchObject({ book_id: SAMPLE_BOOK.id, file_url: `${demo.ready.api}${localFilePath(SAMPLE_BOOK.path)}` });
    await processing.locator("button.execute").click();
    const status = processing.locator(".live-responses-table tbody .response-col_status").first();
    await status.waitFor({ timeout: 30_000 });
    expect((await status.textContent())?.trim()).toBe("202");
    const shown = JSON.parse((await processing.locator(".live-responses-table tbody .response-col_description pre").first().textContent()) ?? "") as ProcessingAccepted;
    expect(shown).toMatchObject({ status: "accepted", data: { book_id: SAMPLE_BOOK.id, queued: true } });
    expect(outside).toEqual([]);
  }, 120_000);
});
