// The parts of workerd's API the Workers entry uses (api/edge/workers.ts).
declare module "cloudflare:workers" {
  /** The Worker's variables, secrets and bindings, readable in global scope. */
  export const env: Record<string, unknown>;
}

interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException(): void;
}
