import { createHash } from "node:crypto";
import type { Address } from "../../config/addresses.ts";
import type { TokenInfo } from "../../config/celo.ts";
import type { IndexDb } from "../db.ts";
import { pinContent } from "../ipfs/content.ts";
import type { IpfsNode } from "../ipfs/node.ts";
import { pinRemotely, type RemotePin, type RemotePinning } from "../ipfs/remote-pinning.ts";
import type { ServiceDb } from "../store/store.ts";
import { loadStatement, type StatementData, type StatementPeriod } from "./data.ts";
import { statementCsv } from "./format.ts";
import { statementPdf } from "./pdf.ts";
import { recordStatement } from "./record.ts";

export type StatementDeps = {
  db: IndexDb;
  target: { schema: string; tokens: readonly TokenInfo[] };
  ipfs: IpfsNode;
  store: ServiceDb;
  remote?: RemotePinning;
};

type PinnedFile = { cid: string; size: number; sha256: string };

export type MadeStatement = {
  data: StatementData;
  pdf: PinnedFile;
  csv: PinnedFile;
  remote?: { service: string; ok: boolean; pins: RemotePin[] };
};

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** The two files of a statement, before pinning: the CSV first, as the PDF names its CID. */
export async function renderStatement(data: StatementData, cidOfCsv: (csv: Uint8Array) => Promise<string>) {
  const csv = statementCsv(data.wallet, data.rows);
  const csvCid = await cidOfCsv(csv);
  const pdf = await statementPdf(data, csvCid);
  return { csv, csvCid, pdf };
}

/**
 * Makes a wallet's statement from the indexed tables, pins the PDF and its CSV on the service's
 * IPFS node (and on the remote pinning service when one is configured), and records it for the
 * wallet's `statement` signal.
 */
export async function makeStatement(
  deps: StatementDeps,
  wallet: Address,
  period: StatementPeriod,
): Promise<MadeStatement> {
  const data = await loadStatement(deps.db, deps.target, wallet, period);
  const { csv, csvCid, pdf } = await renderStatement(data, (bytes) =>
    pinContent(deps.ipfs, deps.store, bytes, "text/csv; charset=utf-8"),
  );
  const cid = await pinContent(deps.ipfs, deps.store, pdf, "application/pdf");
  await recordStatement(deps.store, {
    cid,
    csvCid,
    wallet,
    period,
    fromAt: new Date(data.from * 1000),
    toAt: new Date(data.to * 1000),
    block: data.asOf.block.toString(),
    transfers: data.rows.length,
  });
  const made: MadeStatement = {
    data,
    pdf: { cid, size: pdf.length, sha256: sha256(pdf) },
    csv: { cid: csvCid, size: csv.length, sha256: sha256(csv) },
  };
  if (deps.remote) {
    const name = `statement-${wallet}-${data.period}-${data.asOf.block}`;
    const pins = await Promise.all([
      pinRemotely(deps.remote, cid, `${name}.pdf`),
      pinRemotely(deps.remote, csvCid, `${name}.csv`),
    ]);
    made.remote = { service: new URL(deps.remote.url).origin, ok: pins.every((p) => p.status !== "failed"), pins };
  }
  return made;
}
