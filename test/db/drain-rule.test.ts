import { zeroAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY, type WalletFacts, type WalletTransfer, WINDOW_DAYS } from "../../api/scoring/facts.ts";
import { DUST_FLOOR_UNITS, drainCandidates, isDrain } from "../../api/scoring/rules.ts";
import { loadWalletFacts } from "../../api/wallet/queries.ts";
import type { Address } from "../../config/addresses.ts";
import { type ChainTransfer, chainTransfers } from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { withIndexDb } from "../support/index-db.ts";
import { testDatabase, waitForBlock } from "../support/indexer.ts";

/** A wallet's transfers over the scoring window, from the chain's own logs (not the indexer's tables). */
function chainWindow(wallet: Address, transfers: ChainTransfer[], asOf: number): WalletTransfer[] {
  const out: WalletTransfer[] = [];
  for (const t of transfers) {
    const at = Number(t.timestamp);
    if (at <= asOf - WINDOW_DAYS * DAY) continue;
    const common = { token: t.token as Address, value: t.value, at };
    if (t.from === wallet) out.push({ direction: "out", counterparty: t.to as Address, ...common });
    if (t.to === wallet) out.push({ direction: "in", counterparty: t.from as Address, ...common });
  }
  return out;
}

const sorted = (xs: Iterable<string>) => [...new Set(xs)].sort();
const key = (t: WalletTransfer) => `${t.direction}|${t.counterparty}|${t.token}|${t.value}|${t.at}`;

// The drain-candidate rule is written once (api/scoring/rules.ts) and applied in SQL to preselect
// the payees whose first activity a screen reads (WalletFacts.firstSeen). On a seeded chain, the
// SQL's candidates equal the rule applied in TypeScript to the wallet's transfers from eth_getLogs.
describe(`drain candidates: the SQL equals the rule (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let transfers: ChainTransfer[];
  const facts = new Map<string, WalletFacts>();
  const wallets: { label: string; address: Address }[] = [];

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 40, months: 15, seed: 21 });
    devnet = env.devnet;
    const indexer = await env.index();
    const tokens = [devnet.manifest.tokens.USDT.address, devnet.manifest.tokens.USDC.address];
    transfers = await chainTransfers(devnet.manifest.rpcUrl, tokens, BigInt(devnet.manifest.startBlock));
    await waitForBlock(indexer, devnet.manifest.headBlock);
    // PGlite admits one process at a time: stop the indexer before opening its database.
    await indexer.stop();

    for (const [name, persona] of Object.entries(devnet.manifest.personas))
      wallets.push({ label: name, address: persona.address });
    const personas = new Set(wallets.map((w) => w.address));
    const background = sorted(transfers.flatMap((t) => [t.from, t.to])).filter(
      (w) => !personas.has(w as Address) && w !== zeroAddress,
    );
    for (const address of background.filter((_, i) => i % 4 === 0)) {
      wallets.push({ label: `background ${address}`, address: address as Address });
    }

    await withIndexDb(env.slot, async (db) => {
      for (const w of wallets) facts.set(w.address, (await loadWalletFacts(db, env.slot.schema, w.address)).facts);
    });
  }, 300_000);

  afterAll(() => env?.stop());

  it("reads the same window of transfers the rule is applied to", () => {
    for (const w of wallets) {
      const f = facts.get(w.address)!;
      expect(sorted(f.transfers.map(key)), w.label).toEqual(sorted(chainWindow(w.address, transfers, f.asOf).map(key)));
    }
  });

  it("looks up first activity for exactly the rule's candidates, every persona and a sample of wallets", () => {
    let candidates = 0;
    for (const w of wallets) {
      const f = facts.get(w.address)!;
      const rule = sorted(
        drainCandidates(w.address, chainWindow(w.address, transfers, f.asOf)).map((t) => t.counterparty),
      );
      expect(sorted(f.firstSeen.map((s) => s.address)), w.label).toEqual(rule);
      candidates += rule.length;
    }
    expect(candidates).toBeGreaterThan(20);
  });

  it("gives each candidate its first activity on the chain", () => {
    for (const w of wallets) {
      for (const seen of facts.get(w.address)!.firstSeen) {
        const first = Math.min(
          ...transfers.filter((t) => t.from === seen.address || t.to === seen.address).map((t) => Number(t.timestamp)),
        );
        expect(seen.firstAt, `${w.label}: ${seen.address}`).toBe(first);
      }
    }
  });

  it("finds the drainer's fresh sinks, each a drain", () => {
    const drainer = devnet.manifest.personas.drainer!;
    const f = facts.get(drainer.address)!;
    const candidates = drainCandidates(drainer.address, f.transfers);
    // 2-4 inflows a month, each drained to a new sink: a year's worth fall in the window.
    expect(candidates.length).toBeGreaterThanOrEqual(12);
    expect(candidates.length).toBeLessThanOrEqual(Number(drainer.truth.freshSinks));
    const firstSeen = new Map(f.firstSeen.map((s) => [s.address, s.firstAt]));
    for (const t of candidates) expect(isDrain(t, firstSeen.get(t.counterparty)), t.counterparty).toBe(true);
  });

  it("follows no dust inflow: the dust-spammed wallet's payments after dust alone are not candidates", () => {
    const spammed = devnet.manifest.personas["dust-spammed"]!;
    const f = facts.get(spammed.address)!;
    // The same transfers with every dust inflow counted as a real one: more candidates, which the
    // SQL (like the rule) must not name.
    const dustCounted = f.transfers.map((t) =>
      t.direction === "in" && t.value < DUST_FLOOR_UNITS ? { ...t, value: DUST_FLOOR_UNITS } : t,
    );
    const withDust = sorted(drainCandidates(spammed.address, dustCounted).map((t) => t.counterparty));
    const sql = sorted(f.firstSeen.map((s) => s.address));
    expect(withDust.length).toBeGreaterThan(sql.length);
  });
});
