import { BaseError, createPublicClient, HttpRequestError, http, TimeoutError } from "viem";
import { celoChain } from "./celo.ts";

/** A client for checks: one attempt per request, a short timeout, chain 42220's plain formatting. */
export function checkClient(rpcUrl: string, timeoutMs: number) {
  return createPublicClient({
    chain: celoChain(rpcUrl),
    transport: http(rpcUrl, { timeout: timeoutMs, retryCount: 0 }),
  });
}

/** The chain id `rpcUrl` serves, or why it does not answer. */
export async function probeChainId(
  rpcUrl: string,
  timeoutMs: number,
): Promise<{ chainId: number } | { failure: string }> {
  try {
    return { chainId: await checkClient(rpcUrl, timeoutMs).getChainId() };
  } catch (error) {
    return { failure: rpcFailure(error, timeoutMs) };
  }
}

/**
 * Why a request failed, in a few words. Never viem's full message: it repeats the URL, which may
 * carry an API key.
 */
export function rpcFailure(error: unknown, timeoutMs: number): string {
  if (!(error instanceof BaseError)) return error instanceof Error ? error.message : String(error);
  const cause = error.walk((e) => e instanceof TimeoutError || e instanceof HttpRequestError);
  if (cause instanceof TimeoutError) return `timeout: no answer within ${timeoutMs / 1000} s`;
  if (cause instanceof HttpRequestError) return cause.status ? `HTTP ${cause.status}` : networkCause(cause);
  return error.shortMessage;
}

/** What lies under a failed fetch: a system error code (ECONNREFUSED, ENOTFOUND…), else the innermost message. */
function networkCause(error: HttpRequestError): string {
  let innermost = error.details;
  for (
    let e = error.cause as { cause?: unknown; code?: unknown; message?: unknown } | undefined;
    e;
    e = e.cause as typeof e
  ) {
    if (typeof e.code === "string") return e.code;
    if (typeof e.message === "string") innermost = e.message;
  }
  return innermost;
}
