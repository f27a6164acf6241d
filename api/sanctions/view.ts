import { z } from "zod";
import { SANCTIONS_ORACLE } from "../../config/celo.ts";
import { isoFromSeconds as iso, usdRoundedToCents as usd } from "../money.ts";
import type { BlockMoment } from "../scoring/facts.ts";
import type { Assessment } from "../wallet/assess.ts";

const moment = z.object({ block: z.number(), time: z.iso.datetime() });

/** The `sanctioned` signal and the screen's `sanctions`: one shape, documented once. */
export const sanctionsViewSchema = z
  .object({
    status: z
      .enum(["listed", "not_listed", "inconclusive"])
      .describe(
        "inconclusive: the index cannot tell (the oracle is not indexed from its creation); never not_listed on an unknown",
      ),
    listed: z.boolean().nullable().describe("null when inconclusive"),
    listedSince: moment.nullable().describe("The block (and its time) of the current listing"),
    delistedAt: moment.nullable().describe("The latest removal from the list, when it was listed before"),
    exposure: z
      .object({
        wallets: z.array(
          z.object({ wallet: z.string(), transfers: z.number(), totalUsd: z.number(), lastAt: z.iso.datetime() }),
        ),
        totalUsd: z.number(),
      })
      .describe("Direct transfers, either way, with wallets listed now, over the last 12 months"),
    source: z.object({ name: z.string(), contract: z.string(), chain: z.literal("celo") }),
    asOf: moment.describe(
      "The indexed block this answer reads (how current the index is: compare with the chain head)",
    ),
  })
  .describe("The wallet on the Chainalysis sanctions oracle, as indexed from the chain");

export type SanctionsView = z.infer<typeof sanctionsViewSchema>;

const at = (m: BlockMoment | null) => m && { block: m.block, time: iso(m.at) };

export function sanctionsView(a: Assessment): SanctionsView {
  const s = a.result.signals.sanctions;
  return {
    status: s.status,
    listed: s.status === "inconclusive" ? null : s.status === "listed",
    listedSince: at(s.listed),
    delistedAt: at(s.delisted),
    exposure: {
      wallets: s.exposure.map((e) => ({
        wallet: e.wallet,
        transfers: e.transfers,
        totalUsd: usd(e.units),
        lastAt: iso(e.lastAt),
      })),
      totalUsd: usd(s.exposureUnits),
    },
    source: { name: "Chainalysis sanctions oracle (SanctionsList)", contract: SANCTIONS_ORACLE, chain: "celo" },
    asOf: { block: a.asOf.block, time: iso(a.asOf.timestamp) },
  };
}
