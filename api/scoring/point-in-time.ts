import { DAY, type WalletFacts, WINDOW_DAYS } from "./facts.ts";

/**
 * The facts as they stood at time `t`, from facts loaded with a window reaching a year before `t`:
 * transfers after `t` are dropped and undone from the balances, so a past score is the score the
 * model would have given then.
 */
export function factsAt(facts: WalletFacts, t: number): WalletFacts {
  const later = facts.transfers.filter((x) => x.at > t);
  const balances = facts.balances.map((b) => ({
    token: b.token,
    balance: later
      .filter((x) => x.token === b.token)
      .reduce((bal, x) => (x.direction === "in" ? bal - x.value : bal + x.value), b.balance),
  }));
  const before = facts.transfers.filter((x) => x.at <= t);
  const account =
    facts.account && facts.account.firstAt <= t
      ? {
          firstAt: facts.account.firstAt,
          lastAt: before.at(-1)?.at ?? facts.account.firstAt,
          transfersIn: facts.account.transfersIn - later.filter((x) => x.direction === "in").length,
          transfersOut: facts.account.transfersOut - later.filter((x) => x.direction === "out").length,
        }
      : null;
  return {
    ...facts,
    asOf: t,
    account,
    balances,
    transfers: before.filter((x) => x.at > t - WINDOW_DAYS * DAY),
    firstSeen: facts.firstSeen.filter((f) => f.firstAt <= t),
  };
}
