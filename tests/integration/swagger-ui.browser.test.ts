import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { buildTestApp } from "../support/app.ts";

const CHROMIUM = "/usr/bin/chromium";
const available = existsSync(CHROMIUM);
if (!available) console.warn(`skipping the Swagger UI browser test: ${CHROMIUM} is absent (apt-get install chromium)`);

describe.skipIf(!available)("Swagger UI in a headless browser with no network beyond loopback", () => {
  let server: ReturnType<typeof Bun.serve>;
  let browser: Browser;
  const outside: string[] = [];

  beforeAll(async () => {
    const { fetch } = await buildTestApp();
    server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch });
    browser = await chromium.launch({
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
  });

  afterAll(async () => {
    await browser?.close();
    server?.stop(true);
  });

  test("renders every operation and executes GET /health from Try it out", async () => {
    const page = await browser.newPage();
    // Anything that leaves loopback is recorded and refused, as on a network without a CDN.
    await page.route("**/*", (route) => {
      const url = new URL(route.request().url());
      if (url.hostname === "127.0.0.1" || url.hostname === "localhost") return route.continue();
      outside.push(url.href);
      return route.abort();
    });
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
