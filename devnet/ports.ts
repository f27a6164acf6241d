import { createServer } from "node:net";

/** A port the OS just handed out on 127.0.0.1 (bound to port 0, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") return reject(new Error("no port assigned"));
      server.close(() => resolve(address.port));
    });
  });
}
