import type { Chain, Client, Transport } from "viem";
import { waitForTransactionReceipt } from "viem/actions";

/**
 * viem's waitForTransactionReceipt with its replacement check off. While that check runs (the
 * transaction seen pending, its block read for a replacement), viem 2.57 drops the block numbers
 * that arrive (`if (retrying) return`) and looks again only at the next new block: on a chain where
 * nothing else is sent (a devnet with automine), the block holding the transaction can be the one
 * dropped, and the wait then lasts its whole timeout (seen once in CI: a devnet's seeding held 180 s;
 * test/devnet-receipt.test.ts makes it happen). No transaction of ours is ever replaced (one sender
 * per key, no speed-ups), so there is nothing for the check to find.
 */
export function waitForReceipt<chain extends Chain | undefined>(
  client: Client<Transport, chain>,
  args: Omit<Parameters<typeof waitForTransactionReceipt<chain>>[1], "checkReplacement">,
) {
  return waitForTransactionReceipt(client, { ...args, checkReplacement: false });
}
