import { type Context, ponder } from "ponder:registry";
import { sanctionsListing } from "ponder:schema";
import { and, eq, isNull } from "ponder";
import type { Address } from "../config/addresses.ts";

// The sanctions oracle's listings. Its events carry whole arrays; adding a listed wallet again or
// removing one that is not listed changes nothing on chain, and nothing here either.

/** The wallet's open listing (not removed), if any. Events are rare: a query per wallet is fine. */
const openListing = async (db: Context["db"], address: Address) =>
  (
    await db.sql
      .select()
      .from(sanctionsListing)
      .where(and(eq(sanctionsListing.address, address), isNull(sanctionsListing.delistedBlock)))
      .limit(1)
  )[0];

ponder.on("SanctionsList:SanctionedAddressesAdded", async ({ event, context }) => {
  for (const wallet of new Set(event.args.addrs.map((a) => a.toLowerCase() as Address))) {
    if (await openListing(context.db, wallet)) continue;
    await context.db.insert(sanctionsListing).values({
      address: wallet,
      listedBlock: event.block.number,
      listedAt: event.block.timestamp,
      listedTx: event.transaction.hash,
    });
  }
});

ponder.on("SanctionsList:SanctionedAddressesRemoved", async ({ event, context }) => {
  for (const wallet of new Set(event.args.addrs.map((a) => a.toLowerCase() as Address))) {
    const open = await openListing(context.db, wallet);
    if (!open) continue;
    await context.db.update(sanctionsListing, { address: wallet, listedBlock: open.listedBlock }).set({
      delistedBlock: event.block.number,
      delistedAt: event.block.timestamp,
      delistedTx: event.transaction.hash,
    });
  }
});
