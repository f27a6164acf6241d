import { ponder } from "ponder:registry";
import { transfer } from "ponder:schema";

// Insert-only: one row per Transfer log, no aggregates.
ponder.on("Stablecoin:Transfer", async ({ event, context }) => {
  await context.db.insert(transfer).values({
    id: event.id,
    token: event.log.address,
    from: event.args.from,
    to: event.args.to,
    value: event.args.value,
    blockNumber: event.block.number,
    timestamp: event.block.timestamp,
    transactionHash: event.transaction.hash,
    logIndex: event.log.logIndex,
  });
});
