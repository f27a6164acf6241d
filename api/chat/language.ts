import { type Address, addressProblem } from "../../config/addresses.ts";
import { ApiError } from "../../shared/errors.ts";

/**
 * The deterministic engine's reading of a question: the wallets it names, its intent (keyword
 * scoring over a normalised message, tolerant of typos and word order) and the period it asks
 * about. No model: the same message always reads the same way.
 */

export const INTENTS = [
  "help",
  "scores",
  "score_factors",
  "income",
  "loan",
  "balances",
  "activity",
  "largest_transfers",
  "counterparties",
  "compare",
  "passport",
  "overview",
  "unknown",
] as const;
export type Intent = (typeof INTENTS)[number];

/** What each answerable intent covers, for the help answer and the unknown-question reply. */
export const CAPABILITIES: Record<Exclude<Intent, "unknown">, string> = {
  scores: "its scores and whether it is trustworthy, with the rationale",
  score_factors: "why a score is low, and what would raise it (each factor with its points)",
  income: "its income and whether it is recurring (payers, cadence)",
  loan: "its loan capacity and the confidence behind it",
  balances: "its balances",
  activity: 'its activity in a period ("last 3 months", "since March", "in October", "last 30 days")',
  largest_transfers: "its largest transfers over the last year",
  counterparties: "its top counterparties",
  compare: "a comparison of two wallets",
  passport: "its passport (the attestation published on chain)",
  overview: "a summary of the wallet",
  help: "what this service can answer",
};

// --- addresses ---------------------------------------------------------------------------------

/**
 * Wallets named in the message, lowercase, in order of appearance, without repeats. Something
 * written like an address (0x and hex digits) that is not 0x plus exactly 40 hex characters, or
 * mixed case with a wrong EIP-55 checksum, is a 400 `invalid_address`: the question is about a
 * wallet we cannot name.
 */
export function addressesIn(message: string): Address[] {
  const found: Address[] = [];
  for (const match of message.matchAll(/0x[0-9a-fA-F]*/g)) {
    const token = match[0];
    const next = message[match.index + token.length];
    if (token.length === 2 && !(next && /\w/.test(next))) continue; // a bare "0x" is not an address
    if (token.length !== 42 || (next && /\w/.test(next))) {
      const shown = message.slice(match.index, match.index + Math.min(50, token.length + 8)).split(/\s/)[0];
      throw new ApiError(
        400,
        "invalid_address",
        `"${shown}" in the message is not a wallet address (0x followed by 40 hex characters).`,
      );
    }
    const problem = addressProblem(token);
    if (problem) throw new ApiError(400, "invalid_address", `"${token}" in the message ${problem}.`);
    const address = token.toLowerCase() as Address;
    if (!found.includes(address)) found.push(address);
  }
  return found;
}

/** Addresses in the message, or none when it names something that is not an address (for payment hooks, which must not throw). */
export function addressesInOrNone(message: unknown): Address[] {
  if (typeof message !== "string") return [];
  try {
    return addressesIn(message);
  } catch {
    return [];
  }
}

// --- normalisation and fuzzy matching ----------------------------------------------------------

/** Lowercase words and numbers, addresses removed, apostrophes dropped ("what's" -> "whats"). */
export function normalise(message: string): string[] {
  return message
    .toLowerCase()
    .replace(/0x[0-9a-f]*/g, " ")
    .replace(/['’]/g, "")
    .replace(/[^a-z0-9]+/g, " ")
    .trim()
    .split(" ")
    .filter(Boolean);
}

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions), cut off above `max`. */
function editDistance(a: string, b: string, max = 2): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    let best = Infinity;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
      best = Math.min(best, v);
    }
    if (best > max) return max + 1;
  }
  return d[a.length]![b.length]!;
}

/** Whether a word of the message is the keyword, a longer form of it, or a typo of either. */
export function wordMatches(word: string, keyword: string): boolean {
  if (word === keyword) return true;
  if (keyword.length < 4 || word.length < 3) return false;
  if (word.startsWith(keyword)) return true;
  const allowed = keyword.length >= 8 ? 2 : 1;
  if (editDistance(word, keyword, allowed) <= allowed) return true;
  // A typo inside a longer form: "trustworhtiness" against "trustworth".
  return word.length > keyword.length + 1 && editDistance(word.slice(0, keyword.length), keyword, 1) <= 1;
}

// --- intents -----------------------------------------------------------------------------------

type Keywords = { words: Record<string, number>; phrases?: Record<string, number> };

/** Keyword weights per intent: the intent with the highest total wins (ties: the order of INTENTS). */
const KEYWORDS: Record<Exclude<Intent, "unknown">, Keywords> = {
  help: {
    words: { help: 4, capabilities: 3, commands: 3, questions: 1.5, features: 2 },
    phrases: {
      "what can you": 4,
      "what can i ask": 4,
      "what do you know": 3,
      "what can this": 3,
      "how does this work": 3,
      "what do you do": 3,
    },
  },
  scores: {
    words: {
      score: 2,
      scores: 2,
      scoring: 2,
      rating: 2,
      rated: 2,
      trust: 3,
      trustworthy: 3,
      trusted: 3,
      reliable: 2.5,
      creditworthy: 3,
      reputation: 2,
      health: 2,
      recommendation: 2.5,
      recommend: 2.5,
      verdict: 2.5,
      approve: 2.5,
      approved: 2.5,
      decline: 2,
      risky: 2,
      risk: 1.5,
      safe: 2,
      legit: 2,
      rationale: 1.5,
      assessment: 1.5,
    },
    phrases: { "should i": 1, "good borrower": 2 },
  },
  score_factors: {
    words: {
      why: 2,
      low: 2,
      improve: 3.5,
      raise: 3,
      increase: 2.5,
      boost: 3,
      higher: 2,
      factors: 3.5,
      factor: 3.5,
      points: 2,
      hurt: 2,
      hurting: 2,
      driving: 2,
      explain: 1.5,
      lower: 1,
      bad: 1,
      poor: 1,
      weak: 1.5,
    },
    phrases: { "what would": 2, "how can": 1.5, "better score": 2, "pulls down": 2, "held back": 2 },
  },
  income: {
    words: {
      income: 3.5,
      earn: 3,
      earns: 3,
      earnings: 3,
      salary: 3.5,
      salaries: 3.5,
      payroll: 3.5,
      wage: 3.5,
      wages: 3.5,
      revenue: 3,
      recurring: 2.5,
      regular: 1,
      payer: 2.5,
      payers: 2.5,
      employer: 3,
      cadence: 2.5,
      paycheck: 3.5,
      paid: 1.5,
    },
    phrases: { "get paid": 2, "gets paid": 2, "make a month": 2, "make per month": 2, "does it make": 2 },
  },
  loan: {
    words: {
      loan: 3.5,
      loans: 3.5,
      lend: 3.5,
      lending: 3.5,
      borrow: 3.5,
      borrowing: 3,
      capacity: 3,
      credit: 2,
      afford: 2.5,
      limit: 1.5,
      confidence: 1.5,
      repay: 2.5,
    },
    phrases: { "how much can": 2, "how much could": 2, "how much should": 1.5 },
  },
  balances: {
    words: {
      balance: 3.5,
      balances: 3.5,
      hold: 2.5,
      holds: 2.5,
      holding: 2.5,
      holdings: 3,
      funds: 2,
      usdt: 1,
      usdc: 1,
      worth: 1.5,
      stablecoins: 1,
      wallet: 0.2,
    },
    phrases: { "how much money": 2, "how much does it have": 2.5, "how much is in": 2.5, "how rich": 2 },
  },
  activity: {
    words: {
      activity: 3,
      active: 2,
      transactions: 1.5,
      volume: 2.5,
      flow: 2,
      flows: 2,
      inflow: 2.5,
      inflows: 2.5,
      outflow: 2.5,
      outflows: 2.5,
      spent: 2.5,
      spend: 2.5,
      spending: 2.5,
      received: 2,
      receive: 2,
      sent: 2,
      moved: 2,
      happened: 1.5,
      did: 0.5,
    },
    phrases: { "how much did": 1.5, "what happened": 1.5 },
  },
  largest_transfers: {
    words: {
      largest: 3.5,
      biggest: 3.5,
      big: 2,
      huge: 2,
      transfers: 1.5,
      transfer: 1.5,
      payments: 1,
      maximum: 2,
      max: 1.5,
      top: 1,
    },
    phrases: { "top transfers": 2, "top payments": 2, "large transfers": 2 },
  },
  counterparties: {
    words: {
      counterparty: 4,
      counterparties: 4,
      partners: 2.5,
      contacts: 2.5,
      interacts: 2.5,
      interact: 2.5,
      who: 1.5,
      whom: 2,
      peers: 2,
    },
    phrases: {
      "trade with": 2.5,
      "deal with": 2,
      "send money to": 2,
      "sends money to": 2,
      "does business with": 2.5,
      "top counterparties": 2,
    },
  },
  compare: {
    words: {
      compare: 4.5,
      comparison: 4.5,
      compared: 4.5,
      vs: 4.5,
      versus: 4.5,
      difference: 3,
      differ: 3,
      which: 1,
      against: 1.5,
    },
    phrases: { "side by side": 3, "which one": 2, "which is better": 3 },
  },
  passport: {
    words: {
      passport: 4.5,
      passports: 4.5,
      attestation: 4.5,
      attested: 4,
      attest: 4,
      certificate: 3,
      certified: 3,
      report: 2,
      published: 1.5,
      onchain: 1,
    },
  },
  overview: {
    words: {
      summary: 3.5,
      summarize: 3.5,
      summarise: 3.5,
      overview: 3.5,
      describe: 3,
      profile: 2.5,
      about: 1,
      everything: 2,
    },
    phrases: { "tell me about": 3, "who is": 1.5, "what do you know about": 3, "look at": 1.5, "check this": 1.5 },
  },
};

/** Words that carry no intent: a message of only these (and addresses) is a bare mention of a wallet. */
const FILLER = new Set(
  "a an the and or of for to in on at is are was were be it its this that these those what whats how hows does do did can could would should will i me my we our you your please pls tell show give about wallet address account one other them they their there here with from by".split(
    " ",
  ),
);

export type IntentReading = { intent: Intent; scores: Partial<Record<Intent, number>>; bare: boolean };

/** Scores each intent on the message; `bare` when nothing but filler words remain (a wallet named alone, "and this one?"). */
export function readIntent(message: string, walletsNamed: number): IntentReading {
  const words = normalise(message);
  const text = ` ${words.join(" ")} `;
  const scores: Partial<Record<Intent, number>> = {};
  for (const [intent, { words: keywords, phrases = {} }] of Object.entries(KEYWORDS) as [Intent, Keywords][]) {
    let total = 0;
    for (const [keyword, weight] of Object.entries(keywords))
      if (words.some((w) => wordMatches(w, keyword))) total += weight;
    for (const [phrase, weight] of Object.entries(phrases)) if (text.includes(` ${phrase} `)) total += weight;
    if (total > 0) scores[intent] = total;
  }
  // Two wallets named together ask for a comparison unless something else is clearly asked.
  if (walletsNamed >= 2) scores.compare = (scores.compare ?? 0) + 2;
  if (readPeriod(message, Date.now() / 1000) && (scores.activity ?? 0) > 0) scores.activity! += 1.5;
  let intent: Intent = "unknown";
  let best = 1.5; // below this, nothing was recognised
  for (const candidate of INTENTS) {
    const score = scores[candidate] ?? 0;
    if (score > best) [intent, best] = [candidate, score];
  }
  const bare = words.every((w) => FILLER.has(w) || /^\d+$/.test(w));
  return { intent, scores, bare };
}

// --- periods -----------------------------------------------------------------------------------

/** A period asked about: calendar months (inclusive, "YYYY-MM") or the last `days` days. */
export type Period =
  | { kind: "months"; from: string; to: string; label: string }
  | { kind: "days"; days: number; label: string };

const MONTHS = [
  "january",
  "february",
  "march",
  "april",
  "may",
  "june",
  "july",
  "august",
  "september",
  "october",
  "november",
  "december",
];
const MONTH_ABBREVIATIONS: Record<string, number> = {
  jan: 0,
  feb: 1,
  mar: 2,
  apr: 3,
  jun: 5,
  jul: 6,
  aug: 7,
  sep: 8,
  sept: 8,
  oct: 9,
  nov: 10,
  dec: 11,
};
const NUMBER_WORDS: Record<string, number> = {
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
  eleven: 11,
  twelve: 12,
  a: 1,
};
const PERIOD_WORDS = new Set([
  "in",
  "since",
  "from",
  "during",
  "until",
  "till",
  "to",
  "between",
  "of",
  "and",
  "through",
  "thru",
]);

/** The month (0-11) a word names, typos allowed for full names ("octobr", "febuary"). "may" only after a period word. */
function monthOfWord(word: string, previous: string | undefined): number | null {
  if (word === "may") return previous && PERIOD_WORDS.has(previous) ? 4 : null;
  if (word in MONTH_ABBREVIATIONS) return MONTH_ABBREVIATIONS[word]!;
  const exact = MONTHS.indexOf(word);
  if (exact >= 0) return exact;
  if (word.length < 5) return null;
  const close = MONTHS.findIndex(
    (m) => m.length >= 5 && m[0] === word[0] && editDistance(word, m, m.length >= 8 ? 2 : 1) <= (m.length >= 8 ? 2 : 1),
  );
  return close >= 0 ? close : null;
}

const key = (year: number, month: number) => `${year}-${String(month + 1).padStart(2, "0")}`;
const shift = (year: number, month: number, by: number): [number, number] => {
  const d = new Date(Date.UTC(year, month + by, 1));
  return [d.getUTCFullYear(), d.getUTCMonth()];
};

/**
 * The period a message asks about, relative to `asOf` (the indexed head's time, so the same data
 * gives the same answer), or null. Months without a year are the latest such month up to now.
 */
export function readPeriod(message: string, asOf: number): Period | null {
  const words = normalise(message.replace(/\b(\d{4})-(\d{2})\b/g, " m$1x$2 "));
  const now = new Date(asOf * 1000);
  const [year, month] = [now.getUTCFullYear(), now.getUTCMonth()];
  const current = key(year, month);
  // Months named in the message, with the year written after them, if any.
  const named: { at: number; year: number; month: number }[] = [];
  words.forEach((w, i) => {
    const iso = /^m(\d{4})x(\d{2})$/.exec(w);
    if (iso) {
      const m = Number(iso[2]) - 1;
      if (m >= 0 && m < 12) named.push({ at: i, year: Number(iso[1]), month: m });
      return;
    }
    const m = monthOfWord(w, words[i - 1]);
    if (m === null) return;
    const y = /^\d{4}$/.test(words[i + 1] ?? "") ? Number(words[i + 1]) : m <= month ? year : year - 1;
    named.push({ at: i, year: y, month: m });
  });

  const text = words.join(" ");
  const count = (w: string | undefined) =>
    w === undefined ? undefined : /^\d+$/.test(w) ? Number(w) : NUMBER_WORDS[w];
  const last = /\b(?:last|past|previous|recent)\s+(\w+)\s+(day|days|week|weeks|month|months|year|years)\b/.exec(text);
  if (last && count(last[1]) !== undefined && count(last[1])! > 0) {
    const n = Math.min(count(last[1])!, 1000);
    const unit = last[2]!.replace(/s$/, "");
    if (unit === "day") return { kind: "days", days: n, label: `the last ${n} day${n === 1 ? "" : "s"}` };
    if (unit === "week")
      return { kind: "days", days: 7 * n, label: `the last ${n} week${n === 1 ? "" : "s"} (${7 * n} days)` };
    const months = unit === "year" ? 12 * n : n;
    const [fy, fm] = shift(year, month, -(months - 1));
    return {
      kind: "months",
      from: key(fy, fm),
      to: current,
      label: `the last ${months} month${months === 1 ? "" : "s"} (${key(fy, fm)} to ${current}, this month to date)`,
    };
  }
  if (/\b(?:last|past|previous) (?:30 days)\b/.test(text)) return { kind: "days", days: 30, label: "the last 30 days" };
  if (/\b(?:last|past|previous) week\b/.test(text)) return { kind: "days", days: 7, label: "the last 7 days" };
  if (/\b(?:last|previous) month\b/.test(text)) {
    const [py, pm] = shift(year, month, -1);
    return { kind: "months", from: key(py, pm), to: key(py, pm), label: `last month (${key(py, pm)})` };
  }
  if (/\bthis month\b/.test(text))
    return { kind: "months", from: current, to: current, label: `this month (${current}, to date)` };
  if (/\bthis year\b/.test(text))
    return { kind: "months", from: key(year, 0), to: current, label: `this year (${key(year, 0)} to ${current})` };
  if (/\blast year\b/.test(text))
    return { kind: "months", from: key(year - 1, 0), to: key(year - 1, 11), label: `last year (${year - 1})` };

  const first = named[0];
  if (!first) return null;
  const before = words[first.at - 1];
  const second = named[1];
  if (second && (before === "from" || before === "between")) {
    const [a, b] = [key(first.year, first.month), key(second.year, second.month)].sort();
    return { kind: "months", from: a!, to: b!, label: `${a} to ${b}` };
  }
  const start = key(first.year, first.month);
  if (before === "since" || before === "from" || before === "after")
    return { kind: "months", from: start, to: current, label: `since ${start} (${start} to ${current})` };
  return { kind: "months", from: start, to: start, label: start };
}
