// Operator revocation of a passport: npm run passport:revoke -- REP-XXXXXXXXXX --reason "wallet reported compromised"
// Sends revokeReport through our reporter with the reporter key (devnet: anvil #3 from the manifest;
// Celo: REPORTER_ADDRESS and REPORTER_PRIVATE_KEY with PONDER_RPC_URL_42220). GET /api/agent/verify/{id}
// answers `revoked` once the indexer has the ReportRevoked event.
import { parseArgs } from "node:util";
import { REPORT_ID } from "../api/passport/document.ts";
import { createReporter, resolveReporterSettings } from "../api/passport/reporter.ts";
import { StartupError } from "../config/errors.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { firstLine } from "../shared/async.ts";

async function main() {
  const { values, positionals } = parseArgs({ options: { reason: { type: "string" } }, allowPositionals: true });
  const [reportId] = positionals;
  if (!reportId || !REPORT_ID.test(reportId) || positionals.length !== 1)
    throw new StartupError('usage: npm run passport:revoke -- REP-XXXXXXXXXX --reason "why"');
  const reason = values.reason?.trim();
  if (!reason) throw new StartupError('--reason "..." is required (it is written on chain)');
  const reporter = createReporter(resolveReporterSettings(resolveIndexTarget()));
  if (!reporter.contract || !reporter.reporterAccount)
    throw new StartupError("No reporter configured: set REPORTER_ADDRESS and REPORTER_PRIVATE_KEY.");
  if (!(await reporter.exists(reportId)))
    throw new StartupError(`${reportId} does not exist on the reporter ${reporter.contract}.`);
  const { transaction, block } = await reporter.revoke(reportId, reason);
  console.log(JSON.stringify({ reportId, revoked: true, reason, contract: reporter.contract, transaction, block }));
}

main().catch((error) => {
  console.error(error instanceof StartupError ? error.message : firstLine(error));
  process.exit(1);
});
