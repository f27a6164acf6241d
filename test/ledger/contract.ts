import { beforeEach, describe, expect, it } from "vitest";
import {
  isRerunning,
  keyId,
  type Ledger,
  type NewPayment,
  type PaymentKey,
  RERUN_MARK,
} from "../../api/payments/ledger/ledger.ts";
import { ABANDONED_AFTER_MS, fromStatuses, type PaymentEvent, RERUN_LEASE_MS } from "../../api/payments/lifecycle.ts";
import { PAYMENT_STATUSES, type PaymentStatus } from "../../api/store/schema.ts";
import type { Address } from "../../config/addresses.ts";

/** A fresh, empty ledger, and a way to let time pass for its rows (abandoned claims, leases, stale rows). */
export type LedgerHarness = { ledger: Ledger; elapse(ms: number): Promise<void> };

const [usdt, usdc] = [
  "0x00000000000000000000000000000000000000a1",
  "0x00000000000000000000000000000000000000a2",
] as const;
const [a, b] = ["0x00000000000000000000000000000000000000aa", "0x00000000000000000000000000000000000000bb"] as const;
const base = {
  amount: 10_000n,
  route: "POST /api/lender/screen",
  subject: null,
  fingerprint: "f",
  signatureHash: "s",
  encoding: "spec",
  validBefore: 2n ** 40n,
};
const auth = { signature: "0x01", validAfter: 0n };
const answer = { status: 200, type: "application/json", body: '{"ok":true}' };
const roomy = { perPayer: 10n ** 18n, total: 10n ** 18n };

const entry = (nonce: string, more: Partial<NewPayment> = {}): NewPayment => ({
  ...base,
  token: usdt,
  payer: a,
  nonce,
  ...more,
});
const keyOf = (e: NewPayment): PaymentKey => ({ token: e.token, payer: e.payer, nonce: e.nonce });

/**
 * What every Ledger does (the memory one and the SQL one on PGlite and Postgres): one suite, so
 * that a unit test of the core on the memory ledger says what the service does.
 */
export function ledgerContract(name: string, makeLedger: () => Promise<LedgerHarness>): void {
  describe(`Ledger contract: ${name}`, () => {
    let ledger: Ledger;
    let elapse: (ms: number) => Promise<void>;
    beforeEach(async () => {
      ({ ledger, elapse } = await makeLedger());
    });

    /** A queued row a worker took and recorded transaction 0xt on (signed, about to be sent). */
    const sentRow = async (nonce: string): Promise<PaymentKey> => {
      const key = await rowIn("queued", nonce);
      await ledger.takeQueued(1, [usdt]);
      await ledger.settling(key, null, {
        transaction: "0xt",
        settler: "0xr",
        settlerNonce: 3,
        rawTransaction: "0xraw",
      });
      return key;
    };

    /** A row brought to `status` through the ledger's own writes. */
    const rowIn = async (status: PaymentStatus, nonce: string, more: Partial<NewPayment> = {}): Promise<PaymentKey> => {
      const e = entry(nonce, more);
      const key = keyOf(e);
      if (status === "queued") {
        expect(await ledger.claimDeferred(e, auth)).toBe(true);
        expect(await ledger.queuedWithinCaps(key, answer, roomy)).toBe(true);
        return key;
      }
      expect(await ledger.claim(e)).toBe(true);
      if (status === "settling" || status === "settled") expect(await ledger.settling(key, answer)).toBe(true);
      if (status === "settled") await ledger.settled(key, "0xt1");
      if (status === "waived") await ledger.waived(key, answer);
      if (status === "failed") await ledger.failed(key, "refused");
      if (status === "expired" || status === "used_elsewhere")
        expect(await ledger.resolve(key, { status, failure: "chain" })).toBe(true);
      expect((await ledger.find(key))?.status).toBe(status);
      return key;
    };

    it("claims a payment once per key, across concurrent claims", async () => {
      const claims = await Promise.all([1, 2, 3, 4, 5].map(() => ledger.claim(entry("0x01"))));
      expect(claims.filter(Boolean)).toHaveLength(1);
      const firsts = await Promise.all([1, 2, 3].map(() => ledger.claimFirst(entry("0x02"), auth)));
      expect(firsts.filter((f) => f !== undefined)).toHaveLength(1);
      expect(await ledger.claimFirst(entry("0x01"), auth)).toBeUndefined();
      expect(await ledger.claimDeferred(entry("0x02"), auth)).toBe(false);
    });

    it("claims again a failed payment for the same request and signature only, and an abandoned one", async () => {
      const key = await rowIn("failed", "0x01");
      expect(await ledger.claim(entry("0x01", { signatureHash: "other" }))).toBe(false);
      expect(await ledger.claim(entry("0x01", { fingerprint: "other" }))).toBe(false);
      expect(await ledger.claimDeferred(entry("0x01"), auth)).toBe(true);
      expect(await ledger.find(key)).toMatchObject({
        status: "pending",
        failure: null,
        transaction: null,
        deferred: true,
        signature: "0x01",
      });
      // A claim taken again starts without its earlier attempt's answer (stored by a settlement that failed).
      const tried = keyOf(entry("0x03"));
      expect(await ledger.claim(entry("0x03"))).toBe(true);
      expect(await ledger.settling(tried, answer)).toBe(true);
      await ledger.failed(tried, "refused");
      expect((await ledger.find(tried))?.responseBody).toBe(answer.body);
      expect(await ledger.claimDeferred(entry("0x03"), auth)).toBe(true);
      expect(await ledger.find(tried)).toMatchObject({
        status: "pending",
        responseStatus: null,
        responseType: null,
        responseBody: null,
        attempts: 0,
      });
      // Pending and alive: another request waits for it.
      expect(await ledger.claim(entry("0x01"))).toBe(false);
      await elapse(ABANDONED_AFTER_MS + 5_000);
      expect(await ledger.claim(entry("0x01", { signatureHash: "other" }))).toBe(false);
      expect(await ledger.claim(entry("0x01"))).toBe(true);
      expect(await ledger.find(key)).toMatchObject({ status: "pending", deferred: false, signature: null });
      for (const status of ["queued", "settling", "settled", "waived", "expired", "used_elsewhere"] as const) {
        const other = await rowIn(status, `0x1${status}`);
        expect(await ledger.claim(entry(other.nonce))).toBe(false);
        expect((await ledger.find(other))?.status).toBe(status);
      }
    });

    it("holds one payment-identifier per payer, passed on from a payment never charged", async () => {
      expect(await ledger.claim(entry("0x01", { paymentId: "id-1" }))).toBe(true);
      expect(await ledger.claim(entry("0x02", { paymentId: "id-1" }))).toBe(false);
      expect(await ledger.findByPaymentId(a, "id-1")).toMatchObject({ nonce: "0x01" });
      expect(await ledger.claim(entry("0x03", { paymentId: "id-1", payer: b }))).toBe(true);
      await ledger.failed(keyOf(entry("0x01")), "refused");
      expect(await ledger.claim(entry("0x02", { paymentId: "id-1" }))).toBe(true);
      expect(await ledger.findByPaymentId(a, "id-1")).toMatchObject({ nonce: "0x02" });
      expect((await ledger.find(keyOf(entry("0x01"))))?.paymentId).toBeNull();
      // A settled payment keeps its identifier.
      await ledger.settling(keyOf(entry("0x02")), answer);
      await ledger.settled(keyOf(entry("0x02")), "0xt");
      expect(await ledger.claim(entry("0x04", { paymentId: "id-1" }))).toBe(false);
      expect(await ledger.findByPaymentId(a, "id-1")).toMatchObject({ nonce: "0x02" });
    });

    it("keeps the payment-identifier of a failed payment claimed again", async () => {
      const key = await rowIn("failed", "0x01", { paymentId: "id-1" });
      expect(await ledger.claim(entry("0x01", { paymentId: "id-1" }))).toBe(true);
      expect(await ledger.find(key)).toMatchObject({ status: "pending", paymentId: "id-1" });
      expect(await ledger.findByPaymentId(a, "id-1")).toMatchObject({ nonce: "0x01" });
    });

    it("sums what a payer has open: unsettled in the token, owed in any", async () => {
      await rowIn("pending", "0x01");
      await rowIn("queued", "0x02");
      await rowIn("settling", "0x03");
      await rowIn("settled", "0x04");
      await rowIn("failed", "0x05");
      await rowIn("waived", "0x06");
      await rowIn("pending", "0x07", { token: usdc, amount: 7n });
      await rowIn("pending", "0x08", { payer: b, amount: 3n });
      expect(await ledger.openFor(a, usdt)).toEqual({ unsettled: 30_000n, owed: 0n });
      expect(await ledger.openFor(a, usdc)).toEqual({ unsettled: 7n, owed: 0n });
      const { row, open } = await ledger.lookup({ token: usdt, payer: b, nonce: "0x08" });
      expect([row, open]).toEqual([
        await ledger.find({ token: usdt, payer: b, nonce: "0x08" }),
        { unsettled: 3n, owed: 0n },
      ]);
      expect(await ledger.lookup({ token: usdt, payer: a, nonce: "0x99" })).toEqual({
        row: undefined,
        open: { unsettled: 30_000n, owed: 0n },
      });
      // A debt: answered on credit, its settlement failed by the payer's doing.
      const debt = await rowIn("queued", "0x09", { token: usdc, amount: 500n });
      await ledger.takeQueued(10, [usdt, usdc]);
      await ledger.failed(debt, "the transfer cannot go through");
      expect(await ledger.openFor(a, usdt)).toEqual({ unsettled: 30_000n, owed: 500n });
    });

    it("queues within the caps exactly, and settles first past them (no longer deferred)", async () => {
      const one = keyOf(entry("0x01"));
      await ledger.claimDeferred(entry("0x01"), auth);
      expect(await ledger.queuedWithinCaps(one, answer, { perPayer: 10_000n, total: 10_000n })).toBe(true);
      expect(await ledger.find(one)).toMatchObject({
        status: "queued",
        deferred: true,
        responseBody: answer.body,
        responseStatus: 200,
      });
      const two = keyOf(entry("0x02"));
      await ledger.claimDeferred(entry("0x02"), auth);
      expect(await ledger.queuedWithinCaps(two, answer, { perPayer: 19_999n, total: 10n ** 9n })).toBe(false);
      expect(await ledger.find(two)).toMatchObject({
        status: "pending",
        deferred: false,
        signature: null,
        validAfter: null,
        responseBody: null,
      });
      const three = keyOf(entry("0x03"));
      await ledger.claimDeferred(entry("0x03"), auth);
      expect(await ledger.queuedWithinCaps(three, answer, { perPayer: 20_000n, total: 20_000n })).toBe(true);
      // The total counts every payer.
      const other = keyOf(entry("0x04", { payer: b }));
      await ledger.claimDeferred(entry("0x04", { payer: b }), auth);
      expect(await ledger.queuedWithinCaps(other, answer, { perPayer: 10n ** 9n, total: 29_999n })).toBe(false);
      const fourth = keyOf(entry("0x05", { payer: b }));
      await ledger.claimDeferred(entry("0x05", { payer: b }), auth);
      expect(await ledger.queuedWithinCaps(fourth, answer, { perPayer: 10n ** 9n, total: 30_000n })).toBe(true);
      // Not deferred, or not pending: never queued.
      const plain = await rowIn("pending", "0x06");
      expect(await ledger.queuedWithinCaps(plain, answer, roomy)).toBe(false);
      expect((await ledger.find(plain))?.status).toBe("pending");
      expect(await ledger.queuedWithinCaps(one, answer, roomy)).toBe(false);
    });

    it("counts debts against the caps until they are repaid", async () => {
      const debt = await rowIn("queued", "0x01");
      await ledger.takeQueued(1, [usdt]);
      await ledger.failed(debt, "cancelled");
      expect((await ledger.openFor(a, usdt)).owed).toBe(10_000n);
      await ledger.claimDeferred(entry("0x02"), auth);
      expect(
        await ledger.queuedWithinCaps(keyOf(entry("0x02")), answer, { perPayer: 19_999n, total: roomy.total }),
      ).toBe(false);
      const payer = await rowIn("settled", "0x03");
      await ledger.repay(a, payer, 9_999n);
      expect((await ledger.find(debt))?.repaidBy, "a debt is repaid whole or not at all").toBeNull();
      await ledger.repay(a, payer, 10_000n);
      expect(await ledger.find(debt)).toMatchObject({ status: "failed", repaidBy: "0x03" });
      expect(await ledger.openFor(a, usdt)).toEqual({ unsettled: 10_000n, owed: 0n });
      await ledger.claimDeferred(entry("0x04"), auth);
      expect(
        await ledger.queuedWithinCaps(keyOf(entry("0x04")), answer, { perPayer: 10_000n, total: roomy.total }),
      ).toBe(true);
      // Only debts are repaid: a failed payment never answered on credit is not one.
      const plain = await rowIn("failed", "0x05");
      await ledger.repay(a, payer, 10n ** 18n);
      expect((await ledger.find(plain))?.repaidBy).toBeNull();
      // Oldest first, and no more than the payment covered: a debt that arose later stays owed.
      const debts = [await rowIn("queued", "0x06", { payer: b }), await rowIn("queued", "0x07", { payer: b })];
      await ledger.takeQueued(10, [usdt]);
      for (const d of debts) await ledger.failed(d, "cancelled");
      expect((await ledger.openFor(b, usdt)).owed).toBe(20_000n);
      const covering = await rowIn("settled", "0x08", { payer: b });
      await ledger.repay(b, covering, 10_000n);
      expect((await ledger.find(debts[0]!))?.repaidBy).toBe("0x08");
      expect((await ledger.find(debts[1]!))?.repaidBy).toBeNull();
      expect((await ledger.openFor(b, usdt)).owed).toBe(10_000n);
    });

    it("hands each queued row to one taker, soonest validBefore first", async () => {
      for (const [i, before] of [50n, 10n, 40n, 20n, 30n].entries())
        await rowIn("queued", `0x0${i}`, { validBefore: before });
      const [first] = await ledger.takeQueued(1, [usdt]);
      expect(first).toMatchObject({ status: "settling", validBefore: "10" });
      const takes = await Promise.all([2, 2, 2].map((n) => ledger.takeQueued(n, [usdt])));
      const nonces = takes.flat().map((r) => r.nonce);
      expect(new Set(nonces).size).toBe(nonces.length);
      expect(nonces.sort()).toEqual(["0x00", "0x02", "0x03", "0x04"]);
      expect(takes.flat().every((r) => r.status === "settling" && r.responseBody === answer.body)).toBe(true);
      expect(await ledger.takeQueued(5, [usdt])).toEqual([]);
    });

    it("takes only rows in the tokens asked for (another replica settles the rest)", async () => {
      await rowIn("queued", "0x01", { token: usdc });
      const other = await rowIn("queued", "0x02");
      expect(await ledger.takeQueued(5, [usdt])).toMatchObject([{ nonce: "0x02", token: usdt }]);
      expect(await ledger.find(keyOf(entry("0x01", { token: usdc })))).toMatchObject({ status: "queued" });
      expect(await ledger.find(other)).toMatchObject({ status: "settling" });
      expect(await ledger.takeQueued(5, [usdt, usdc])).toMatchObject([{ nonce: "0x01", token: usdc }]);
    });

    it("puts a deferred settlement back in the queue, counting the attempts made", async () => {
      const key = await sentRow("0x01");
      // Decided from a read made before this transaction was recorded: the row keeps it.
      await ledger.requeue(key, false, { transaction: null });
      expect(await ledger.find(key)).toMatchObject({ status: "settling", transaction: "0xt" });
      await ledger.requeue(key, true, { transaction: "0xt" });
      expect(await ledger.find(key)).toMatchObject({
        status: "queued",
        transaction: null,
        settler: null,
        settlerNonce: null,
        attempts: 1,
      });
      // The signed transaction stays on record: it may still be mined (the reconciler sends it again).
      expect(await ledger.signedTransaction("0xt")).toBe("0xraw");
      await ledger.takeQueued(1, [usdt]);
      await ledger.requeue(key, false);
      expect(await ledger.find(key)).toMatchObject({ status: "queued", attempts: 1 });
      const plain = await rowIn("settling", "0x02");
      await ledger.requeue(plain, true);
      expect(await ledger.find(plain)).toMatchObject({ status: "settling", attempts: 0 });
    });

    it("fails a taken deferred row only while its transaction is still the one read", async () => {
      const key = await sentRow("0x01");
      // A worker that read the row before this transaction was recorded: the row keeps it.
      await ledger.failed(key, "refused", undefined, { transaction: null });
      expect(await ledger.find(key)).toMatchObject({ status: "settling", transaction: "0xt", failure: null });
      await ledger.failed(key, "refused", undefined, { transaction: "0xt" });
      expect(await ledger.find(key)).toMatchObject({ status: "failed", transaction: null, failure: "refused" });
    });

    it("expires queued rows whose authorization runs out within the margin", async () => {
      const soon = await rowIn("queued", "0x01", { validBefore: 1_000n });
      const later = await rowIn("queued", "0x02", { validBefore: 2_000n });
      const pending = await rowIn("pending", "0x03", { validBefore: 1n });
      expect(await ledger.expireQueued(900, 100)).toBe(0);
      expect(await ledger.expireQueued(901, 100)).toBe(1);
      expect(await ledger.find(soon)).toMatchObject({ status: "expired", signature: null });
      expect((await ledger.find(soon))?.failure).toMatch(/validBefore/);
      expect((await ledger.find(later))?.status).toBe("queued");
      expect((await ledger.find(pending))?.status).toBe("pending");
      expect((await ledger.outcomeCounts()).deferredExpired).toBe(1);
    });

    it("records a signed transaction once for all the payments it settles, and not for a row no longer the caller's", async () => {
      const signed = { transaction: "0xtb", settler: "0xr", settlerNonce: 9, rawTransaction: "0xrawb" };
      const keys = await Promise.all(["0x01", "0x02", "0x03"].map((n) => rowIn("pending", n)));
      expect(await Promise.all(keys.map((k) => ledger.settling(k, answer, signed)))).toEqual([true, true, true]);
      expect(await ledger.signedTransaction("0xtb")).toBe("0xrawb");
      const done = await rowIn("settled", "0x04");
      expect(await ledger.settling(done, null, { ...signed, transaction: "0xtc", rawTransaction: "0xrawc" })).toBe(
        false,
      );
      expect(await ledger.signedTransaction("0xtc")).toBeUndefined();
    });

    it("records settlement: the answer with the transaction, kept when not given again", async () => {
      const key = await rowIn("pending", "0x01");
      expect(
        await ledger.settling(key, answer, {
          transaction: "0xt1",
          settler: "0xr",
          settlerNonce: 7,
          rawTransaction: "0xraw",
        }),
      ).toBe(true);
      expect(await ledger.settling(key, null, { transaction: "0xt2" })).toBe(true);
      // Each signed transaction once, by hash; a remote facilitator's (no bytes) is not one.
      expect(await ledger.signedTransaction("0xt1")).toBe("0xraw");
      expect(await ledger.signedTransaction("0xt2")).toBeUndefined();
      expect(await ledger.find(key)).toMatchObject({
        status: "settling",
        transaction: "0xt2",
        settler: null,
        responseBody: answer.body,
      });
      await ledger.touch(key);
      await ledger.settled(key, "0xt2");
      expect(await ledger.find(key)).toMatchObject({
        status: "settled",
        transaction: "0xt2",
        failure: null,
        signature: null,
      });
      expect((await ledger.find(key))?.settledAt).toBeInstanceOf(Date);
      // A failed row the chain shows settled after all.
      const late = await rowIn("failed", "0x02");
      await ledger.settled(late, "0xt3");
      expect((await ledger.find(late))?.status).toBe("settled");
    });

    it("resolves only rows whose outcome is unknown", async () => {
      for (const [nonce, status] of [
        ["0x01", "pending"],
        ["0x02", "settling"],
        ["0x03", "failed"],
      ] as const) {
        const key = await rowIn(status, nonce);
        expect(await ledger.resolve(key, { status: "settled", transaction: "0xt", note: "by another" })).toBe(true);
        expect(await ledger.find(key)).toMatchObject({ status: "settled", transaction: "0xt", failure: "by another" });
        expect((await ledger.find(key))?.reconciledAt).toBeInstanceOf(Date);
      }
      const kept = await rowIn("settling", "0x04");
      await ledger.settling(kept, null, { transaction: "0xkept" });
      expect(await ledger.resolve(kept, { status: "failed", failure: "reverted" })).toBe(true);
      expect(await ledger.find(kept)).toMatchObject({ status: "failed", failure: "reverted", transaction: "0xkept" });
      for (const status of ["queued", "settled", "waived", "expired", "used_elsewhere"] as const) {
        const key = await rowIn(status, `0x1${status}`);
        const before = await ledger.find(key);
        expect(await ledger.resolve(key, { status: "failed", failure: "late" })).toBe(false);
        expect(await ledger.find(key)).toEqual(before);
      }
      expect(await ledger.resolve(keyOf(entry("0x99")), { status: "expired", failure: "none" })).toBe(false);
      // Four here, and the expired and used_elsewhere rows (resolved to get there).
      expect((await ledger.outcomeCounts()).reconciled).toBe(6);
    });

    it("lends the rerun of a lost answer to one request at a time, until it answers or its lease lapses", async () => {
      const key = await rowIn("pending", "0x01");
      await ledger.settling(key, null);
      await ledger.settled(key, "0xt");
      expect(await ledger.find(key)).toMatchObject({ status: "settled", responseBody: null, responseStatus: null });
      const claims = await Promise.all([1, 2, 3].map(() => ledger.claimRerun(key)));
      expect(claims.filter(Boolean)).toHaveLength(1);
      expect(isRerunning((await ledger.find(key))!)).toBe(true);
      expect((await ledger.find(key))?.responseStatus).toBe(RERUN_MARK);
      await ledger.releaseRerun(key);
      expect((await ledger.find(key))?.responseStatus).toBeNull();
      expect(await ledger.claimRerun(key)).toBe(true);
      await elapse(RERUN_LEASE_MS + 5_000);
      expect(isRerunning((await ledger.find(key))!)).toBe(false);
      expect(await ledger.claimRerun(key)).toBe(true);
      await ledger.answered(key, answer);
      expect(await ledger.find(key)).toMatchObject({
        status: "settled",
        responseStatus: 200,
        responseBody: answer.body,
      });
      expect(await ledger.claimRerun(key)).toBe(false);
      await ledger.answered(key, { ...answer, body: "again" });
      expect((await ledger.find(key))?.responseBody).toBe(answer.body);
      await ledger.releaseRerun(key);
      expect((await ledger.find(key))?.responseStatus).toBe(200);
    });

    it("takes back a first claim only while pending, with its signature", async () => {
      await ledger.claimFirst(entry("0x01"), auth);
      await ledger.unclaim(keyOf(entry("0x01")), "other");
      expect(await ledger.find(keyOf(entry("0x01")))).toBeDefined();
      await ledger.unclaim(keyOf(entry("0x01")), "s");
      expect(await ledger.find(keyOf(entry("0x01")))).toBeUndefined();
      const settled = await rowIn("settled", "0x02");
      await ledger.unclaim(settled, "s");
      expect((await ledger.find(settled))?.status).toBe("settled");
    });

    it("spends a sign-in nonce once", async () => {
      const later = new Date(Date.now() + 60_000);
      const spent = await Promise.all([1, 2, 3].map(() => ledger.spendSignInNonce("n-1", a, later)));
      expect(spent.filter(Boolean)).toHaveLength(1);
      expect(await ledger.spendSignInNonce("n-1", b, later)).toBe(false);
      expect(await ledger.spendSignInNonce("n-2", a, later)).toBe(true);
    });

    it("counts outcomes, what was served, stale rows and recent payments", async () => {
      await ledger.ping();
      const subject = "0x00000000000000000000000000000000000000cc" as Address;
      await rowIn("pending", "0x01");
      await rowIn("settling", "0x02");
      await rowIn("settled", "0x03", { subject });
      await rowIn("settled", "0x04", { payer: b, amount: 5n });
      await rowIn("waived", "0x05");
      await rowIn("failed", "0x06");
      await rowIn("queued", "0x07", { subject, route: "GET /other" });
      const counts = await ledger.outcomeCounts();
      expect(Object.fromEntries(PAYMENT_STATUSES.map((s) => [s, counts[s]]))).toEqual({
        pending: 1,
        queued: 1,
        settling: 1,
        settled: 2,
        failed: 1,
        waived: 1,
        expired: 0,
        used_elsewhere: 0,
      });
      expect([counts.reconciled, counts.deferredExpired, counts.owedUnits]).toEqual([0, 0, "0"]);
      const served = await ledger.servedTotals();
      expect(served.payers).toBe(2);
      expect(served.rows.sort((x, y) => x.status.localeCompare(y.status))).toEqual([
        { route: base.route, token: usdt, status: "settled", calls: 2, amount: 10_005n },
        { route: base.route, token: usdt, status: "waived", calls: 1, amount: 10_000n },
      ]);
      expect(await ledger.paidFor(a, subject, [base.route], new Date(Date.now() - 60_000))).toBe(true);
      expect(await ledger.paidFor(a, subject, ["GET /other"], new Date(Date.now() - 60_000))).toBe(true);
      expect(await ledger.paidFor(a, subject, ["GET /none"], new Date(Date.now() - 60_000))).toBe(false);
      expect(await ledger.paidFor(b, subject, [base.route], new Date(Date.now() - 60_000))).toBe(false);
      expect((await ledger.stalePending()).count).toBe(0);
      expect(await ledger.unresolved(60_000)).toEqual([]);
      await elapse(6 * 60_000);
      expect(await ledger.paidFor(a, subject, [base.route], new Date(Date.now() - 60_000))).toBe(false);
      const stale = await ledger.stalePending();
      expect(stale.count).toBe(2);
      expect(stale.oldest).toBeInstanceOf(Date);
      expect((await ledger.unresolved(60_000)).map((r) => r.nonce).sort()).toEqual(["0x01", "0x02"]);
      expect(await ledger.unresolved(60_000, 1)).toHaveLength(1);
    });

    it("records what a claimed call made, while it is claimed", async () => {
      const key = await rowIn("pending", "0x01");
      await ledger.reference(key, "REP-1");
      expect((await ledger.find(key))?.reference).toBe("REP-1");
      const settled = await rowIn("settled", "0x02");
      await ledger.reference(settled, "REP-2");
      expect((await ledger.find(settled))?.reference).toBeNull();
    });

    /** Each write and the event it is: from every other status it changes nothing. */
    const writes: [PaymentEvent, (key: PaymentKey) => Promise<unknown>][] = [
      ["unclaimed", (key) => ledger.unclaim(key, "s")],
      ["referenced", (key) => ledger.reference(key, "REP-x")],
      ["queued", (key) => ledger.queuedWithinCaps(key, answer, roomy)],
      ["waived", (key) => ledger.waived(key, { ...answer, body: "free" })],
      ["settling", (key) => ledger.settling(key, { ...answer, body: "settling" }, { transaction: "0xnew" })],
      ["touched", (key) => ledger.touch(key)],
      ["settled", (key) => ledger.settled(key, "0xnew")],
      ["failed", (key) => ledger.failed(key, "late", "0xnew")],
      ["requeued", (key) => ledger.requeue(key, true)],
      ["resolvedSettled", (key) => ledger.resolve(key, { status: "settled", transaction: "0xnew" })],
      ["resolvedUsedElsewhere", (key) => ledger.resolve(key, { status: "used_elsewhere", failure: "late" })],
      ["rerunClaimed", (key) => ledger.claimRerun(key)],
      ["rerunReleased", (key) => ledger.releaseRerun(key)],
      ["answered", (key) => ledger.answered(key, { ...answer, body: "again" })],
    ];
    for (const [event, write] of writes) {
      it(`refuses ${event} from every status the lifecycle does not list`, async () => {
        const refused = PAYMENT_STATUSES.filter((s) => !fromStatuses(event).includes(s));
        for (const status of refused) {
          const key = await rowIn(status, `0x${status}`);
          const before = await ledger.find(key);
          const result = await write(key);
          if (typeof result === "boolean") expect(result, `${event} from ${status}`).toBe(false);
          expect(await ledger.find(key), `${event} from ${status}`).toEqual(before);
        }
      });
    }

    describe("prepaid credit", () => {
      const owner = a;
      let n = 0;
      /** A purchase of `amount` by `owner`, its payment brought to `status`; its lot expiring in `days`. */
      const purchase = async (amount: bigint, status: PaymentStatus = "settled", days = 365) => {
        const key = await rowIn(status, `0xc${++n}`, { amount });
        await ledger.credit.addLot(key, amount, new Date(Date.now() + days * 86_400_000));
        return key;
      };
      const spend = (id: string, amount: bigint, paymentId: string | null = null) => ({
        id,
        payer: { owner },
        route: "POST /api/lender/screen",
        subject: null,
        fingerprint: "f",
        paymentId,
        amount,
      });
      const held = async (id: string, amount: bigint, paymentId: string | null = null) => {
        const hold = await ledger.credit.hold(spend(id, amount, paymentId));
        if (!("held" in hold))
          throw new Error(`not held: ${JSON.stringify(hold, (_, v) => (typeof v === "bigint" ? `${v}` : v))}`);
        return hold;
      };

      it("spends a lot only once its payment settled, and not after it expires", async () => {
        await purchase(50_000n, "settling");
        await purchase(70_000n, "failed");
        expect(await ledger.credit.balance(owner)).toBe(0n);
        expect(await ledger.credit.hold(spend("s1", 10_000n))).toEqual({ short: { balance: 0n, leased: 0n } });
        await purchase(30_000n, "settled", 1);
        expect(await ledger.credit.balance(owner)).toBe(30_000n);
        expect(await ledger.credit.balance(b)).toBe(0n);
        await elapse(2 * 86_400_000);
        expect(await ledger.credit.balance(owner)).toBe(0n);
        const lots = await ledger.credit.lots(owner);
        expect(lots.map((l) => [l.amount, l.status])).toEqual(
          expect.arrayContaining([
            ["50000", "settling"],
            ["70000", "failed"],
            ["30000", "settled"],
          ]),
        );
      });

      it("takes a price from the lots soonest to expire first, across lots, or nothing when short", async () => {
        const late = await purchase(30_000n, "settled", 300);
        const soon = await purchase(15_000n, "settled", 10);
        const first = await held("s1", 20_000n);
        expect(first.balance).toBe(25_000n);
        expect(first.held.draws).toEqual({ [keyId(soon)]: "15000", [keyId(late)]: "5000" });
        expect(await ledger.credit.hold(spend("s2", 30_000n))).toEqual({ short: { balance: 25_000n, leased: 0n } });
        expect(await ledger.credit.balance(owner)).toBe(25_000n);
      });

      it("never spends a unit twice under concurrent holds", async () => {
        await purchase(50_000n);
        await purchase(20_000n);
        const holds = await Promise.all(
          Array.from({ length: 20 }, (_, i) => ledger.credit.hold(spend(`c${i}`, 10_000n))),
        );
        expect(holds.filter((h) => "held" in h)).toHaveLength(7);
        expect(holds.filter((h) => "short" in h)).toHaveLength(13);
        expect(await ledger.credit.balance(owner)).toBe(0n);
      });

      it("keeps the price of a spent call, and gives back a released or abandoned one, once", async () => {
        await purchase(50_000n);
        await held("kept", 10_000n);
        expect(await ledger.credit.spent("kept", answer)).toBe("spent");
        await held("back", 10_000n);
        await ledger.credit.release("back");
        await ledger.credit.release("back");
        await ledger.credit.release("kept");
        expect(await ledger.credit.balance(owner)).toBe(40_000n);
        expect(
          await ledger.credit.spent("back", answer),
          "a released hold is not spent: its answer must not leave",
        ).toBe("released");
        // No Payment-Identifier, no retry can ask for the answer again: its body is not kept.
        expect(await ledger.credit.recent(owner, 10)).toEqual([
          expect.objectContaining({ id: "kept", status: "spent", responseStatus: answer.status, responseBody: null }),
        ]);
        await held("dies", 10_000n);
        expect(await ledger.credit.releaseAbandoned()).toBe(0);
        await elapse(ABANDONED_AFTER_MS + 1_000);
        expect(await ledger.credit.releaseAbandoned()).toBe(1);
        expect(await ledger.credit.spent("dies", answer), "released as abandoned while its call ran").toBe("released");
        expect(await ledger.credit.balance(owner)).toBe(40_000n);
        const [day] = await ledger.credit.spending(owner);
        expect(day).toMatchObject({ route: "POST /api/lender/screen", calls: 1, amount: 10_000n });
      });

      it("keeps an abandoned hold that names what its call made until that is undone, and no longer lets it be spent", async () => {
        await purchase(50_000n);
        await held("published", 10_000n);
        await ledger.credit.reference("published", "REP-0001");
        await held("plain", 10_000n);
        expect(await ledger.credit.abandonedReferenced()).toEqual([]);
        await elapse(ABANDONED_AFTER_MS + 1_000);
        // Its request died after publishing: the plain hold goes back, the named one waits for its undo.
        expect(await ledger.credit.releaseAbandoned()).toBe(1);
        expect(await ledger.credit.abandonedReferenced()).toEqual([
          { id: "published", route: "POST /api/lender/screen", reference: "REP-0001" },
        ]);
        expect(await ledger.credit.balance(owner)).toBe(40_000n);
        // A stalled request coming back now finds its hold abandoned: its answer must not leave.
        expect(await ledger.credit.spent("published", answer)).toBe("released");
        await ledger.credit.reference("published", "REP-0002");
        expect((await ledger.credit.abandonedReferenced())[0]?.reference, "not renamed once abandoned").toBe(
          "REP-0001",
        );
        // Undone: given back like any release, once.
        await ledger.credit.release("published");
        await ledger.credit.release("published");
        expect(await ledger.credit.abandonedReferenced()).toEqual([]);
        expect(await ledger.credit.balance(owner)).toBe(50_000n);
      });

      it("holds one spend per Payment-Identifier of an owner: a second hold takes nothing", async () => {
        await purchase(50_000n);
        await held("p1", 10_000n, "pid_0123456789abcdef");
        const again = await ledger.credit.hold(spend("p2", 10_000n, "pid_0123456789abcdef"));
        expect(again).toEqual({ existing: expect.objectContaining({ id: "p1", status: "held" }) });
        await ledger.credit.spent("p1", answer);
        expect((await ledger.credit.find(owner, "pid_0123456789abcdef"))?.responseBody).toBe(answer.body);
        expect(await ledger.credit.balance(owner)).toBe(40_000n);
        expect((await ledger.credit.find(owner, "pid_0123456789abcdef"))?.id).toBe("p1");
        // A copy of that request finds it even when the balance left could not pay it again.
        expect(await ledger.credit.hold(spend("p3", 50_000n, "pid_0123456789abcdef"))).toEqual({
          existing: expect.objectContaining({ id: "p1" }),
        });
        expect(await ledger.credit.find(b, "pid_0123456789abcdef")).toBeUndefined();
      });

      it("holds by a live token's hash, resolving its owner in the hold, and by nothing once revoked", async () => {
        await purchase(30_000n);
        await ledger.credit.issueToken(owner, "h1");
        const hold = await ledger.credit.hold({ ...spend("t1", 10_000n), payer: { tokenHash: "h1" } });
        expect(hold).toMatchObject({ held: { owner, amount: "10000" }, balance: 20_000n });
        expect(await ledger.credit.hold({ ...spend("t2", 10_000n), payer: { tokenHash: "nope" } })).toEqual({
          unknownToken: true,
        });
        await ledger.credit.revokeTokens(owner);
        expect(await ledger.credit.hold({ ...spend("t3", 10_000n), payer: { tokenHash: "h1" } })).toEqual({
          unknownToken: true,
        });
        expect(await ledger.credit.balance(owner)).toBe(20_000n);
      });

      it("spends a hold paid by a token only while the token is live: revoked, nothing is written and the hold stays to be released", async () => {
        await purchase(50_000n);
        await ledger.credit.issueToken(owner, "h1");
        for (const id of ["by-token", "revoked", "signed-in"]) await held(id, 10_000n);
        expect(await ledger.credit.spent("by-token", answer, "h1")).toBe("spent");
        await ledger.credit.revokeTokens(owner);
        // One statement for the calls of a moment: each its own outcome.
        expect(
          await Promise.all([
            ledger.credit.spent("revoked", answer, "h1"),
            ledger.credit.spent("signed-in", answer, null),
            ledger.credit.spent("never held", answer),
          ]),
        ).toEqual(["revoked", "spent", "released"]);
        expect(await ledger.credit.spendRecorded("revoked")).toBe(false);
        await ledger.credit.release("revoked");
        expect((await ledger.credit.recent(owner, 10)).map((s) => s.id).sort()).toEqual(["by-token", "signed-in"]);
        expect(await ledger.credit.balance(owner)).toBe(30_000n);
      });

      it("knows which wallets an owner paid for from credit, and since when (the free-read rule)", async () => {
        const subject = "0x00000000000000000000000000000000000000cc";
        const routes = ["POST /api/lender/screen"];
        const hourAgo = new Date(Date.now() - 3_600_000);
        await purchase(50_000n);
        await ledger.credit.hold({ ...spend("held", 10_000n), subject });
        expect(await ledger.credit.paidFor(owner, subject, routes, hourAgo), "held, not yet answered").toBe(false);
        await ledger.credit.spent("held", answer);
        expect(await ledger.credit.paidFor(owner, subject, routes, hourAgo)).toBe(true);
        expect(await ledger.credit.paidFor(owner, subject, routes, new Date(Date.now() + 60_000))).toBe(false);
        expect(await ledger.credit.paidFor(owner, subject, ["POST /api/lender/report"], hourAgo)).toBe(false);
        expect(await ledger.credit.paidFor(owner, a, routes, hourAgo)).toBe(false);
        expect(await ledger.credit.paidFor(b, subject, routes, hourAgo)).toBe(false);
      });

      /** An answered call paid from `lease`. */
      const leaseSpend = (id: string, lease: string, amount: bigint, tokenHash: string | null = null) => ({
        id,
        lease,
        owner,
        tokenHash,
        route: "POST /api/lender/screen",
        subject: null,
        fingerprint: "f",
        amount,
        answer,
      });
      /** The owner's lots' remaining credit, soonest to expire first. */
      const lots = async () =>
        (await ledger.credit.lots(owner))
          .sort((x, y) => x.expiresAt.getTime() - y.expiresAt.getTime())
          .map((l) => l.remaining);

      it("leases a slice of the balance (soonest to expire first), records its calls, and gives back the rest latest-expiring first", async () => {
        await purchase(30_000n, "settled", 30);
        await purchase(50_000n, "settled", 365);
        expect(await ledger.credit.openLease({ id: "L1", owner, want: 60_000n, least: 10_000n })).toEqual({
          leased: { id: "L1", amount: 60_000n, balance: 80_000n, token: expect.any(String) },
        });
        // All of the sooner lot, 30,000 of the later one.
        expect(await lots()).toEqual(["0", "20000"]);
        expect(await ledger.credit.balance(owner), "a lease's unspent credit is still the owner's").toBe(80_000n);
        for (const id of ["c1", "c2", "c3", "c4"])
          expect(await ledger.credit.recordSpend(leaseSpend(id, "L1", 10_000n))).toEqual({
            outcome: "recorded",
            wanted: false,
          });
        expect(await ledger.credit.balance(owner)).toBe(40_000n);
        expect(
          (await ledger.credit.recent(owner, 10)).map((s) => [s.id, s.status, s.lease, s.responseBody]),
        ).toContainEqual(["c1", "spent", "L1", null]);
        // 20,000 unspent: back to the later lot first (the sooner one paid the calls).
        expect(await ledger.credit.closeLease("L1")).toBe(20_000n);
        expect(await ledger.credit.closeLease("L1"), "closed once").toBe(0n);
        expect(await lots()).toEqual(["0", "40000"]);
        expect(await ledger.credit.balance(owner)).toBe(40_000n);
        // A closed lease records nothing more.
        expect(await ledger.credit.recordSpend(leaseSpend("late", "L1", 10_000n))).toEqual({
          outcome: "closed",
          wanted: false,
        });
        expect((await ledger.credit.spending(owner))[0]).toMatchObject({ calls: 4, amount: 40_000n });
      });

      it("leases nothing below `least`, asks other open leases back, and never records past a lease's amount", async () => {
        await purchase(25_000n);
        expect(await ledger.credit.openLease({ id: "A", owner, want: 20_000n, least: 10_000n })).toMatchObject({
          leased: { amount: 20_000n, balance: 25_000n },
        });
        expect(await ledger.credit.openLease({ id: "B", owner, want: 20_000n, least: 10_000n })).toEqual({
          short: { balance: 5_000n, leased: 20_000n },
        });
        expect(await lots(), "nothing taken by a short opening").toEqual(["5000"]);
        // The holder learns it at its next recording.
        expect(await ledger.credit.recordSpend(leaseSpend("a1", "A", 10_000n))).toEqual({
          outcome: "recorded",
          wanted: true,
        });
        expect((await ledger.credit.recordSpend(leaseSpend("a2", "A", 20_000n))).outcome).toBe("closed");
        expect(await ledger.credit.closeLease("A")).toBe(10_000n);
        expect(await ledger.credit.openLease({ id: "B", owner, want: 20_000n, least: 10_000n })).toMatchObject({
          leased: { amount: 15_000n, balance: 15_000n },
        });
      });

      it("refuses a hold the lots are short for while a lease holds the credit, asks the lease back, and counts leases in a hold's balance", async () => {
        await purchase(25_000n);
        await ledger.credit.openLease({ id: "A", owner, want: 20_000n, least: 10_000n });
        expect(await ledger.credit.hold(spend("h1", 10_000n))).toEqual({ short: { balance: 5_000n, leased: 20_000n } });
        expect(await lots(), "nothing taken by a short hold").toEqual(["5000"]);
        expect(await ledger.credit.recordSpend(leaseSpend("a1", "A", 10_000n))).toEqual({
          outcome: "recorded",
          wanted: true,
        });
        const small = await held("h2", 5_000n);
        expect(small.balance, "the owner's balance: the lease's unspent 10,000").toBe(10_000n);
        expect(await ledger.credit.balance(owner)).toBe(10_000n);
      });

      it("records the calls of one lease recorded at once in order while they fit, and refuses the rest", async () => {
        await purchase(50_000n);
        await ledger.credit.openLease({ id: "L", owner, want: 20_000n, least: 10_000n });
        const recorded = await Promise.all(
          ["r1", "r2", "r3"].map((id) => ledger.credit.recordSpend(leaseSpend(id, "L", 10_000n))),
        );
        expect(recorded.map((r) => r.outcome)).toEqual(["recorded", "recorded", "closed"]);
        expect(await ledger.credit.closeLease("L"), "the lease was spent whole").toBe(0n);
        expect(await ledger.credit.balance(owner)).toBe(30_000n);
      });

      it("judges each call of a moment on its own: a revoked token's, one past its lease's amount and one on a closed lease refused, the others recorded", async () => {
        await purchase(60_000n);
        await ledger.credit.issueToken(owner, "h1");
        await ledger.credit.revokeTokens(owner);
        await ledger.credit.issueToken(owner, "h2");
        await ledger.credit.openLease({ id: "L", owner, want: 30_000n, least: 10_000n });
        await ledger.credit.openLease({ id: "K", owner, want: 10_000n, least: 10_000n });
        expect(await ledger.credit.closeLease("K")).toBe(10_000n);
        // Made at once: the SQL ledger records the first alone and the others in one statement.
        const recorded = await Promise.all([
          ledger.credit.recordSpend(leaseSpend("first", "L", 10_000n)),
          ledger.credit.recordSpend(leaseSpend("revoked", "L", 10_000n, "h1")),
          ledger.credit.recordSpend(leaseSpend("by-token", "L", 10_000n, "h2")),
          ledger.credit.recordSpend(leaseSpend("signed-in", "L", 10_000n)),
          ledger.credit.recordSpend(leaseSpend("past", "L", 10_000n)),
          ledger.credit.recordSpend(leaseSpend("on-closed", "K", 10_000n)),
        ]);
        expect(recorded.map((r) => r.outcome)).toEqual([
          "recorded",
          "revoked",
          "recorded",
          "recorded",
          "closed",
          "closed",
        ]);
        expect((await ledger.credit.recent(owner, 10)).map((s) => s.id).sort()).toEqual([
          "by-token",
          "first",
          "signed-in",
        ]);
        expect(await ledger.credit.closeLease("L"), "the lease was spent whole").toBe(0n);
        expect(await ledger.credit.balance(owner)).toBe(30_000n);
      });

      it("refuses the recording of a call whose token was revoked, and closes the leases of a dead replica after ABANDONED_AFTER_MS", async () => {
        await purchase(30_000n);
        await ledger.credit.issueToken(owner, "h1");
        await ledger.credit.openLease({ id: "L", owner, want: 30_000n, least: 10_000n });
        expect((await ledger.credit.recordSpend(leaseSpend("by-token", "L", 10_000n, "h1"))).outcome).toBe("recorded");
        await ledger.credit.revokeTokens(owner);
        expect((await ledger.credit.recordSpend(leaseSpend("revoked", "L", 10_000n, "h1"))).outcome).toBe("revoked");
        // What a call whose acknowledgement was lost asks: charged (recorded spent), or not.
        expect(await ledger.credit.spendRecorded("by-token")).toBe(true);
        expect(await ledger.credit.spendRecorded("revoked")).toBe(false);
        expect(await ledger.credit.spendRecorded("never")).toBe(false);
        expect((await ledger.credit.recordSpend(leaseSpend("signed-in", "L", 10_000n))).outcome).toBe("recorded");
        expect(await ledger.credit.closeAbandonedLeases()).toBe(0);
        await elapse(ABANDONED_AFTER_MS + 1_000);
        expect(await ledger.credit.closeAbandonedLeases()).toBe(1);
        expect(await lots()).toEqual(["10000"]);
        expect(await ledger.credit.balance(owner)).toBe(10_000n);
      });

      it("undoes a call recorded on an open lease whose answer was refused: the price back to the lease, once; nothing on a closed lease or a held call", async () => {
        await purchase(50_000n);
        await ledger.credit.openLease({ id: "L", owner, want: 30_000n, least: 10_000n });
        for (const id of ["kept", "refused"]) await ledger.credit.recordSpend(leaseSpend(id, "L", 10_000n));
        expect(await ledger.credit.voidSpend("refused", "other lease")).toBe(false);
        expect(await ledger.credit.voidSpend("refused", "L")).toBe(true);
        expect(await ledger.credit.voidSpend("refused", "L"), "once").toBe(false);
        expect(await ledger.credit.voidSpend("never recorded", "L")).toBe(false);
        expect(await ledger.credit.spendRecorded("refused")).toBe(false);
        expect((await ledger.credit.recent(owner, 10)).map((s) => s.id)).toEqual(["kept"]);
        expect(await ledger.credit.balance(owner)).toBe(40_000n);
        // A call paid from a hold is not a lease's: its own path (release) gives it back.
        const hold = await held("h", 10_000n);
        await ledger.credit.spent(hold.held.id, answer);
        expect(await ledger.credit.voidSpend("h", "L")).toBe(false);
        // What a closed lease did not spend went back already: nothing more to undo there.
        await ledger.credit.recordSpend(leaseSpend("late", "L", 10_000n));
        expect(await ledger.credit.closeLease("L")).toBe(10_000n);
        expect(await ledger.credit.voidSpend("late", "L")).toBe(false);
        expect(await ledger.credit.balance(owner)).toBe(20_000n);
      });

      it("never lets two concurrent openings lease the same unit", async () => {
        await purchase(50_000n);
        const opened = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            ledger.credit.openLease({ id: `P${i}`, owner, want: 10_000n, least: 10_000n }),
          ),
        );
        expect(opened.filter((o) => "leased" in o)).toHaveLength(5);
        expect(await lots()).toEqual(["0"]);
        expect(await ledger.credit.balance(owner)).toBe(50_000n);
      });

      it("knows a token's owner until the owner revokes its tokens", async () => {
        await ledger.credit.issueToken(owner, "h1");
        await ledger.credit.issueToken(owner, "h2");
        await ledger.credit.issueToken(b, "h3");
        expect(await ledger.credit.tokenOwner("h1")).toBe(owner);
        expect(await ledger.credit.tokenOwner("h2")).toBe(owner);
        expect(await ledger.credit.revokeTokens(owner)).toBe(2);
        expect(await ledger.credit.tokenOwner("h1")).toBeUndefined();
        expect(await ledger.credit.tokenOwner("h2")).toBeUndefined();
        expect(await ledger.credit.tokenOwner("h3")).toBe(b);
        expect(await ledger.credit.tokenOwner("nope")).toBeUndefined();
      });
    });
  });
}
