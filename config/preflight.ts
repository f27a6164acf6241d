import { CELO_CHAIN_ID } from "./celo.ts";
import { StartupError } from "./errors.ts";
import { resolvePaymentSettings } from "./payments.ts";
import { resolveSignInOrigin } from "./sign-in.ts";
import type { IndexTarget } from "./target.ts";

async function rpc<T>(url: string, method: string, params: unknown[], timeoutMs: number): Promise<T> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(body.error.message);
  return body.result as T;
}

/** Redacts credentials and API keys that RPC URLs often carry in the path or query. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname.length > 1 ? "/…" : ""}`;
  } catch {
    return "(unparseable URL)";
  }
}

/**
 * Checks, before the indexer starts, that the RPC answers, serves chain 42220 and has the
 * contracts we are told to index. Each failure is one StartupError naming the problem.
 */
export async function preflight(target: IndexTarget, timeoutMs = 5_000): Promise<void> {
  // Payments must be settleable, and sign-ins bound to our origin, before any paid route is served: configuration problems first.
  resolvePaymentSettings(target);
  resolveSignInOrigin();
  const url = target.rpcUrls[0]!;
  let chainIdHex: string;
  try {
    chainIdHex = await rpc<string>(url, "eth_chainId", [], timeoutMs);
  } catch (error) {
    const hint = target.network === "devnet" ? " Is the devnet running (`npm run devnet`)?" : "";
    throw new StartupError(`RPC ${redactUrl(url)} does not answer (${(error as Error).message}).${hint}`);
  }
  const chainId = Number(BigInt(chainIdHex));
  if (chainId !== CELO_CHAIN_ID) {
    throw new StartupError(`RPC ${redactUrl(url)} serves chain id ${chainId}, expected ${CELO_CHAIN_ID} (Celo${target.network === "devnet" ? " devnet" : ""}).`);
  }
  for (const token of target.tokens) {
    const code = await rpc<string>(url, "eth_getCode", [token.address, "latest"], timeoutMs);
    if (code === "0x") {
      const hint = target.network === "devnet" ? " The devnet manifest is stale: run `npm run devnet` again." : "";
      throw new StartupError(`No ${token.symbol} contract at ${token.address} on ${redactUrl(url)}.${hint}`);
    }
  }
}
