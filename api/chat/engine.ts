import type { Address } from "../../config/addresses.ts";
import { ApiError } from "../../shared/errors.ts";
import { isoFromSeconds as iso } from "../money.ts";
import {
  activityFact,
  balancesFact,
  counterpartiesFact,
  type FactKind,
  type Facts,
  factorsFact,
  incomeFact,
  largestTransfersFact,
  loanFact,
  passportFact,
  type Source,
  scoresFact,
  type WalletReader,
} from "./facts.ts";
import { addressesIn, type Intent, normalise, type Period, readIntent, readPeriod, wordMatches } from "./language.ts";
import * as say from "./phrasing.ts";

/** What a conversation remembers between questions. */
export type ConversationState = { wallets: Address[]; intent: Intent | null; period: Period | null };

export type ChatQuestion = { message: string; walletAddress?: Address; conversation?: ConversationState | null };

/** A question read: what it asks, about which wallets, over which period (resolved against the indexed head). */
export type ResolvedQuestion = {
  intent: Intent;
  wallets: Address[];
  period: Period | null;
  periodDefaulted: boolean;
  direction: "in" | "out" | "both";
};

type ChatData = { period: Period | null; wallets: Record<string, Facts> };

export type ChatOutcome = {
  answer: string;
  intent: Intent;
  wallets: Address[];
  data: ChatData;
  sources: Source[];
  modelVersion: string;
  dataAsOf: { block: number; time: string } | null;
  state: ConversationState;
};

/** At most this many wallets are answered about in one question (a comparison takes two). */
const MAX_WALLETS = 3;
/** Intents that read a period; a follow-up that names only a period keeps one of these. */
const PERIODIC: Intent[] = ["activity", "largest_transfers"];
const WALLETLESS: Intent[] = ["help", "unknown"];

/** The default period of an activity question that names none. */
const defaultPeriod = (asOf: number): Period => readPeriod("last 3 months", asOf)!;

function directionOf(message: string): "in" | "out" | "both" {
  const words = normalise(message);
  const any = (keys: string[]) => words.some((w) => keys.some((k) => wordMatches(w, k)));
  const incoming = any(["incoming", "received", "receive", "inflows", "inflow", "deposits", "deposit"]);
  const outgoing = any(["outgoing", "sent", "send", "outflows", "outflow", "withdrawals", "spent", "paid"]);
  return incoming === outgoing ? "both" : incoming ? "in" : "out";
}

/** What a question asks, about which wallets: from its words and the conversation alone, so it can be checked before payment. */
export type QuestionReading = { intent: Intent; wallets: Address[] };

/**
 * Reads the question: addresses named in the message count first; walletAddress is the subject
 * when the message names none; otherwise the conversation's wallets. A message that names no
 * intent (a bare wallet, "and last month?", "what about 0x…?") continues the conversation's.
 */
export function readQuestion(q: ChatQuestion): QuestionReading {
  const named = addressesIn(q.message);
  const previous = q.conversation ?? null;
  const reading = readIntent(q.message, named.length);
  let wallets: Address[] = named.length ? named : q.walletAddress ? [q.walletAddress] : (previous?.wallets ?? []);
  const subject = q.walletAddress ?? previous?.wallets[0];
  let intent = reading.intent;
  if (intent === "unknown") {
    // Whether a period is named does not depend on "now": any time tells.
    if (readPeriod(q.message, Date.now() / 1000))
      intent = previous?.intent && PERIODIC.includes(previous.intent) ? previous.intent : "activity";
    else if (reading.bare)
      intent =
        previous?.intent && !WALLETLESS.includes(previous.intent)
          ? previous.intent
          : wallets.length
            ? "overview"
            : "help";
  }
  // "compare it with 0x…": the wallet under discussion against the one named.
  if (intent === "compare" && wallets.length === 1 && subject && subject !== wallets[0])
    wallets = [subject, wallets[0]!];
  return { intent, wallets: wallets.slice(0, intent === "compare" ? 2 : MAX_WALLETS) };
}

/** Chat's refusals of a question with no wallet data to answer from: 422, never charged. */
export const CHAT_REFUSALS = ["no_wallet", "unanswerable"] as const;

/** Why this question gets no answer from wallet data (help, an unknown question, no wallet named), or null. */
export function refusalOf(r: QuestionReading): ApiError | null {
  const unpaid = "Nothing was charged.";
  if (r.intent === "help")
    return new ApiError(422, "unanswerable", `${say.helpText()} ${unpaid}`, {
      intent: r.intent,
      capabilities: say.capabilityList(),
    });
  if (r.intent === "unknown")
    return new ApiError(422, "unanswerable", `${say.unknownText()} ${unpaid}`, {
      intent: r.intent,
      capabilities: say.capabilityList(),
    });
  if (r.wallets.length < (r.intent === "compare" ? 2 : 1))
    return new ApiError(422, "no_wallet", `${say.needWalletText(r.intent)} ${unpaid}`, { intent: r.intent });
  return null;
}

/** The question read and its period resolved against the indexed head; a question refusalOf refuses throws it. */
export async function resolveQuestion(reader: WalletReader, q: ChatQuestion): Promise<ResolvedQuestion> {
  const { intent, wallets } = readQuestion(q);
  const refusal = refusalOf({ intent, wallets });
  if (refusal) throw refusal;
  const previous = q.conversation ?? null;
  const asOf = await reader.asOf(wallets[0]);
  let period = readPeriod(q.message, asOf);
  // A follow-up on the same intent keeps its period unless it names another.
  if (!period && previous?.period && intent === previous.intent && PERIODIC.includes(intent)) period = previous.period;
  const periodDefaulted = intent === "activity" && !period;
  if (periodDefaulted) period = defaultPeriod(asOf);
  return { intent, wallets, period, periodDefaulted, direction: directionOf(q.message) };
}

type Gathered = { facts: Facts; sources: Source[] };

/** The facts an intent is answered from: the same read-only functions the model gets as tools. */
async function gather(reader: WalletReader, address: Address, r: ResolvedQuestion): Promise<Gathered> {
  const kinds: Partial<Record<Intent, FactKind[]>> = {
    scores: ["scores"],
    score_factors: ["factors"],
    income: ["income"],
    loan: ["loan"],
    balances: ["balances"],
    activity: ["activity"],
    largest_transfers: ["largestTransfers"],
    counterparties: ["counterparties"],
    passport: ["passport"],
    compare: ["scores", "income", "loan", "balances"],
    overview: ["scores", "income", "balances"],
  };
  const read: Record<FactKind, () => Promise<{ fact: unknown; sources: Source[] }>> = {
    scores: () => scoresFact(reader, address),
    factors: () => factorsFact(reader, address),
    income: () => incomeFact(reader, address),
    loan: () => loanFact(reader, address),
    balances: () => balancesFact(reader, address),
    activity: () => activityFact(reader, address, r.period!),
    largestTransfers: () => largestTransfersFact(reader, address, { direction: r.direction, period: r.period }),
    counterparties: () => counterpartiesFact(reader, address),
    passport: () => passportFact(reader, address),
  };
  const wanted = kinds[r.intent] ?? [];
  const results = await Promise.all(wanted.map((k) => read[k]()));
  const facts: Record<string, unknown> = {};
  for (const [i, k] of wanted.entries()) facts[k] = results[i]!.fact;
  return { facts: facts as Facts, sources: results.flatMap((x) => x.sources) };
}

const dedupe = (sources: Source[]) => [...new Map(sources.map((s) => [s.name, s])).values()];

/** The deterministic engine: a question in, an answer written from facts out. */
export async function answerDeterministic(
  reader: WalletReader,
  q: ChatQuestion,
  resolved?: ResolvedQuestion,
): Promise<ChatOutcome> {
  const r = resolved ?? (await resolveQuestion(reader, q));
  const data: ChatData = { period: r.period, wallets: {} };
  const sources: Source[] = [];
  const gathered = await Promise.all(r.wallets.map((w) => gather(reader, w, r)));
  r.wallets.forEach((w, i) => {
    data.wallets[w] = gathered[i]!.facts;
    sources.push(...gathered[i]!.sources);
  });
  const answer =
    r.intent === "compare"
      ? say.compareText(r.wallets[0]!, gathered[0]!.facts, r.wallets[1]!, gathered[1]!.facts)
      : (await Promise.all(r.wallets.map((w, i) => phrase(reader, r, w, gathered[i]!.facts)))).join("\n\n");
  // Every wallet answered about was assessed: the latest assessment dates the answer.
  const latest = (await reader.latest())!;
  return {
    answer,
    intent: r.intent,
    wallets: r.wallets,
    data,
    sources: dedupe(sources),
    modelVersion: latest.result.modelVersion,
    dataAsOf: { block: latest.asOf.block, time: iso(latest.asOf.timestamp) },
    state: { wallets: r.wallets, intent: r.intent, period: r.period },
  };
}

async function phrase(reader: WalletReader, r: ResolvedQuestion, w: Address, f: Facts): Promise<string> {
  switch (r.intent) {
    case "scores":
      return say.scoresText(w, f);
    case "score_factors":
      return say.factorsText(w, f);
    case "income":
      return say.incomeText(w, f);
    case "loan":
      return say.loanText(w, f);
    case "balances":
      return say.balancesText(w, f);
    case "activity":
      return say.activityText(w, f, r.periodDefaulted);
    case "largest_transfers":
      return say.largestTransfersText(w, f);
    case "counterparties":
      return say.counterpartiesText(w, f);
    case "passport":
      return say.passportText(w, f);
    default: {
      const a = await reader.assess(w);
      return say.walletSummary(a.facts.address, a.result);
    }
  }
}
