import { ponder, type Context, type Event } from "ponder:registry";
import { transfer } from "ponder:schema";
import type { Address } from "../config/addresses.ts";
import { ZERO_ADDRESS } from "../config/addresses.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { applyTransferSide } from "./transfers.ts";

// Tracked mode indexes only the listed wallets' sides; "all" mode indexes every wallet.
const tracked = resolveIndexTarget().tracked;
const isIndexed = (wallet: Address) => wallet !== ZERO_ADDRESS && (tracked === null || tracked.has(wallet));

async function onTransfer({ event, context }: { event: Event<"Stablecoin:Transfer">; context: Context<"Stablecoin:Transfer"> }) {
  const fact = {
    token: event.log.address.toLowerCase() as Address,
    from: event.args.from.toLowerCase() as Address,
    to: event.args.to.toLowerCase() as Address,
    value: event.args.value,
    blockNumber: event.block.number,
    timestamp: event.block.timestamp,
  };
  await context.db.insert(transfer).values({
    id: event.id,
    ...fact,
    transactionHash: event.transaction.hash,
    logIndex: event.log.logIndex,
  });
  if (isIndexed(fact.from)) await applyTransferSide(context.db, fact, { wallet: fact.from, other: fact.to, direction: "out" });
  if (isIndexed(fact.to)) await applyTransferSide(context.db, fact, { wallet: fact.to, other: fact.from, direction: "in" });
}

ponder.on("Stablecoin:Transfer", onTransfer);

if (tracked) {
  // The inbound entry also delivers transfers between two tracked wallets, which the outbound
  // entry has already indexed: skip those so nothing counts twice. (The entry exists only in
  // tracked mode, so its name is not in the config's static type.)
  ponder.on("StablecoinInbound:Transfer" as "Stablecoin:Transfer", async (args) => {
    if (tracked.has(args.event.args.from.toLowerCase() as Address)) return;
    await onTransfer(args);
  });
}
