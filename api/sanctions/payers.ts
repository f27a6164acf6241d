import type { Address } from "../../config/addresses.ts";
import type { IndexDb } from "../db.ts";
import { isListed } from "./queries.ts";

/** Payers' verdicts kept for one checkpoint: more than a block's payers; past it they are forgotten at once. */
const MAX_PAYERS = 10_000;

/**
 * A payer's sanctions verdict (`lookup`), asked once per payer for each checkpoint of the index:
 * the listing table changes only when the index moves, and every paid call passes the index gate,
 * which reads the checkpoint, before its payment. A verdict thus holds as of the index state the
 * gate saw, as the data served does. A lookup that failed is not kept; before any checkpoint was
 * read, every call asks.
 */
export function verdictPerCheckpoint(
  lookup: (payer: Address) => Promise<boolean>,
  checkpoint: () => string | undefined,
): { isListed(payer: Address): Promise<boolean> } {
  let at: string | undefined;
  let verdicts = new Map<Address, Promise<boolean>>();
  return {
    isListed(payer) {
      const now = checkpoint();
      if (now === undefined) return lookup(payer);
      if (now !== at || verdicts.size >= MAX_PAYERS) {
        at = now;
        verdicts = new Map();
      }
      let verdict = verdicts.get(payer);
      if (!verdict) {
        const kept = verdicts;
        verdict = lookup(payer);
        kept.set(payer, verdict);
        verdict.catch(() => kept.delete(payer));
      }
      return verdict;
    },
  };
}

/** The service's payer check: the sanctions_listing table's verdict, once per payer at each indexed checkpoint. */
export const payerSanctions = (db: IndexDb, schema: string, checkpoint: () => string | undefined) =>
  verdictPerCheckpoint((payer) => isListed(db, schema, payer), checkpoint);
