import { zeroAddress } from "viem";
import { describe, expect, it } from "vitest";
import { DAY, type WalletFacts, type WalletTransfer } from "../api/scoring/facts.ts";
import { scoreWallet } from "../api/scoring/model.ts";
import { FUNDING_HOPS, type OutflowReader, traceFunding } from "../api/wallet/funding.ts";
import type { Address } from "../config/addresses.ts";
import { actorAddress, Random, usd } from "../devnet/scenario/random.ts";
import { monthOf } from "../shared/month.ts";

// The scoring model on synthetic wallets: properties that must hold for any history, not only for
// the devnet personas (those are checked end to end in test/db/screen.test.ts).

const ASOF = Date.UTC(2026, 10, 21) / 1000;
const USDT = "0x00000000000000000000000000000000000000aa" as Address;
const ZERO: Address = zeroAddress;

type Move = { from: Address; to: Address; value: bigint; at: number };

/**
 * What the indexer's flow and received tables would answer about `moves`: each member's payments
 * summed per payee, with everything that payee ever received.
 */
function outflowsIn(moves: Move[]): OutflowReader {
  return async (members) =>
    members.flatMap((member) => {
      const paid = moves.filter((m) => m.from === member);
      const flows = new Set(paid.map((m) => `${m.to}|${monthOf(m.at)}`)).size;
      return [...new Set(paid.map((m) => m.to))].map((payee) => ({
        member,
        payee,
        total: paid.filter((m) => m.to === payee).reduce((s, m) => s + m.value, 0n),
        flows,
        received: moves.filter((m) => m.to === payee).reduce((s, m) => s + m.value, 0n),
      }));
    });
}

/** WalletFacts of `wallet` as the indexer would report them, from a list of moves of money. */
async function factsOf(wallet: Address, moves: Move[]): Promise<WalletFacts> {
  const own = moves.filter((m) => m.from === wallet || m.to === wallet).sort((a, b) => a.at - b.at);
  const transfers: WalletTransfer[] = [];
  for (const m of own) {
    if (m.from === wallet)
      transfers.push({ direction: "out", counterparty: m.to, token: USDT, value: m.value, at: m.at });
    if (m.to === wallet)
      transfers.push({ direction: "in", counterparty: m.from, token: USDT, value: m.value, at: m.at });
  }
  const inWindow = transfers.filter((t) => t.at > ASOF - 365 * DAY);
  const firstAt = (w: Address) => Math.min(...moves.filter((m) => m.from === w || m.to === w).map((m) => m.at));
  const balance = transfers.reduce((b, t) => (t.direction === "in" ? b + t.value : b - t.value), 0n);
  return {
    address: wallet,
    asOf: ASOF,
    account: own.length
      ? {
          firstAt: own[0]!.at,
          lastAt: own.at(-1)!.at,
          transfersIn: transfers.filter((t) => t.direction === "in").length,
          transfersOut: transfers.filter((t) => t.direction === "out").length,
        }
      : null,
    balances: [{ token: USDT, balance }],
    transfers: inWindow,
    firstSeen: [...new Set(transfers.filter((t) => t.direction === "out").map((t) => t.counterparty))].map((a) => ({
      address: a,
      firstAt: firstAt(a),
    })),
    funding: await traceFunding(wallet, outflowsIn(moves), async () =>
      inWindow.filter((t) => t.direction === "in").map((t) => t.counterparty),
    ),
  };
}

/** A random but plausible history: on-ramps, irregular payers, spending at shops. */
function randomHistory(rng: Random, wallet: Address, seed: number): Move[] {
  const moves: Move[] = [];
  const months = rng.int(2, 16);
  const start = ASOF - months * 30 * DAY;
  const payers = Array.from({ length: rng.int(1, 12) }, (_, i) => actorAddress(seed, `payer-${i}`));
  const shops = Array.from({ length: rng.int(1, 15) }, (_, i) => actorAddress(seed, `shop-${i}`));
  for (const p of payers) moves.push({ from: ZERO, to: p, value: usd(1_000_000), at: start - DAY });
  let balance = 0n;
  const events = rng.int(3, 120);
  for (let i = 0; i < events; i++) {
    const at = Math.floor(start + rng.next() * (ASOF - start - DAY));
    if (rng.chance(0.45)) {
      const value = usd(Math.max(1, rng.amount(150, 1)));
      moves.push({ from: rng.pick(payers), to: wallet, value, at });
      balance += value;
    } else {
      const value = usd(Math.max(1, rng.amount(60, 1)));
      if (value > balance) continue;
      moves.push({ from: wallet, to: rng.pick(shops), value, at });
      balance -= value;
    }
  }
  return moves.sort((a, b) => a.at - b.at);
}

/** A regular monthly salary from a new employer over the last `months` months. */
function salary(seed: number, wallet: Address, months: number, amount: number): Move[] {
  const employer = actorAddress(seed, "employer");
  const moves: Move[] = [
    { from: ZERO, to: employer, value: usd(amount * (months + 1)), at: ASOF - (months + 1) * 30 * DAY },
  ];
  for (let m = months; m >= 1; m--)
    moves.push({ from: employer, to: wallet, value: usd(amount), at: ASOF - m * 30 * DAY + 5 * DAY });
  return moves;
}

/** Money sent out and brought back through a chain of fresh wallets, every month. */
function cycling(seed: number, wallet: Address, hops: number, months: number, amount: number): Move[] {
  const moves: Move[] = [];
  for (let m = months; m >= 1; m--) {
    const chain = Array.from({ length: hops }, (_, i) => actorAddress(seed, `mule-${m}-${i}`));
    const at = ASOF - m * 30 * DAY + 2 * DAY;
    moves.push({ from: wallet, to: chain[0]!, value: usd(amount), at });
    for (const [i, mule] of chain.entries()) {
      moves.push({ from: mule, to: chain[i + 1] ?? wallet, value: usd(amount), at: at + (i + 1) * 3600 });
    }
  }
  return moves;
}

const SAMPLES = 150;

describe("scoring properties", () => {
  it("adding a regular salary never lowers any score", async () => {
    for (let seed = 1; seed <= SAMPLES; seed++) {
      const rng = new Random(seed);
      const wallet = actorAddress(seed, "wallet");
      const base = randomHistory(rng, wallet, seed);
      const paid = [...base, ...salary(seed, wallet, rng.int(1, 12), rng.int(800, 6_000))];
      const before = scoreWallet(await factsOf(wallet, base)).scores;
      const after = scoreWallet(await factsOf(wallet, paid)).scores;
      expect(after.financialHealth, `seed ${seed} health`).toBeGreaterThanOrEqual(before.financialHealth);
      expect(after.reputation, `seed ${seed} reputation`).toBeGreaterThanOrEqual(before.reputation);
    }
  });

  it("cycling a wallet's own money through fresh wallets raises its loan capacity by at most 10%", async () => {
    for (let seed = 1; seed <= SAMPLES; seed++) {
      const rng = new Random(seed * 7);
      const wallet = actorAddress(seed, "wallet");
      const base = [
        ...randomHistory(rng, wallet, seed),
        ...(rng.chance(0.5) ? salary(seed, wallet, 12, rng.int(1_500, 5_000)) : []),
      ];
      const cycled = [...base, ...cycling(seed, wallet, rng.int(1, 6), rng.int(1, 12), rng.int(100, 20_000))];
      const before = scoreWallet(await factsOf(wallet, base));
      const after = scoreWallet(await factsOf(wallet, cycled));
      expect(Number(after.loan.maxUnits), `seed ${seed}`).toBeLessThanOrEqual(Number(before.loan.maxUnits) * 1.1);
      expect(after.signals.inflowByKind.income, `seed ${seed} income`).toBe(before.signals.inflowByKind.income);
    }
  });

  it("never counts dust, returned money or cycled money as income", async () => {
    const wallet = actorAddress(1, "wallet");
    const friend = actorAddress(1, "friend");
    const shop = actorAddress(1, "shop");
    const moves: Move[] = [
      { from: ZERO, to: friend, value: usd(10_000), at: ASOF - 300 * DAY },
      { from: friend, to: wallet, value: usd(500), at: ASOF - 200 * DAY },
      { from: ZERO, to: actorAddress(1, "customer"), value: usd(5_000), at: ASOF - 300 * DAY },
      { from: actorAddress(1, "customer"), to: shop, value: usd(2_000), at: ASOF - 160 * DAY },
      { from: wallet, to: shop, value: usd(120), at: ASOF - 150 * DAY },
      { from: shop, to: wallet, value: usd(120), at: ASOF - 149 * DAY }, // a refund
      ...Array.from({ length: 300 }, (_, i) => ({
        from: actorAddress(1, `spam-${i % 40}`),
        to: wallet,
        value: 9n,
        at: ASOF - (i + 1) * 3600,
      })),
      ...cycling(1, wallet, 3, 6, 300),
    ];
    const { signals } = scoreWallet(await factsOf(wallet, moves));
    expect(signals.inflowByKind.income).toBe(usd(500));
    expect(signals.inflowByKind.returned).toBe(usd(120));
    expect(signals.inflowByKind.cycled).toBe(usd(1_800));
    expect(signals.dustInflows).toBe(300);
    expect(signals.selfFundedWallets).toBe(18);
  });

  it("follows money forward through at most FUNDING_HOPS fresh wallets", async () => {
    const wallet = actorAddress(4, "wallet");
    const base = salary(4, wallet, 12, 2_000);
    const within = scoreWallet(await factsOf(wallet, [...base, ...cycling(4, wallet, FUNDING_HOPS, 6, 1_000)])).signals;
    expect(within.inflowByKind.cycled).toBe(usd(6_000));
    expect(within.selfFundedWallets).toBe(6 * FUNDING_HOPS);
    // One wallet more and the trail ends before the money comes back: documented in docs/scoring.md.
    const beyond = scoreWallet(
      await factsOf(wallet, [...base, ...cycling(4, wallet, FUNDING_HOPS + 1, 6, 1_000)]),
    ).signals;
    expect(beyond.inflowByKind.cycled).toBe(0n);
  });

  it("tells a thin file from bad behaviour", async () => {
    const wallet = actorAddress(2, "wallet");
    const empty = scoreWallet(await factsOf(wallet, []));
    expect(empty.recommendation).toBe("decline");
    expect(empty.thinFile.thinFile).toBe(true);
    expect(empty.rationale).toMatch(/not evidence of bad behaviour/);
    expect(empty.loan.maxUnits).toBe(0n);
  });

  it("recognises monthly payroll as recurring income and names the payer and cadence", async () => {
    const wallet = actorAddress(3, "wallet");
    const result = scoreWallet(await factsOf(wallet, salary(3, wallet, 8, 2_500)));
    expect(result.signals.recurring).toEqual([
      expect.objectContaining({
        payer: actorAddress(3, "employer"),
        cadence: "monthly",
        payments: 6,
        medianUnits: usd(2_500),
      }),
    ]);
    expect(result.incomeLabel).toBe("recurring monthly");
  });

  it("declines a listed wallet whatever its history, with no loan; holds an exposed one to review; never calls an unknown clear", async () => {
    const wallet = actorAddress(4, "wallet");
    const facts = await factsOf(wallet, [...salary(4, wallet, 12, 4_000), ...salary(5, wallet, 12, 3_000)]);
    const clear = scoreWallet({ ...facts, sanctions: { complete: true, listed: null, delisted: null, exposure: [] } });
    expect(clear.recommendation).toBe("approve");
    expect(clear.signals.sanctions.status).toBe("not_listed");

    const listing = { block: 1234, at: ASOF - 10 * DAY };
    const listed = scoreWallet({
      ...facts,
      sanctions: { complete: true, listed: listing, delisted: null, exposure: [] },
    });
    expect(listed.recommendation).toBe("decline");
    expect(listed.rationale).toMatch(/sanctions oracle.*since block 1234/);
    expect(listed.concerns.some((c) => c.includes("listed on the sanctions oracle since block 1234"))).toBe(true);
    expect([listed.loan.minUnits, listed.loan.maxUnits]).toEqual([0n, 0n]);
    // A listing seen is a listing even when the oracle's history is not complete.
    expect(
      scoreWallet({ ...facts, sanctions: { complete: false, listed: listing, delisted: null, exposure: [] } }).signals
        .sanctions.status,
    ).toBe("listed");

    const listedWallet = actorAddress(4, "listed");
    const exposure = [{ wallet: listedWallet, transfers: 2, units: usd(300), lastAt: ASOF - 20 * DAY }];
    const exposed = scoreWallet({ ...facts, sanctions: { complete: true, listed: null, delisted: null, exposure } });
    expect(exposed.recommendation).toBe("review");
    expect(exposed.rationale).toMatch(/1 wallet\(s\) listed on the sanctions oracle/);
    expect(exposed.concerns.some((c) => c.includes(listedWallet) && c.includes("2 direct transfer(s)"))).toBe(true);
    expect(exposed.topFactors).toContainEqual({
      score: "reputation",
      factor: "sanctioned counterparties",
      points: -30,
    });
    expect(exposed.scores.reputation).toBeLessThan(clear.scores.reputation);

    for (const unknown of [undefined, { complete: false, listed: null, delisted: null, exposure: [] }]) {
      const result = scoreWallet({ ...facts, sanctions: unknown });
      expect(result.signals.sanctions.status).toBe("inconclusive");
      expect(result.concerns.some((c) => c.startsWith("sanctions status inconclusive"))).toBe(true);
    }
  });
});
