/** Minimal JSON-RPC over HTTP, with batches: the seeder sends thousands of calls to anvil. */
type RpcRequest = { method: string; params: unknown[] };

class RpcError extends Error {}

export async function rpcBatch<T = unknown>(url: string, calls: RpcRequest[]): Promise<T[]> {
  if (calls.length === 0) return [];
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(calls.map((c, id) => ({ jsonrpc: "2.0", id, ...c }))),
  });
  if (!res.ok) throw new RpcError(`RPC ${calls[0]!.method}…: HTTP ${res.status} ${await res.text()}`);
  const replies = (await res.json()) as
    | { id: number; result?: T; error?: { message: string } }[]
    | { error?: { message: string } };
  if (!Array.isArray(replies))
    throw new RpcError(
      `RPC batch of ${calls.length} ${calls[0]!.method}: ${replies.error?.message ?? JSON.stringify(replies).slice(0, 200)}`,
    );
  const byId = new Map(replies.map((r) => [r.id, r]));
  return calls.map((call, id) => {
    const reply = byId.get(id);
    if (!reply) throw new RpcError(`RPC ${call.method}: no reply`);
    if (reply.error) throw new RpcError(`RPC ${call.method}: ${reply.error.message}`);
    return reply.result as T;
  });
}

export async function rpc<T = unknown>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const [result] = await rpcBatch<T>(url, [{ method, params }]);
  return result as T;
}
