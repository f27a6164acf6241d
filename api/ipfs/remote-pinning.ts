/**
 * A remote pinning service, through the standard IPFS Pinning Service API
 * (https://ipfs.github.io/pinning-services-api-spec/): POST {url}/pins with {cid, name} and a
 * bearer token; the service answers a PinStatus (queued, pinning, pinned or failed). The service
 * fetches the content from the IPFS network itself. A failure is reported, never thrown: the
 * local pin is what the answer stands on.
 */
export type RemotePinning = { url: string; token?: string; timeoutMs?: number };

export type RemotePin = {
  cid: string;
  name: string;
  status: "queued" | "pinning" | "pinned" | "failed";
  requestId?: string;
  error?: string;
};

export async function pinRemotely(service: RemotePinning, cid: string, name: string): Promise<RemotePin> {
  try {
    const res = await fetch(new URL("pins", service.url.endsWith("/") ? service.url : `${service.url}/`), {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(service.token ? { authorization: `Bearer ${service.token}` } : {}),
      },
      body: JSON.stringify({ cid, name }),
      signal: AbortSignal.timeout(service.timeoutMs ?? 5_000),
    });
    const text = await res.text();
    if (!res.ok) {
      let reason = text.slice(0, 200);
      try {
        const body = JSON.parse(text) as { error?: { reason?: string; details?: string } };
        reason = [body.error?.reason, body.error?.details].filter(Boolean).join(": ") || reason;
      } catch {}
      return { cid, name, status: "failed", error: `HTTP ${res.status}${reason ? ` ${reason}` : ""}` };
    }
    const body = JSON.parse(text) as { requestid?: string; status?: string };
    const status = (["queued", "pinning", "pinned", "failed"] as const).find((s) => s === body.status) ?? "queued";
    return { cid, name, status, ...(body.requestid ? { requestId: body.requestid } : {}) };
  } catch (error) {
    return {
      cid,
      name,
      status: "failed",
      error: (error as Error).name === "TimeoutError" ? "timed out" : (error as Error).message,
    };
  }
}
