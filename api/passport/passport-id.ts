import type { CID } from "multiformats/cid";
import { type Hex, isHex } from "viem";
import { parseCid } from "../ipfs/node.ts";
import { REPORT_ID } from "./document.ts";

export type Lookup =
  | { kind: "id"; reportId: string }
  | { kind: "cid"; cid: CID; text: string }
  | { kind: "hash"; hex: Hex };

/** Which kind of id was given, or null when it is none of them. */
export function parsePassportId(id: string): Lookup | null {
  if (REPORT_ID.test(id)) return { kind: "id", reportId: id };
  if (/^0x[0-9a-fA-F]{64}$/.test(id) && isHex(id)) return { kind: "hash", hex: id.toLowerCase() as Hex };
  const cid = parseCid(id);
  return cid ? { kind: "cid", cid, text: id } : null;
}
