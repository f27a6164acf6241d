import type { Intent } from "../api/chat/language.ts";

/**
 * The chat phrasing table: questions as people type them (typos, word orders, one wallet, two, none,
 * periods, follow-ups in a conversation) about the devnet personas. `{a}` and `{b}` stand for the
 * named personas' addresses; `wallet` is passed as walletAddress; rows with the same `conversation`
 * run in order in one conversation. test/db/chat.test.ts checks each row's intent and figures
 * against the routes' own answers; bench/chat.ts times the deterministic engine over the same rows.
 */
export type PhrasingRow = {
  q: string;
  intent: Intent;
  /** Personas named in the message ({a}, {b}). */
  named?: string[];
  /** Persona passed as walletAddress. */
  wallet?: string;
  conversation?: string;
  /** The wallets the answer must be about (personas), when not simply `named` or `wallet`. */
  about?: string[];
  /** For activity: the period's kind. */
  period?: "months" | "days";
  direction?: "in" | "out" | "both";
};

export const PHRASINGS: PhrasingRow[] = [
  // scores and trust
  { q: "is {a} trustworthy?", named: ["salaried"], intent: "scores" },
  { q: "trustworhty?", wallet: "salaried", intent: "scores" },
  { q: "{a} score", named: ["drainer"], intent: "scores" },
  { q: "what's the recomendation for {a}", named: ["whale"], intent: "scores" },
  { q: "scores of this wallet please", wallet: "whale", intent: "scores" },
  { q: "how risky is {a}", named: ["self-funder"], intent: "scores" },
  { q: "Can I TRUST this one", wallet: "merchant", intent: "scores" },
  // income
  { q: "what does {a} earn a month", named: ["salaried"], intent: "income" },
  { q: "incmoe of {a}?", named: ["gig-worker"], intent: "income" },
  { q: "{a} revenue recurring?", named: ["merchant"], intent: "income" },
  { q: "does it get paid regularly", wallet: "one-off", intent: "income" },
  { q: "income", wallet: "self-funder", intent: "income" },
  { q: "who pays its salary and how often", wallet: "salaried", intent: "income" },
  // loan
  { q: "how much can I lend to {a}", named: ["salaried"], intent: "loan" },
  { q: "loan capcity and confidence", wallet: "merchant", intent: "loan" },
  { q: "borrow limit {a}", named: ["new-wallet"], intent: "loan" },
  // balances
  { q: "{a} balance", named: ["whale"], intent: "balances" },
  { q: "how much does it hold", wallet: "one-off", intent: "balances" },
  { q: "balnces pls", wallet: "salaried", intent: "balances" },
  // activity in a period
  { q: "activity in the last 3 months", wallet: "salaried", intent: "activity", period: "months" },
  { q: "what did {a} do since March", named: ["merchant"], intent: "activity", period: "months" },
  { q: "activity in octobr", wallet: "gig-worker", intent: "activity", period: "months" },
  { q: "spending last month", wallet: "salaried", intent: "activity", period: "months" },
  { q: "net flow over the last 90 days", wallet: "merchant", intent: "activity", period: "days" },
  { q: "how much did it receive from may to july", wallet: "salaried", intent: "activity", period: "months" },
  // largest transfers, counterparties
  { q: "largest transfers of {a}", named: ["salaried"], intent: "largest_transfers", direction: "both" },
  { q: "biggest incoming payments", wallet: "salaried", intent: "largest_transfers", direction: "in" },
  { q: "top transfers sent", wallet: "whale", intent: "largest_transfers", direction: "out" },
  { q: "who does {a} trade with", named: ["merchant"], intent: "counterparties" },
  { q: "top counterparties", wallet: "gig-worker", intent: "counterparties" },
  // comparisons
  { q: "compare {a} and {b}", named: ["salaried", "drainer"], intent: "compare" },
  { q: "{a} vs {b}", named: ["whale", "one-off"], intent: "compare" },
  { q: "which is better, {a} or {b}?", named: ["merchant", "gig-worker"], intent: "compare" },
  // passports
  { q: "does {a} have a passport", named: ["salaried"], intent: "passport" },
  { q: "attestation?", wallet: "dormant", intent: "passport" },
  // why low, what would raise it
  { q: "why is the scroe so low", wallet: "dust-spammed", intent: "score_factors" },
  { q: "what would raise {a}'s reputation", named: ["new-wallet"], intent: "score_factors" },
  { q: "factors hurting {a}", named: ["dormant"], intent: "score_factors" },
  // help, unknown, no wallet, bare wallet, overview
  { q: "what can you do?", intent: "help" },
  { q: "what's the weather in Paris", intent: "unknown" },
  { q: "income?", intent: "income", about: [] },
  { q: "{a}", named: ["one-off"], intent: "overview" },
  { q: "tell me about {a}", named: ["salaried"], intent: "overview" },
  // follow-ups in one conversation
  { q: "is {a} trustworthy", named: ["gig-worker"], conversation: "c1", intent: "scores" },
  { q: "and its income?", conversation: "c1", intent: "income", about: ["gig-worker"] },
  { q: "what about {a}?", named: ["salaried"], conversation: "c1", intent: "income" },
  { q: "compare it with {a}", named: ["whale"], conversation: "c1", intent: "compare", about: ["salaried", "whale"] },
  { q: "activity since march", wallet: "dormant", conversation: "c2", intent: "activity", period: "months" },
  { q: "and in october?", conversation: "c2", intent: "activity", about: ["dormant"], period: "months" },
  { q: "loan?", conversation: "c2", intent: "loan", about: ["dormant"] },
  { q: "AND ITS BALANCE", conversation: "c2", intent: "balances", about: ["dormant"] },
];
