import { CID } from "multiformats/cid";
import { create as createDigest } from "multiformats/hashes/digest";
import { eq, inArray, or } from "ponder";
import { type Hex, isHex, withTimeout } from "viem";
import { reputationReporterAbi } from "../../abis/ReputationReporter.ts";
import type { Address } from "../../config/addresses.ts";
import { CELO_CHAIN_ID } from "../../config/celo.ts";
import type { IndexTarget } from "../../config/target.ts";
import { report } from "../../ponder.schema.ts";
import { firstLine } from "../../shared/async.ts";
import type { IndexDb } from "../db.ts";
import { type IpfsNode, parseCid, RAW, SHA2_256 } from "../ipfs/node.ts";
import { isoFromSeconds as iso } from "../money.ts";
import { indexedHead } from "../stats/queries.ts";
import { attestedStatus } from "../wallet/queries.ts";
import { passportDocumentSchema } from "./document.ts";
import type { Lookup } from "./passport-id.ts";
import type { ReporterClient } from "./reporter.ts";
import type { PassportStatus, VerifyResult } from "./schema.ts";

type Row = typeof report.$inferSelect;

/** The CID of a raw block whose sha256 is `hex`: how a 0x content hash names a document. */
function cidOfDigest(hex: Hex): string {
  return CID.createV1(RAW, createDigest(SHA2_256, Buffer.from(hex.slice(2), "hex"))).toString();
}

/** The 0x sha256 of the content a CID names (when it is a sha256 CID). */
export function contentHashOf(cidText: string): Hex | null {
  const cid = parseCid(cidText);
  return cid && cid.multihash.code === SHA2_256
    ? (`0x${Buffer.from(cid.multihash.digest).toString("hex")}` as Hex)
    : null;
}

/** The indexed rows a lookup names, newest first (an id may exist on both reporters). */
export async function findRows(db: IndexDb, lookup: Lookup): Promise<Row[]> {
  const where =
    lookup.kind === "id"
      ? eq(report.reportId, lookup.reportId)
      : lookup.kind === "cid"
        ? inArray(report.reportHash, [...new Set([lookup.text, lookup.cid.toV1().toString()])])
        : or(inArray(report.reportHash, [lookup.hex, cidOfDigest(lookup.hex)]), eq(report.reportIdHash, lookup.hex));
  const rows = await db.select().from(report).where(where!).limit(10);
  return rows.sort((a, b) => Number(b.publishedAt - a.publishedAt));
}

export type VerifyContext = {
  db: IndexDb;
  target: Pick<IndexTarget, "schema" | "reporters">;
  ipfs?: Promise<IpfsNode>;
  reporter?: ReporterClient;
  baseUrl: string;
};

const EMPTY: Omit<VerifyResult, "id" | "status" | "valid" | "reason"> = {
  reportId: null,
  walletAddress: null,
  buyer: null,
  scores: null,
  loanCapacity: null,
  report: null,
  reportHash: null,
  ipfsCid: null,
  contentHash: null,
  integrity: { checked: false, contentMatchesCid: null, attestationMatchesContent: null, detail: null },
  attestation: null,
  source: null,
  issuedAt: null,
  expiresAt: null,
  revokedAt: null,
  revocationReason: null,
  supersedes: null,
  supersededBy: null,
  asOf: null,
  verifyUrl: null,
  howToVerify: null,
};

export const notFound = (id: string, reason: string, asOf: VerifyResult["asOf"] = null): VerifyResult => ({
  id,
  status: "not_found",
  valid: false,
  reason,
  ...EMPTY,
  asOf,
});

/**
 * What a passport is worth now, from the indexed rows (the reporters' events) and the pinned
 * content, never from a record of what this service issued. The chain is read only when the rows
 * have nothing: a passport on chain that the indexer has not reached yet is `pending`.
 */
export async function verifyPassport(ctx: VerifyContext, id: string, lookup: Lookup): Promise<VerifyResult> {
  const [rows, head] = await Promise.all([findRows(ctx.db, lookup), indexedHead(ctx.db, ctx.target.schema)]);
  const asOf = head ? { block: Number(head.blockNumber), time: iso(head.timestamp) } : null;
  const row = rows[0];
  if (!row)
    return (
      (await pendingOnChain(ctx, id, lookup, asOf)) ??
      notFound(id, "No reporter has attested a passport under this id.", asOf)
    );

  const source = sourceOf(ctx, row.reporter);
  const cid = parseCid(row.reportHash);
  const integrity = await checkContent(ctx.ipfs, row);
  const now = head ? Number(head.timestamp) : Math.floor(Date.now() / 1000);
  const attested = attestedStatus(row, now);
  let status: PassportStatus;
  let reason: string;
  if (integrity.tampered)
    [status, reason] = ["tampered", `The pinned content does not match the attestation: ${integrity.result.detail}.`];
  else if (attested === "revoked")
    [status, reason] = ["revoked", `Revoked on ${iso(row.revokedAt!)}: ${row.revocationReason}.`];
  else if (attested === "superseded")
    [status, reason] = ["superseded", `Replaced by ${row.supersededBy}, a later passport of the same wallet.`];
  else if (attested === "expired")
    [status, reason] = [
      "expired",
      `Expired on ${iso(row.expiresAt!)} (the latest indexed block's time is ${iso(now)}).`,
    ];
  else
    [status, reason] = [
      "confirmed",
      "Attested on chain, indexed, not revoked, superseded or expired, and its content is intact.",
    ];

  const contract = row.reporter as Address;
  return {
    id,
    status,
    valid: status === "confirmed",
    reason,
    reportId: row.reportId,
    walletAddress: row.wallet,
    buyer: row.buyer,
    scores: { financialHealth: row.financialHealthScore, reputation: row.reputationScore },
    loanCapacity: row.loanCapacity,
    report: integrity.document,
    reportHash: row.reportHash,
    ipfsCid: cid ? row.reportHash : null,
    contentHash: cid ? contentHashOf(row.reportHash) : isHex(row.reportHash) ? row.reportHash : null,
    integrity: integrity.result,
    attestation: {
      contract,
      chainId: CELO_CHAIN_ID,
      transaction: row.transactionHash,
      block: Number(row.blockNumber),
      time: iso(row.publishedAt),
      attester: contract,
    },
    source,
    issuedAt: iso(row.publishedAt),
    expiresAt: row.expiresAt === null ? null : iso(row.expiresAt),
    revokedAt: row.revokedAt === null ? null : iso(row.revokedAt),
    revocationReason: row.revocationReason,
    supersedes: row.supersedes,
    supersededBy: row.supersededBy,
    asOf,
    verifyUrl: `${ctx.baseUrl}/api/agent/verify/${row.reportId}`,
    howToVerify: howToVerify(contract, row.reportId, cid ? row.reportHash : null),
  };
}

/** Ours, or the original OnchainReporter (on the devnet: one a test deployed and named in ONCHAIN_REPORTER_ADDRESS). */
function sourceOf(ctx: VerifyContext, contract: string): VerifyResult["source"] {
  const original = ctx.reporter
    ? ctx.reporter.settings.original
    : ctx.target.reporters.length > 1
      ? ctx.target.reporters[0]!
      : null;
  return original && original.toLowerCase() === contract.toLowerCase() ? "onchain-reporter" : "reputation-reporter";
}

function howToVerify(contract: string, reportId: string, cid: string | null): VerifyResult["howToVerify"] {
  return {
    contractCall: `verifyReport("${reportId}") on ${contract} (chain ${CELO_CHAIN_ID}) returns (exists, {wallet, buyer, reputationScore, financialHealthScore, loanCapacity, reportHash, publishedAt}); reportStatus("${reportId}") returns (exists, revoked, expiresAt, supersededBy, revocationReason)`,
    ipfs:
      cid &&
      `Fetch ${cid} from any IPFS node (or GET /ipfs/${cid} here); its bytes must hash to the CID (CIDv1, raw leaves, sha256) and its walletAddress and scores must equal the attestation`,
  };
}

/** The pinned document against the CID and the attestation. Content this node does not hold is not checked (not tampered). */
async function checkContent(
  ipfs: Promise<IpfsNode> | undefined,
  row: Row,
): Promise<{ tampered: boolean; document: VerifyResult["report"]; result: VerifyResult["integrity"] }> {
  const unchecked = (detail: string) => ({
    tampered: false,
    document: null,
    result: { checked: false, contentMatchesCid: null, attestationMatchesContent: null, detail },
  });
  if (!parseCid(row.reportHash)) return unchecked("the reportHash is not a CID: there is no content to check");
  let node: IpfsNode;
  try {
    if (!ipfs) return unchecked("this service has no IPFS node");
    node = await ipfs;
  } catch {
    return unchecked("the IPFS node is unavailable");
  }
  let bytes: Uint8Array | undefined;
  try {
    bytes = await node.get(row.reportHash);
  } catch (error) {
    // get() refuses content that does not hash to its CID.
    return {
      tampered: true,
      document: null,
      result: { checked: true, contentMatchesCid: false, attestationMatchesContent: null, detail: firstLine(error) },
    };
  }
  if (!bytes) return unchecked("this node does not hold the content (not pinned here)");
  const parsed = parseDocument(bytes);
  if (!parsed.success)
    return {
      tampered: true,
      document: null,
      result: {
        checked: true,
        contentMatchesCid: true,
        attestationMatchesContent: false,
        detail: "the content under the CID is not a passport document",
      },
    };
  const doc = parsed.data;
  const mismatches = [
    doc.walletAddress.toLowerCase() !== row.wallet.toLowerCase() && "wallet",
    doc.scores.reputation !== row.reputationScore && "reputation score",
    doc.scores.financialHealth !== row.financialHealthScore && "financial health score",
    doc.reportId !== row.reportId && "report id",
  ].filter(Boolean);
  const matches = mismatches.length === 0;
  return {
    tampered: !matches,
    document: doc,
    result: {
      checked: true,
      contentMatchesCid: true,
      attestationMatchesContent: matches,
      detail: matches ? null : `the document's ${mismatches.join(", ")} differ from the attestation`,
    },
  };
}

/** Documents parsed, by the very bytes the IPFS node served (it serves the same object while the block is unchanged). */
const parsedDocuments = new WeakMap<
  Uint8Array,
  ReturnType<typeof passportDocumentSchema.safeParse> | { success: false }
>();

function parseDocument(bytes: Uint8Array) {
  let parsed = parsedDocuments.get(bytes);
  if (!parsed) {
    try {
      parsed = passportDocumentSchema.safeParse(JSON.parse(Buffer.from(bytes).toString("utf8")));
    } catch {
      parsed = { success: false as const };
    }
    parsedDocuments.set(bytes, parsed);
  }
  return parsed;
}

/** Not indexed: does a reporter contract have it already (the indexer has not reached its block)? */
async function pendingOnChain(
  ctx: VerifyContext,
  id: string,
  lookup: Lookup,
  asOf: VerifyResult["asOf"],
): Promise<VerifyResult | null> {
  const client = ctx.reporter?.client;
  if (!client || lookup.kind === "hash") return null;
  for (const address of ctx.target.reporters) {
    try {
      const found = await withTimeout(
        async () => {
          if (lookup.kind === "id") {
            const [exists, a] = await client.readContract({
              address: address as Address,
              abi: reputationReporterAbi,
              functionName: "verifyReport",
              args: [lookup.reportId],
            });
            return exists ? { reportId: lookup.reportId, a } : null;
          }
          const [exists, reportId, a] = await client.readContract({
            address: address as Address,
            abi: reputationReporterAbi,
            functionName: "verifyReportByHash",
            args: [lookup.text],
          });
          return exists ? { reportId, a } : null;
        },
        { timeout: 2_000 },
      );
      if (!found) continue;
      const { reportId, a } = found;
      const cid = parseCid(a.reportHash) ? a.reportHash : null;
      return {
        id,
        status: "pending",
        valid: false,
        reason: "On chain, but not indexed yet: verify again in a few seconds.",
        ...EMPTY,
        reportId,
        walletAddress: a.wallet.toLowerCase(),
        buyer: a.buyer.toLowerCase(),
        scores: { financialHealth: a.financialHealthScore, reputation: a.reputationScore },
        loanCapacity: a.loanCapacity,
        reportHash: a.reportHash,
        ipfsCid: cid,
        contentHash: cid && contentHashOf(cid),
        attestation: {
          contract: address,
          chainId: CELO_CHAIN_ID,
          transaction: null,
          block: null,
          time: iso(a.publishedAt),
          attester: address,
        },
        source: sourceOf(ctx, address),
        issuedAt: iso(a.publishedAt),
        asOf,
        verifyUrl: `${ctx.baseUrl}/api/agent/verify/${reportId}`,
        howToVerify: howToVerify(address, reportId, cid),
      };
    } catch {
      // the chain did not answer in time: not known to be pending
    }
  }
  return null;
}
