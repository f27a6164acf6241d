import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export type RpcProxy = {
  url: string;
  /** Milliseconds each request waits before it is forwarded; requests pass one at a time. */
  delayMs: number;
  /** Answer eth_chainId with this instead of the upstream's (a node of another chain). */
  chainId?: number;
  /** Accept requests and never answer them (a node that hangs). */
  hang: boolean;
  /** Drop every connection (a node that is down). */
  down: boolean;
  /**
   * eth_getLogs from this block on waits, out of the queue, until this is cleared (undefined): an
   * indexer's backfill stops part way through, however fast the machine, and goes on once released.
   */
  holdLogsFrom: number | undefined;
  close: () => Promise<void>;
};

type JsonRpcCall = { id: unknown; method: string; params?: unknown[] };

/** A JSON-RPC proxy on 127.0.0.1 in front of anvil that can be slowed down, hung, held back or mislabelled. */
export async function startRpcProxy(
  upstream: string,
  options: Partial<Pick<RpcProxy, "delayMs" | "chainId" | "hang">> = {},
): Promise<RpcProxy> {
  let queue = Promise.resolve();
  let holdFrom: number | undefined;
  const held: (() => void)[] = [];
  const proxy = {
    delayMs: 0,
    hang: false,
    down: false,
    ...options,
    get holdLogsFrom() {
      return holdFrom;
    },
    set holdLogsFrom(block: number | undefined) {
      holdFrom = block;
      if (block === undefined) for (const release of held.splice(0)) release();
    },
  } as RpcProxy;
  const isHeld = (calls: JsonRpcCall[]) =>
    holdFrom !== undefined &&
    calls.some((call) => {
      const from = (call.params?.[0] as { fromBlock?: unknown } | undefined)?.fromBlock;
      return call.method === "eth_getLogs" && typeof from === "string" && Number(BigInt(from)) >= holdFrom!;
    });
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (proxy.down) return void req.socket.destroy();
      if (proxy.hang) return;
      const body = Buffer.concat(chunks).toString();
      let parsed: JsonRpcCall | JsonRpcCall[];
      try {
        parsed = JSON.parse(body);
      } catch (error) {
        return void res.writeHead(400).end(String(error));
      }
      const forward = () => {
        queue = queue.then(async () => {
          if (proxy.delayMs) await new Promise((r) => setTimeout(r, proxy.delayMs));
          try {
            if (proxy.chainId !== undefined && !Array.isArray(parsed) && parsed.method === "eth_chainId") {
              res
                .writeHead(200, { "content-type": "application/json" })
                .end(JSON.stringify({ jsonrpc: "2.0", id: parsed.id, result: `0x${proxy.chainId.toString(16)}` }));
              return;
            }
            const upstreamRes = await fetch(upstream, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body,
            });
            res.writeHead(upstreamRes.status, { "content-type": "application/json" }).end(await upstreamRes.text());
          } catch (error) {
            res.writeHead(502).end(String(error));
          }
        });
      };
      if (isHeld([parsed].flat())) held.push(forward);
      else forward();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}
