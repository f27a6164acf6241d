import type { PaymentRow, PaymentStatus } from "../store/schema.ts";

/**
 * A payment's life, in one place: its states, the events that move it, and what must hold in each
 * state. Pure (no I/O): the ledgers check every write against TRANSITIONS (the memory ledger calls
 * `transition`; the SQL ledger's WHERE guards are generated from the same table), and the diagram in
 * docs/architecture.md is drawn from it (`mermaid`).
 *
 * `waived` means one thing only: a free read. The call was answered without charge (the payer paid
 * for this subject recently) under an authorization that is kept unspent and never submitted. It
 * follows only the claim that owns the row (pending). A sign-in grant is not a ledger state: it
 * writes no payment row (its billing says `waived` because nothing is charged, nothing more).
 */

/** No row: before a claim, and after a claim is taken back. */
export const ABSENT = "absent";
export type Place = PaymentStatus | typeof ABSENT;

/** The row fields the machine reads (guards and invariants). */
export type LifecycleRow = Pick<
  PaymentRow,
  | "status"
  | "deferred"
  | "responseStatus"
  | "responseBody"
  | "updatedAt"
  | "repaidBy"
  | "transaction"
  | "failure"
  | "settledAt"
>;

/**
 * A claim older than this with no outcome belongs to a request that died (a crashed replica): it may
 * be claimed again. Verification runs first, so a payment that did settle is refused, not taken twice.
 */
export const ABANDONED_AFTER_MS = 120_000;

/**
 * What a claim taken again (reclaimed, takenOver) starts without: its earlier attempt's settlement
 * and answer. A stale answer kept would make a deferred row that fails this time a debt (isDebt)
 * for a call never answered.
 */
export const CLEARED_ON_RECLAIM = {
  failure: null,
  transaction: null,
  settler: null,
  settlerNonce: null,
  responseStatus: null,
  responseType: null,
  responseBody: null,
  attempts: 0,
} as const;

/**
 * A queued row is given up this long before its authorization's validBefore: a transaction sent
 * later might not be mined in time. Given up means `expired`, counted in stats: the service's loss.
 */
export const EXPIRY_MARGIN_SECONDS = 30;
/**
 * A call is deferred only if its authorization stays valid this long past EXPIRY_MARGIN_SECONDS
 * (the worker's time to settle it); a shorter one settles first. Otherwise a payer signing
 * authorizations about to lapse would be answered and its rows expired, never charged, without limit.
 */
export const SETTLE_WINDOW_SECONDS = 30;

/** Whether an authorization valid until `validBefore` leaves the settlement worker time to settle it. */
export const settlesInTime = (validBefore: bigint, nowSeconds = Math.floor(Date.now() / 1000)) =>
  validBefore >= BigInt(nowSeconds + EXPIRY_MARGIN_SECONDS + SETTLE_WINDOW_SECONDS);

/**
 * A settled payment whose answer was never stored is answered again by one request at a time: that
 * request marks the row with this response status (HTTP 102 Processing) and no body until it stores
 * the answer. A mark older than RERUN_LEASE_MS belongs to a request that died: another may take over.
 */
export const RERUN_MARK = 102;
export const RERUN_LEASE_MS = 30_000;

/** Claimed and not settled: spoken for in the payer's balance and, when deferred, the service's exposure. */
export const UNSETTLED: readonly PaymentStatus[] = ["pending", "queued", "settling"];
/** Failed by the payer's doing once answered on credit: a debt (isDebt) when deferred, answered and not repaid. */
const DEBT_STATUSES: readonly PaymentStatus[] = ["failed", "used_elsewhere"];
/** Rows still open (the partial indexes' list, schema.ts OPEN_STATUSES): unsettled, or possibly a debt. */
export const OPEN: readonly PaymentStatus[] = [...UNSETTLED, ...DEBT_STATUSES];
/** Outcome not known, or not final: what the chain may still decide (resolve). */
const UNRESOLVED: readonly PaymentStatus[] = ["pending", "settling", "failed"];

/**
 * Conditions on a row beyond its status. Named, so that each ledger writes each once: the memory
 * ledger as the predicates below, the SQL ledger as WHERE clauses (ledger/sql/rules.ts).
 */
export type Condition = "abandoned" | "deferred" | "queueable" | "unanswered" | "rerunFree" | "rerunHeld" | "debt";

export const isAbandoned = (row: Pick<PaymentRow, "status" | "updatedAt">, now = Date.now()) =>
  row.status === "pending" && now - row.updatedAt.getTime() > ABANDONED_AFTER_MS;

/** Whether another request is producing this settled payment's answer again right now. */
export const isRerunning = (
  row: Pick<PaymentRow, "status" | "responseStatus" | "responseBody" | "updatedAt">,
  now = Date.now(),
) =>
  row.status === "settled" &&
  row.responseBody === null &&
  row.responseStatus === RERUN_MARK &&
  now - row.updatedAt.getTime() <= RERUN_LEASE_MS;

/** An answer given on credit whose settlement failed by the payer's doing (transfer failed, authorization cancelled), not paid again. */
export const isDebt = (row: Pick<LifecycleRow, "status" | "deferred" | "repaidBy" | "responseBody">) =>
  row.deferred && row.repaidBy === null && DEBT_STATUSES.includes(row.status) && row.responseBody !== null;

/** An answer given on credit, its money not arrived yet: the service's exposure with the debts. */
const isOpenDeferred = (row: Pick<LifecycleRow, "status" | "deferred" | "repaidBy">) =>
  row.deferred && row.repaidBy === null && UNSETTLED.includes(row.status);

export const CONDITIONS: Record<Condition, (row: LifecycleRow, now: number) => boolean> = {
  abandoned: (row, now) => now - row.updatedAt.getTime() > ABANDONED_AFTER_MS,
  deferred: (row) => row.deferred,
  queueable: (row) => row.deferred && row.responseBody !== null,
  unanswered: (row) => row.responseBody === null,
  rerunFree: (row, now) =>
    row.responseBody === null && (row.responseStatus === null || now - row.updatedAt.getTime() > RERUN_LEASE_MS),
  rerunHeld: (row) => row.responseBody === null && row.responseStatus === RERUN_MARK,
  debt: (row) => isDebt(row),
};

export type Transition = {
  from: readonly Place[];
  /** "stay": the status does not change (a flag or a field of the row does). */
  to: Place | "stay";
  when?: Condition;
  /** What the event is, for the diagram's reader and the errors. */
  means: string;
};

/** Every allowed transition: event -> from -> to. A write not listed here is refused. */
export const TRANSITIONS = {
  claimed: { from: [ABSENT], to: "pending", means: "a request claims the payment (its row is inserted)" },
  reclaimed: {
    from: ["failed"],
    to: "pending",
    means: "the same request and signature claim again a payment never charged",
  },
  takenOver: {
    from: ["pending"],
    to: "pending",
    when: "abandoned",
    means: "a claim whose request died is claimed again",
  },
  unclaimed: { from: ["pending"], to: ABSENT, means: "a first claim refused after all (funds, nonce) is taken back" },
  referenced: { from: ["pending"], to: "stay", means: "what the call makes that a failure must undo is recorded" },
  queued: {
    from: ["pending"],
    to: "queued",
    when: "deferred",
    means: "answered on credit, within the caps: the worker settles it",
  },
  creditRefused: { from: ["pending"], to: "stay", means: "past a cap: no longer deferred, settled before the answer" },
  waived: {
    from: ["pending"],
    to: "waived",
    means: "answered free (a free read): the authorization is never submitted",
  },
  settling: {
    from: ["pending", "settling"],
    to: "settling",
    means: "the settlement (and the answer it buys) is recorded before it is sent",
  },
  taken: { from: ["queued"], to: "settling", means: "the settlement worker takes a queued row" },
  touched: { from: ["settling"], to: "stay", means: "looked at, outcome still unknown" },
  settled: { from: ["pending", "settling", "failed"], to: "settled", means: "the money moved" },
  failed: { from: ["pending", "settling"], to: "failed", means: "nothing was charged" },
  requeued: {
    from: ["settling", "failed"],
    to: "queued",
    when: "queueable",
    means: "a deferred settlement that did not go through for a reason of ours goes back in the queue",
  },
  expired: {
    from: ["queued"],
    to: "expired",
    means: "a queued authorization runs out before it could be sent (the service's loss)",
  },
  resolvedSettled: { from: UNRESOLVED, to: "settled", means: "the chain says the money moved" },
  resolvedFailed: { from: UNRESOLVED, to: "failed", means: "the chain says nothing was charged" },
  resolvedExpired: { from: UNRESOLVED, to: "expired", means: "the chain says the authorization expired unused" },
  resolvedUsedElsewhere: {
    from: UNRESOLVED,
    to: "used_elsewhere",
    means: "the chain says the nonce was used or cancelled without paying us",
  },
  rerunClaimed: {
    from: ["settled"],
    to: "stay",
    when: "rerunFree",
    means: "one request takes the lease to produce a lost answer again",
  },
  rerunReleased: {
    from: ["settled"],
    to: "stay",
    when: "rerunHeld",
    means: "the lost answer could not be produced: the lease is given back",
  },
  answered: { from: ["settled"], to: "stay", when: "unanswered", means: "the answer produced again is stored" },
  repaid: { from: DEBT_STATUSES, to: "stay", when: "debt", means: "a later settled payment covers the debt" },
  idReleased: {
    from: ["failed", "expired", "used_elsewhere"],
    to: "stay",
    means: "the payment-identifier passes on to a new payment",
  },
} as const satisfies Record<string, Transition>;

export type PaymentEvent = keyof typeof TRANSITIONS;
export const EVENTS = Object.keys(TRANSITIONS) as PaymentEvent[];
/** Every place a row can be in, the table's order of first appearance. */
export const PLACES: readonly Place[] = [
  ABSENT,
  "pending",
  "queued",
  "settling",
  "settled",
  "waived",
  "failed",
  "expired",
  "used_elsewhere",
];

/** The resolution events, by the status the chain decided. */
export const RESOLVED = {
  settled: "resolvedSettled",
  failed: "resolvedFailed",
  expired: "resolvedExpired",
  used_elsewhere: "resolvedUsedElsewhere",
} as const satisfies Record<string, PaymentEvent>;

/** The statuses `event` may leave (ABSENT excluded: an insert has no WHERE). */
export const fromStatuses = (event: PaymentEvent): PaymentStatus[] =>
  (TRANSITIONS[event].from as readonly Place[]).filter((p): p is PaymentStatus => p !== ABSENT);

export class TransitionError extends Error {
  constructor(
    readonly event: PaymentEvent,
    readonly from: Place,
    reason: string,
  ) {
    super(`payment transition refused: ${event} from ${from} (${reason})`);
    this.name = "TransitionError";
  }
}

const placeOf = (row: LifecycleRow | undefined): Place => row?.status ?? ABSENT;

/** Why `event` may not happen to `row` now, or null when it may. */
function refusal(row: LifecycleRow | undefined, event: PaymentEvent, now = Date.now()): string | null {
  const t: Transition = TRANSITIONS[event];
  const from = placeOf(row);
  if (!t.from.includes(from)) return `allowed only from ${t.from.join(", ")}`;
  if (t.when && row && !CONDITIONS[t.when](row, now)) return `the row is not ${t.when}`;
  return null;
}

export const allows = (row: LifecycleRow | undefined, event: PaymentEvent, now = Date.now()) =>
  refusal(row, event, now) === null;

/** The place `row` moves to on `event`; throws TransitionError on a transition the table does not allow. */
export function transition(row: LifecycleRow | undefined, event: PaymentEvent, now = Date.now()): Place {
  const refused = refusal(row, event, now);
  if (refused !== null) throw new TransitionError(event, placeOf(row), refused);
  const t: Transition = TRANSITIONS[event];
  return t.to === "stay" ? placeOf(row) : t.to;
}

type Invariant = { name: string; holds: (row: LifecycleRow) => boolean };

const answerStored = (row: LifecycleRow) => row.responseBody !== null;
/** Settled, its answer lost (a crash between settlement and record): produced again by a rerun, free or leased. */
const awaitingRerun = (row: LifecycleRow) =>
  row.status === "settled" && !answerStored(row) && (row.responseStatus === null || row.responseStatus === RERUN_MARK);

/** What holds of a row in each state, whatever the path that led there. */
const INVARIANTS: readonly Invariant[] = [
  {
    name: "settled, queued or waived implies an answer stored, except settled awaiting its rerun",
    holds: (row) => !["settled", "queued", "waived"].includes(row.status) || answerStored(row) || awaitingRerun(row),
  },
  {
    name: "queued implies deferred, an answer stored and no transaction yet",
    holds: (row) => row.status !== "queued" || (row.deferred && answerStored(row) && row.transaction === null),
  },
  {
    name: "charged (settled) implies its transaction and time, and answered or retriable",
    holds: (row) =>
      row.status !== "settled" ||
      (row.transaction !== null && row.settledAt !== null && (answerStored(row) || awaitingRerun(row))),
  },
  { name: "pending implies no transaction yet", holds: (row) => row.status !== "pending" || row.transaction === null },
  {
    name: "waived (a free read) implies no transaction: the authorization stays unspent",
    holds: (row) => row.status !== "waived" || row.transaction === null,
  },
  {
    name: "a rerun lease only on a settled payment without an answer",
    holds: (row) => !(row.responseStatus === RERUN_MARK && !answerStored(row)) || row.status === "settled",
  },
  {
    name: "failed, expired and used_elsewhere carry their reason",
    holds: (row) => !["failed", "expired", "used_elsewhere"].includes(row.status) || row.failure !== null,
  },
  { name: "a repaid debt had an answer", holds: (row) => row.repaidBy === null || answerStored(row) },
];

/** The invariants `row` breaks (none: an empty list). */
export const broken = (row: LifecycleRow): string[] => INVARIANTS.filter((i) => !i.holds(row)).map((i) => i.name);

/**
 * Exposure of deferred settlement over a set of rows: what was answered on credit and not paid yet
 * (open deferred rows and debts), per payer and in all. The caps bound both (queuedWithinCaps).
 */
export function exposure(rows: Iterable<Pick<PaymentRow, "payer" | "amount"> & LifecycleRow>): {
  perPayer: Map<string, bigint>;
  total: bigint;
} {
  const perPayer = new Map<string, bigint>();
  let total = 0n;
  for (const row of rows) {
    if (!isOpenDeferred(row) && !isDebt(row)) continue;
    const amount = BigInt(row.amount);
    perPayer.set(row.payer, (perPayer.get(row.payer) ?? 0n) + amount);
    total += amount;
  }
  return { perPayer, total };
}

/** The machine as a Mermaid state diagram: one edge per (from, to), labelled with its events. */
export function mermaid(): string {
  const node = (p: Place) => (p === ABSENT ? "[*]" : p);
  const edges = new Map<string, PaymentEvent[]>();
  for (const event of EVENTS) {
    const t: Transition = TRANSITIONS[event];
    for (const from of t.from) {
      const to = t.to === "stay" ? from : t.to;
      const edge = `${node(from)} --> ${node(to)}`;
      edges.set(edge, [...(edges.get(edge) ?? []), event]);
    }
  }
  return ["stateDiagram-v2", ...[...edges].map(([edge, events]) => `  ${edge}: ${events.join(", ")}`)].join("\n");
}
