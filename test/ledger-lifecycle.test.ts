import { PgDialect } from "drizzle-orm/pg-core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MemoryLedger } from "../api/payments/ledger/memory.ts";
import { CONDITION_SQL, guard, literals, target } from "../api/payments/ledger/sql/rules.ts";
import {
  ABSENT,
  allows,
  broken,
  CONDITIONS,
  type Condition,
  EVENTS,
  fromStatuses,
  type LifecycleRow,
  mermaid,
  OPEN,
  PLACES,
  type Place,
  RERUN_LEASE_MS,
  RERUN_MARK,
  TRANSITIONS,
  type Transition,
  TransitionError,
  transition,
} from "../api/payments/lifecycle.ts";
import { OPEN_STATUSES, PAYMENT_STATUSES, type PaymentStatus } from "../api/store/schema.ts";

const NOW = Date.UTC(2026, 10, 24);
/** A row in `status` that meets `when` (or, with `meets` false, fails it). */
function rowIn(status: PaymentStatus, when?: Condition, meets = true): LifecycleRow {
  const row: LifecycleRow = {
    status,
    deferred: false,
    responseStatus: null,
    responseBody: null,
    updatedAt: new Date(NOW),
    repaidBy: null,
    transaction: null,
    failure: null,
    settledAt: null,
  };
  const set: Record<Condition, () => Partial<LifecycleRow>> = {
    abandoned: () => ({ updatedAt: new Date(meets ? NOW - 10 * 60_000 : NOW) }),
    deferred: () => ({ deferred: meets }),
    queueable: () => ({ deferred: true, responseBody: meets ? "{}" : null }),
    unanswered: () => ({ responseBody: meets ? null : "{}" }),
    rerunFree: () => ({ responseStatus: RERUN_MARK, updatedAt: new Date(meets ? NOW - RERUN_LEASE_MS - 1 : NOW) }),
    rerunHeld: () => ({ responseStatus: meets ? RERUN_MARK : null }),
    debt: () => ({ deferred: true, responseBody: "{}", repaidBy: meets ? null : "0x01" }),
  };
  return { ...row, ...(when ? set[when]() : {}) };
}

describe("payment lifecycle", () => {
  it("lists every status of the store, and only those, as places", () => {
    expect(new Set(PLACES)).toEqual(new Set([ABSENT, ...PAYMENT_STATUSES]));
    for (const event of EVENTS) {
      const t: Transition = TRANSITIONS[event];
      for (const p of [...t.from, ...(t.to === "stay" ? [] : [t.to])]) expect(PLACES, `${event}: ${p}`).toContain(p);
    }
  });

  it("allows each event from its listed statuses, when its condition holds, and refuses it from every other", () => {
    let allowed = 0;
    for (const event of EVENTS) {
      const t: Transition = TRANSITIONS[event];
      for (const place of PLACES) {
        const row = place === ABSENT ? undefined : rowIn(place, t.when);
        if (t.from.includes(place)) {
          const to: Place = t.to === "stay" ? place : t.to;
          expect(transition(row, event, NOW), `${event} from ${place}`).toBe(to);
          allowed++;
          if (t.when && row)
            expect(
              () => transition(rowIn(place as PaymentStatus, t.when, false), event, NOW),
              `${event} from ${place}, not ${t.when}`,
            ).toThrow(TransitionError);
        } else {
          expect(() => transition(row, event, NOW), `${event} from ${place}`).toThrow(TransitionError);
          expect(allows(row, event, NOW)).toBe(false);
        }
      }
    }
    expect(allowed).toBe(EVENTS.reduce((n, e) => n + TRANSITIONS[e].from.length, 0));
  });

  it("names the event and the place in a refusal", () => {
    expect(() => transition(rowIn("settled"), "waived", NOW)).toThrow(
      "payment transition refused: waived from settled (allowed only from pending)",
    );
    expect(() => transition(undefined, "failed", NOW)).toThrow("failed from absent");
  });

  it("keeps every state's invariants after any sequence of ledger writes (the memory ledger checks them on each)", async () => {
    const key = (n: number) =>
      ({
        token: "0x00000000000000000000000000000000000000a1",
        payer: "0x00000000000000000000000000000000000000aa",
        nonce: `0x0${n}`,
      }) as const;
    const entry = (n: number, sig = "s") => ({
      ...key(n),
      amount: 10n,
      route: "GET /x",
      subject: null,
      fingerprint: "f",
      signatureHash: sig,
      encoding: "spec",
      validBefore: BigInt(100 + n),
    });
    const answer = { status: 200, type: "application/json", body: "{}" };
    const n = fc.integer({ min: 0, max: 2 });
    const step = fc.oneof(
      fc.record({ op: fc.constant("claim"), n, deferred: fc.boolean(), sig: fc.constantFrom("s", "t") }),
      fc.record({
        op: fc.constantFrom(
          "failed",
          "waived",
          "touch",
          "settled",
          "claimRerun",
          "releaseRerun",
          "answered",
          "reference",
          "unclaim",
          "resolveSettled",
          "resolveFailed",
          "resolveExpired",
          "resolveUsed",
        ),
        n,
      }),
      fc.record({ op: fc.constant("settling"), n, answered: fc.boolean(), tx: fc.boolean() }),
      fc.record({ op: fc.constant("queue"), n, cap: fc.constantFrom(10n, 20n, 1000n) }),
      fc.record({ op: fc.constant("requeue"), n, attempted: fc.boolean() }),
      fc.record({ op: fc.constantFrom("take", "expire", "repay", "age") }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 30 }), async (steps) => {
        const ledger = new MemoryLedger();
        for (const s of steps) {
          const k = "n" in s ? key(s.n) : key(0);
          switch (s.op) {
            case "claim":
              if (s.deferred) await ledger.claimDeferred(entry(s.n, s.sig), { signature: "0xsig", validAfter: 0n });
              else await ledger.claim(entry(s.n, s.sig));
              break;
            case "failed":
              await ledger.failed(k, "refused");
              break;
            case "waived":
              await ledger.waived(k, answer);
              break;
            case "touch":
              await ledger.touch(k);
              break;
            case "settled":
              await ledger.settled(k, "0xt");
              break;
            case "claimRerun":
              await ledger.claimRerun(k);
              break;
            case "releaseRerun":
              await ledger.releaseRerun(k);
              break;
            case "answered":
              await ledger.answered(k, answer);
              break;
            case "reference":
              await ledger.reference(k, "REP-1");
              break;
            case "unclaim":
              await ledger.unclaim(k, "s");
              break;
            case "resolveSettled":
              await ledger.resolve(k, { status: "settled", transaction: "0xt" });
              break;
            case "resolveFailed":
              await ledger.resolve(k, { status: "failed", failure: "reverted", transaction: "0xt" });
              break;
            case "resolveExpired":
              await ledger.resolve(k, { status: "expired", failure: "expired" });
              break;
            case "resolveUsed":
              await ledger.resolve(k, { status: "used_elsewhere", failure: "cancelled" });
              break;
            case "settling":
              await ledger.settling(k, s.answered ? answer : null, s.tx ? { transaction: "0xt" } : {});
              break;
            case "queue":
              await ledger.queuedWithinCaps(k, answer, { perPayer: s.cap, total: s.cap });
              break;
            case "requeue":
              await ledger.requeue(k, s.attempted);
              break;
            case "take":
              await ledger.takeQueued(2, ["0x00000000000000000000000000000000000000a1"]);
              break;
            case "expire":
              await ledger.expireQueued(101, 0);
              break;
            case "repay":
              await ledger.repay(k.payer, key(0), 10n ** 18n);
              break;
            case "age":
              ledger.age(5 * 60_000);
              break;
          }
          for (const row of ledger.snapshot()) expect(broken(row)).toEqual([]);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("the SQL ledger's guards are the table's: statuses, conditions and the status written", () => {
    const dialect = new PgDialect();
    for (const event of EVENTS) {
      const t: Transition = TRANSITIONS[event];
      const from = fromStatuses(event);
      if (from.length === 0) continue;
      const rendered = dialect.sqlToQuery(guard(event, NOW));
      const lists = [...rendered.sql.matchAll(/"status" in \(([^)]*)\)/g)].map((m) => m[1]);
      expect(lists, event).toEqual([literals(from)]);
      if (t.when) {
        const condition = dialect.sqlToQuery(CONDITION_SQL[t.when](NOW));
        expect(rendered.sql, event).toContain(condition.sql);
      }
      if (t.to !== "stay" && t.to !== ABSENT) expect(target(event)).toBe(t.to);
    }
    // Not generated: the literal list the partial indexes were created with (a migration), and the insert (no WHERE).
    expect(OPEN_STATUSES).toBe(literals(OPEN));
    expect(TRANSITIONS.claimed.from).toEqual([ABSENT]);
    expect(target("claimed")).toBe("pending");
    expect(Object.keys(CONDITION_SQL).sort()).toEqual(Object.keys(CONDITIONS).sort());
  });

  it("draws the machine as a Mermaid state diagram, every transition on it", () => {
    const text = mermaid();
    expect(text.split("\n")[0]).toBe("stateDiagram-v2");
    for (const event of EVENTS) {
      const t: Transition = TRANSITIONS[event];
      for (const from of t.from) {
        const node = (p: Place) => (p === ABSENT ? "[*]" : p);
        const to = t.to === "stay" ? from : t.to;
        const line = text.split("\n").find((l) => l.startsWith(`  ${node(from)} --> ${node(to)}: `));
        expect(line?.split(": ")[1]?.split(", "), `${event} from ${from}`).toContain(event);
      }
    }
  });
});
