// The floors on Deno (bench/chat-paced.ts): prints the URL it listens on, then serves until killed.
import floors from "./proxy.ts";

declare const Deno: {
  env: { get(name: string): string | undefined };
  serve(options: { port: number; hostname: string; onListen?: (address: { port: number }) => void }, handler: (request: Request) => Promise<Response>): unknown;
};

const env = { GATEWAY_URL: Deno.env.get("GATEWAY_URL") ?? "" };
Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: ({ port }) => console.log(`http://127.0.0.1:${port}`) }, (request) => floors.fetch(request, env));
