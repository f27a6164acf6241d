import { type Context, type Event, ponder } from "ponder:registry";
import { authorizationState, trackedWallet, transfer } from "ponder:schema";
import type { Hex } from "viem";
import type { Address } from "../config/addresses.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { addToFlow, addToReceived, addToTotals } from "./transfers.ts";

// Tracked mode: the config filters transfers to those touching a listed wallet.
const tracked = resolveIndexTarget().tracked;
/** The wallets the stats' wallet count counts: every one, or in tracked mode the tracked ones (as the views list them). */
const counted = (wallet: Address) => !tracked || tracked.has(wallet);

async function onTransfer({
  event,
  context,
}: {
  event: Event<"Stablecoin:Transfer">;
  context: Context<"Stablecoin:Transfer">;
}) {
  const fact = {
    token: event.log.address.toLowerCase() as Address,
    from: event.args.from.toLowerCase() as Address,
    to: event.args.to.toLowerCase() as Address,
    value: event.args.value,
    timestamp: event.block.timestamp,
  };
  // Independent writes: the transfer, its flow, its recipient's total, and the stats totals.
  await Promise.all([
    context.db.insert(transfer).values({
      id: event.id,
      ...fact,
      blockNumber: event.block.number,
      transactionHash: event.transaction.hash,
      logIndex: event.log.logIndex,
    }),
    addToFlow(context.db, fact),
    addToReceived(context.db, fact),
    addToTotals(context.db, fact, counted),
  ]);
}

ponder.on("Stablecoin:Transfer", onTransfer);

// EIP-3009 nonces spent on chain, so that a payment can be verified without asking the chain. A
// nonce is used or cancelled once, so a row is never updated. (In tracked mode only the outbound
// entry registers these: the events come unfiltered, once.)
async function onAuthorization(
  kind: "used" | "canceled",
  {
    event,
    context,
  }: { event: Event<"Stablecoin:AuthorizationUsed" | "Stablecoin:AuthorizationCanceled">; context: Context },
) {
  await context.db
    .insert(authorizationState)
    .values({
      token: event.log.address.toLowerCase() as Address,
      authorizer: event.args.authorizer.toLowerCase() as Address,
      nonce: event.args.nonce.toLowerCase() as Hex,
      kind,
      blockNumber: event.block.number,
      transactionHash: event.transaction.hash,
    })
    .onConflictDoNothing();
}

ponder.on("Stablecoin:AuthorizationUsed", (args) => onAuthorization("used", args));
ponder.on("Stablecoin:AuthorizationCanceled", (args) => onAuthorization("canceled", args));

if (tracked) {
  // The tracked set goes in the database too: the per-wallet views list exactly these wallets.
  ponder.on("Stablecoin:setup", async ({ context }) => {
    await context.db.insert(trackedWallet).values([...tracked].map((address) => ({ address })));
  });

  // The inbound entry also delivers transfers between two tracked wallets, which the outbound
  // entry has already indexed: skip those so nothing counts twice. (The entry exists only in
  // tracked mode, so its name is not in the config's static type.)
  ponder.on("StablecoinInbound:Transfer" as "Stablecoin:Transfer", async (args) => {
    if (tracked.has(args.event.args.from.toLowerCase() as Address)) return;
    await onTransfer(args);
  });
}
