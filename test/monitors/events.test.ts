import { describe, expect, it } from "vitest";
import { changesFor, type Watch } from "../../api/monitors/events.ts";
import { MONITOR_EVENT_TYPES } from "../../api/monitors/schema.ts";
import type { Snapshot } from "../../api/monitors/snapshot.ts";

// The rules that turn two screens of a watched wallet into events (docs/monitoring.md).

const base: Snapshot = {
  recommendation: "approve",
  reputation: 80,
  financialHealth: 75,
  drainedUsd: 0,
  monthlyIncomeUsd: 3_000,
  sanctions: "not_listed",
  listedCounterparties: [],
  passport: { reportId: "REP-1", status: "confirmed" },
};
const ALL = MONITOR_EVENT_TYPES;
const watch = (over: Partial<Watch> = {}): Watch => ({ events: ALL, scoreBelow: null, worseThan: null, ...over });
const types = (after: Partial<Snapshot>, w = watch(), before: Snapshot = base) =>
  changesFor(before, { ...base, ...after }, w).map((c) => c.type);

describe("monitor events", () => {
  it("emits nothing on the first screen, and nothing when nothing changed", () => {
    expect(changesFor(null, base, watch())).toEqual([]);
    expect(types({})).toEqual([]);
  });

  it("tells each change that matters as its own event, with before and after", () => {
    expect(types({ recommendation: "review" })).toEqual(["screen.recommendation_changed"]);
    expect(types({ drainedUsd: 1_500 })).toEqual(["drain.detected"]);
    expect(types({ monthlyIncomeUsd: 1_500 })).toEqual(["income.dropped"]);
    expect(types({ monthlyIncomeUsd: 1_600 })).toEqual([]);
    expect(types({ passport: { reportId: "REP-1", status: "revoked" } })).toEqual(["passport.revoked"]);
    expect(types({ passport: { reportId: "REP-1", status: "expired" } })).toEqual(["passport.expired"]);
    expect(types({ sanctions: "listed", recommendation: "decline" })).toEqual([
      "screen.recommendation_changed",
      "sanctions.listed",
    ]);
    expect(types({}, watch(), { ...base, sanctions: "listed" })).toEqual(["sanctions.delisted"]);
    expect(types({ sanctions: "inconclusive" })).toEqual([]);
    const listed = changesFor(base, { ...base, listedCounterparties: ["0xaa", "0xbb"] }, watch());
    expect(listed).toEqual([
      {
        type: "counterparty.sanctioned",
        before: { listedCounterparties: [] },
        after: { listedCounterparties: ["0xaa", "0xbb"], newly: ["0xaa", "0xbb"] },
      },
    ]);
    // A revocation already told is not told again; a new passport's revocation is.
    const revoked = { ...base, passport: { reportId: "REP-1", status: "revoked" as const } };
    expect(types({ passport: { reportId: "REP-1", status: "revoked" } }, watch(), revoked)).toEqual([]);
    expect(types({ passport: { reportId: "REP-2", status: "revoked" } }, watch(), revoked)).toEqual([
      "passport.revoked",
    ]);
  });

  it("applies the monitor's thresholds and its choice of events", () => {
    const worse = watch({ worseThan: "approve" });
    expect(types({ recommendation: "review" }, worse)).toEqual(["screen.recommendation_changed"]);
    expect(types({ recommendation: "approve" }, worse, { ...base, recommendation: "review" })).toEqual([]);
    expect(types({ recommendation: "review" }, watch({ worseThan: "review" }))).toEqual([]);

    const score = watch({ scoreBelow: 60 });
    expect(changesFor(base, { ...base, reputation: 55 }, score)).toEqual([
      {
        type: "score.threshold_crossed",
        before: { reputation: 80 },
        after: { reputation: 55, threshold: 60, direction: "below" },
      },
    ]);
    expect(types({ reputation: 65 }, score, { ...base, reputation: 55 })).toEqual(["score.threshold_crossed"]);
    expect(types({ reputation: 70 }, score)).toEqual([]);
    expect(types({ reputation: 10 })).toEqual([]);

    expect(types({ drainedUsd: 9, sanctions: "listed" }, watch({ events: ["sanctions.listed"] }))).toEqual([
      "sanctions.listed",
    ]);
  });
});
