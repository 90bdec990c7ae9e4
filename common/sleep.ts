/** Resolves after `ms` milliseconds: a web-standard timer, so the code using it runs on Bun, Deno and workerd alike. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
