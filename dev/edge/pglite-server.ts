import { mkdir } from "node:fs/promises";
import type { Socket, TCPSocketListener } from "bun";
import { PGlite } from "@electric-sql/pglite";
import { pgliteCreateOptions } from "../../common/db/pglite-options.ts";

/**
 * The embedded Postgres (PGlite, under a data dir) served over the Postgres wire protocol on a
 * loopback TCP port, so that anything speaking Postgres reaches it: the Neon bridge (neon-bridge.ts)
 * in front of it for the edge API, the ingest worker, psql.
 *
 * PGlite is one Postgres session. `@electric-sql/pglite-socket` serves it to one client connection at
 * a time, which a connection pool (the Neon driver's, Bun's) holding several idle connections would
 * wait on forever; it also pins its own PGlite release. So the wire bytes are fed to PGlite's
 * execProtocolRaw here, and the one session is shared: a connection takes it with its first message
 * and gives it back when Postgres answers ReadyForQuery idle (its statement or transaction is over),
 * so transactions of different connections never interleave. Named prepared statements and portals
 * are renamed per connection (Bun's SQL client names its statements P0, P1, … on every connection);
 * what else a connection leaves in the session (a SET) is seen by the others.
 */

/** The start-up packet codes (Postgres protocol 3.0). */
const PROTOCOL_3 = 196_608;
const SSL_REQUEST = 80_877_103;
const GSS_REQUEST = 80_877_104;
const CANCEL_REQUEST = 80_877_102;
const TERMINATE = 0x58; // 'X'
const PASSWORD = 0x70; // 'p': a client that sends one unasked (there is no authentication here)
const READY_FOR_QUERY = 0x5a; // 'Z'
const IDLE = 0x49; // 'I'

export interface PgliteServerOptions {
  /** Where the database's files live; in memory (gone at stop) when unset. */
  dataDir?: string;
  /** 0 (any free port) when unset. */
  port?: number;
  /** 127.0.0.1 when unset. */
  hostname?: string;
}

export interface PgliteServer {
  /** A connection string for it: `postgres://postgres@127.0.0.1:{port}/postgres`. */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

interface Connection {
  /** The prefix of its prepared statements' and portals' names in the shared session. */
  id: number;
  started: boolean;
  /** Bytes the socket has not taken yet (a large result under backpressure). */
  unsent: Uint8Array[];
  /** Bytes received and not yet a whole message. */
  pending: Uint8Array;
  /** This connection's batches, run one after the other. */
  queue: Promise<void>;
  closed: boolean;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.byteLength === 0) return b;
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a);
  out.set(b, a.byteLength);
  return out;
}

const int32 = (bytes: Uint8Array, at: number) => new DataView(bytes.buffer, bytes.byteOffset + at, 4).getInt32(0);

/** A frontend message: its type byte and length word, then the body. */
function message(type: number, body: Uint8Array = new Uint8Array()): Uint8Array {
  const out = new Uint8Array(5 + body.byteLength);
  out[0] = type;
  new DataView(out.buffer).setInt32(1, 4 + body.byteLength);
  out.set(body, 5);
  return out;
}

const SYNC = message(0x53);
const ROLLBACK = message(0x51, new TextEncoder().encode("ROLLBACK\0"));

/** The whole messages at the front of `bytes` (type byte + length), and what is left. */
function splitMessages(bytes: Uint8Array): { messages: Uint8Array[]; rest: Uint8Array } {
  const messages: Uint8Array[] = [];
  let at = 0;
  while (bytes.byteLength - at >= 5) {
    const end = at + 1 + int32(bytes, at + 1);
    if (end > bytes.byteLength) break;
    messages.push(bytes.subarray(at, end));
    at = end;
  }
  return { messages, rest: bytes.slice(at) };
}

const PARSE = 0x50; // 'P'
const BIND = 0x42; // 'B'
const DESCRIBE = 0x44; // 'D'
const CLOSE = 0x43; // 'C'

/**
 * The message with its statement and portal names (the unnamed ones left alone) prefixed by the
 * connection's id, so that two connections' `P0` are two statements in the one session.
 */
function withOwnNames(m: Uint8Array, id: number): Uint8Array {
  const type = m[0]!;
  // Offsets, in the message, of the names it carries: Parse a statement; Bind a portal, then a
  // statement; Describe and Close a kind byte, then a name.
  let names: number;
  let at: number;
  if (type === PARSE) [names, at] = [1, 5];
  else if (type === BIND) [names, at] = [2, 5];
  else if (type === DESCRIBE || type === CLOSE) [names, at] = [1, 6];
  else return m;
  const prefix = new TextEncoder().encode(`c${id}.`);
  const parts: Uint8Array[] = [m.subarray(0, at)];
  for (let i = 0; i < names; i++) {
    const end = m.indexOf(0, at);
    if (end > at) parts.push(prefix);
    parts.push(m.subarray(at, end + 1));
    at = end + 1;
  }
  parts.push(m.subarray(at));
  const out = parts.reduce(concat);
  new DataView(out.buffer, out.byteOffset).setInt32(1, out.byteLength - 1);
  return out;
}

/** Whether Postgres's answer ends in ReadyForQuery with the session idle (no transaction open). */
function endsIdle(reply: Uint8Array): boolean {
  const n = reply.byteLength;
  return n >= 6 && reply[n - 6] === READY_FOR_QUERY && int32(reply, n - 5) === 5 && reply[n - 1] === IDLE;
}

/** Writes what the socket takes now and keeps the rest for its drain. */
function flush(socket: Socket<Connection>): void {
  const { unsent } = socket.data;
  while (unsent.length > 0) {
    const chunk = unsent[0]!;
    const written = socket.write(chunk);
    if (written < chunk.byteLength) {
      unsent[0] = chunk.subarray(Math.max(written, 0));
      return;
    }
    unsent.shift();
  }
}

function send(socket: Socket<Connection>, bytes: Uint8Array | string): void {
  socket.data.unsent.push(typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes);
  flush(socket);
}

/** The session's owner, and who waits for it, in order. */
function sessionLock() {
  let owner: Connection | undefined;
  const waiting: { connection: Connection; resolve(): void }[] = [];
  return {
    async acquire(connection: Connection): Promise<void> {
      if (owner === connection) return;
      if (!owner) {
        owner = connection;
        return;
      }
      await new Promise<void>((resolve) => waiting.push({ connection, resolve }));
    },
    holds: (connection: Connection) => owner === connection,
    release(connection: Connection): void {
      if (owner !== connection) return;
      const next = waiting.shift();
      owner = next?.connection;
      next?.resolve();
    },
    /** A closed connection's place in the line is given up. */
    leave(connection: Connection): void {
      const at = waiting.findIndex((w) => w.connection === connection);
      if (at >= 0) waiting.splice(at, 1);
    },
  };
}

export async function startPgliteServer(options: PgliteServerOptions = {}): Promise<PgliteServer> {
  if (options.dataDir) await mkdir(options.dataDir, { recursive: true });
  const pg = await PGlite.create(pgliteCreateOptions(options.dataDir));
  // PGlite answers the start-up packet itself; its answer (authentication ok, the server's
  // parameters, ready) is what every client connecting later is sent.
  const startupBody = new TextEncoder().encode("user\0postgres\0database\0postgres\0\0");
  const startup = new Uint8Array(8 + startupBody.byteLength);
  new DataView(startup.buffer).setInt32(0, startup.byteLength);
  new DataView(startup.buffer).setInt32(4, PROTOCOL_3);
  startup.set(startupBody, 8);
  // Copied: PGlite's answer is a view of its memory, overwritten by the next call.
  const welcome = (await pg.execProtocolRaw(startup)).slice();
  const lock = sessionLock();
  const sockets = new Set<Socket<Connection>>();
  let connections = 0;

  const run = async (socket: Socket<Connection>, batch: Uint8Array[]): Promise<void> => {
    const connection = socket.data;
    const wanted = batch.filter((m) => m[0] !== PASSWORD).map((m) => withOwnNames(m, connection.id));
    if (wanted.length === 0) return;
    await lock.acquire(connection);
    if (connection.closed) return lock.release(connection);
    let reply: Uint8Array;
    try {
      reply = await pg.execProtocolRaw(wanted.length === 1 ? wanted[0]! : wanted.reduce(concat));
    } catch (err) {
      lock.release(connection);
      socket.end();
      throw err;
    }
    if (!connection.closed) send(socket, reply.slice());
    if (endsIdle(reply)) lock.release(connection);
  };

  /** A connection gone mid-transaction must not leave the shared session inside it. */
  const abandon = async (connection: Connection): Promise<void> => {
    connection.closed = true;
    lock.leave(connection);
    await connection.queue.catch(() => {});
    if (!lock.holds(connection)) return;
    try {
      await pg.execProtocolRaw(concat(SYNC, ROLLBACK));
    } finally {
      lock.release(connection);
    }
  };

  const receive = (socket: Socket<Connection>, chunk: Uint8Array) => {
    const connection = socket.data;
    let bytes = concat(connection.pending, chunk);
    while (!connection.started) {
      if (bytes.byteLength < 8 || bytes.byteLength < int32(bytes, 0)) break;
      const length = int32(bytes, 0);
      const code = int32(bytes, 4);
      bytes = bytes.slice(length);
      if (code === SSL_REQUEST || code === GSS_REQUEST) send(socket, "N");
      else if (code === PROTOCOL_3) {
        connection.started = true;
        send(socket, welcome);
      } else {
        // A cancel request (nothing here runs long enough to cancel), or a protocol not spoken.
        if (code !== CANCEL_REQUEST) send(socket, message(0x45, new TextEncoder().encode("SFATAL\0C08P01\0Munsupported frontend protocol\0\0")));
        socket.end();
        return;
      }
    }
    if (!connection.started) {
      connection.pending = bytes;
      return;
    }
    const { messages, rest } = splitMessages(bytes);
    connection.pending = rest;
    const terminate = messages.findIndex((m) => m[0] === TERMINATE);
    const batch = terminate >= 0 ? messages.slice(0, terminate) : messages;
    // A batch PGlite itself failed on has closed the socket already; the next ones are not run.
    connection.queue = connection.queue.then(() => run(socket, batch)).catch(() => {});
    if (terminate >= 0) socket.end();
  };

  const listener: TCPSocketListener<Connection> = Bun.listen<Connection>({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
    socket: {
      open(socket) {
        socket.data = { id: ++connections, started: false, unsent: [], pending: new Uint8Array(), queue: Promise.resolve(), closed: false };
        sockets.add(socket);
      },
      data: receive,
      drain: flush,
      close(socket) {
        sockets.delete(socket);
        void abandon(socket.data);
      },
      error(socket) {
        socket.end();
      },
    },
  });
  const url = `postgres://postgres@127.0.0.1:${listener.port}/postgres`;
  return {
    url,
    port: listener.port,
    async stop() {
      listener.stop(true);
      for (const socket of sockets) socket.end();
      await Promise.all([...sockets].map((s) => abandon(s.data)));
      await pg.close();
    },
  };
}
