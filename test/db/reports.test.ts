import { parseEventLogs } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reputationReporterAbi } from "../../abis/ReputationReporter.ts";
import { devnetClients } from "../../devnet/chain.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import { normalise } from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type DatabaseSlot, type Indexer, testDatabase, waitForBlock } from "../support/indexer.ts";

type Hex = `0x${string}`;

// Passports: the `report` table follows the reporter's events (published, expiry, superseded,
// revoked), in backfill and live, exactly as the chain's logs say. On Postgres only: PGlite's rows are
// read back by test/db/passports.test.ts (vitest.config.ts says why).
describe(`passport attestations (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let indexer: Indexer;

  const reporter = () => {
    const { publicClient, walletClient } = devnetClients(
      devnet.manifest.rpcUrl,
      devnet.manifest.service.reporter.privateKey as Hex,
    );
    const send = async (hash: Promise<Hex>) => {
      const receipt = await waitForReceipt(publicClient, { hash: await hash, pollingInterval: 50 });
      expect(receipt.status).toBe("success");
      return Number(receipt.blockNumber);
    };
    const address = devnet.manifest.reporter.address;
    return {
      publish: (wallet: string, id: string, hash: string) =>
        send(
          walletClient.writeContract({
            address,
            abi: reputationReporterAbi,
            functionName: "publishFinancialReport",
            args: [wallet as Hex, devnet.manifest.lenders[0]!.address, 81, 74, "1000-2500 USD", id, hash],
          }),
        ),
      publishV2: (wallet: string, id: string, hash: string, expiresAt: bigint, supersedes: string) =>
        send(
          walletClient.writeContract({
            address,
            abi: reputationReporterAbi,
            functionName: "publishFinancialReportV2",
            args: [
              wallet as Hex,
              devnet.manifest.lenders[1]!.address,
              84,
              79,
              "1200-2800 USD",
              id,
              hash,
              expiresAt,
              supersedes,
            ],
          }),
        ),
      revoke: (id: string, reason: string) =>
        send(
          walletClient.writeContract({
            address,
            abi: reputationReporterAbi,
            functionName: "revokeReport",
            args: [id, reason],
          }),
        ),
    };
  };

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 2, months: 2, slotHours: 24 * 7 });
    ({ devnet, slot } = env);
  }, 240_000);

  afterAll(() => env?.stop());

  it("indexes published, expiring, superseding and revoked passports as the logs say", async () => {
    const { salaried, merchant } = devnet.manifest.personas;
    const r = reporter();
    const expiry = BigInt(Math.floor(Date.now() / 1000) + 90 * 86_400);
    // Before the indexer starts (backfill)...
    await r.publish(salaried!.address, "REP-SALARIED01", "bafkreisalaried01");
    await r.publishV2(merchant!.address, "REP-MERCHANT01", "bafkreimerchant01", expiry, "");
    indexer = await env.index();
    await waitForBlock(indexer, devnet.manifest.headBlock + 2);
    // ...and while it follows the chain (live).
    await r.publishV2(salaried!.address, "REP-SALARIED02", "bafkreisalaried02", expiry, "REP-SALARIED01");
    const last = await r.revoke("REP-MERCHANT01", "wallet reported compromised");
    await waitForBlock(indexer, last);
    await indexer.stop();

    const { publicClient } = devnetClients(devnet.manifest.rpcUrl, devnet.manifest.deployer.privateKey as Hex);
    const logs = parseEventLogs({
      abi: reputationReporterAbi,
      logs: await publicClient.getLogs({ address: devnet.manifest.reporter.address, fromBlock: 0n, toBlock: "latest" }),
    });
    const expected = new Map<string, Record<string, unknown>>();
    for (const log of logs) {
      if (log.eventName === "FinancialReportPublished") {
        const a = log.args;
        expected.set(a.reportId, {
          reporter: log.address.toLowerCase(),
          report_id: a.reportId,
          report_id_hash: a.reportIdHash,
          wallet: a.wallet.toLowerCase(),
          buyer: a.buyer.toLowerCase(),
          reputation_score: a.reputationScore,
          financial_health_score: a.financialHealthScore,
          loan_capacity: a.loanCapacity,
          report_hash: a.reportHash,
          published_at: a.timestamp,
          block_number: log.blockNumber,
          transaction_hash: log.transactionHash,
          expires_at: null,
          revoked_at: null,
          revocation_reason: null,
          supersedes: null,
          superseded_by: null,
        });
      }
      if (log.eventName === "ReportExpirySet") expected.get(log.args.reportId)!.expires_at = log.args.expiresAt;
      if (log.eventName === "ReportSuperseded") {
        expected.get(log.args.oldReportId)!.superseded_by = log.args.newReportId;
        expected.get(log.args.newReportId)!.supersedes = log.args.oldReportId;
      }
      if (log.eventName === "ReportRevoked")
        Object.assign(expected.get(log.args.reportId)!, {
          revoked_at: log.args.timestamp,
          revocation_reason: log.args.reason,
        });
    }
    expect(expected.size).toBe(3);
    const rows = await slot.read((query) => query("select * from report order by report_id"));
    expect(normalise(rows)).toEqual(
      normalise([...expected.values()].sort((a, b) => String(a.report_id).localeCompare(String(b.report_id)))),
    );
  });
});
