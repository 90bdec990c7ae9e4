import { connect } from "node:net";

/** Writes raw bytes to the server and returns what it answers until it closes or goes quiet. */
export function rawExchange(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let answer = "";
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.write(request));
    const finish = () => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(2_000, finish);
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
      if (/\r\n\r\n/.test(answer)) setTimeout(finish, 100);
    });
    socket.on("end", finish);
    socket.on("error", (err) => (answer ? finish() : reject(err)));
  });
}
