import { walletSummary } from "../chat/phrasing.ts";
import type { ScoreResult } from "../scoring/model.ts";

/** A paragraph written from the facts: the chat engine's overview of the wallet (a template: nothing in it that the numbers do not say). */
export function summaryOf(address: string, r: ScoreResult): string {
  return walletSummary(address, r);
}
