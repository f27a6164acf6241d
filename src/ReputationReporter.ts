import { ponder } from "ponder:registry";
import { report } from "ponder:schema";
import type { Address } from "../config/addresses.ts";

// Passports as the reporter contracts attest them. The report row is keyed by (reporter, reportId):
// an id is unique per contract, and the service may index the original Celo reporter beside ours.
const keyOf = (reporter: Address, reportId: string) => ({ reporter: reporter.toLowerCase() as Address, reportId });

ponder.on("ReputationReporter:FinancialReportPublished", async ({ event, context }) => {
  const { args } = event;
  await context.db.insert(report).values({
    ...keyOf(event.log.address, args.reportId),
    reportIdHash: args.reportIdHash,
    wallet: args.wallet.toLowerCase() as Address,
    buyer: args.buyer.toLowerCase() as Address,
    reputationScore: args.reputationScore,
    financialHealthScore: args.financialHealthScore,
    loanCapacity: args.loanCapacity,
    reportHash: args.reportHash,
    publishedAt: args.timestamp,
    blockNumber: event.block.number,
    transactionHash: event.transaction.hash,
  });
});

ponder.on("ReputationReporter:ReportExpirySet", async ({ event, context }) => {
  await context.db
    .update(report, keyOf(event.log.address, event.args.reportId))
    .set({ expiresAt: event.args.expiresAt });
});

ponder.on("ReputationReporter:ReportSuperseded", async ({ event, context }) => {
  const { oldReportId, newReportId } = event.args;
  await context.db.update(report, keyOf(event.log.address, oldReportId)).set({ supersededBy: newReportId });
  await context.db.update(report, keyOf(event.log.address, newReportId)).set({ supersedes: oldReportId });
});

ponder.on("ReputationReporter:ReportRevoked", async ({ event, context }) => {
  await context.db
    .update(report, keyOf(event.log.address, event.args.reportId))
    .set({ revokedAt: event.args.timestamp, revocationReason: event.args.reason });
});
