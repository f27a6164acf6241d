import { eq } from "drizzle-orm";
import { ipfsContent } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";
import type { IpfsNode } from "./node.ts";

export type MediaType = "application/pdf" | "text/csv; charset=utf-8" | "application/json" | "application/octet-stream";

/**
 * Adds and pins `bytes` on the node and records what they are, so that GET /ipfs/{cid} serves them
 * with their media type. The record is written after the pin: a CID is never described before it
 * is held.
 */
export async function pinContent(
  ipfs: IpfsNode,
  store: ServiceDb,
  bytes: Uint8Array,
  mediaType: MediaType,
): Promise<string> {
  const cid = await ipfs.add(bytes);
  await store.insert(ipfsContent).values({ cid, mediaType, size: bytes.length }).onConflictDoNothing();
  return cid;
}

/** The media type recorded for `cid` when it was pinned, or read from the bytes themselves. */
export async function mediaTypeOf(store: ServiceDb | undefined, cid: string, bytes: Uint8Array): Promise<string> {
  const [row] = store
    ? await store
        .select({ mediaType: ipfsContent.mediaType })
        .from(ipfsContent)
        .where(eq(ipfsContent.cid, cid))
        .limit(1)
    : [];
  return row?.mediaType ?? sniff(bytes);
}

/** Content pinned without a record (by code that predates it): PDF by its magic, JSON by parsing, else bytes. */
function sniff(bytes: Uint8Array): MediaType {
  if (Buffer.from(bytes.subarray(0, 5)).toString("latin1") === "%PDF-") return "application/pdf";
  const text = Buffer.from(bytes).toString("utf8").trim();
  if (text.startsWith("{") || text.startsWith("[")) {
    try {
      JSON.parse(text);
      return "application/json";
    } catch {}
  }
  return "application/octet-stream";
}
