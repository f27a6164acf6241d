import { eq, sql } from "drizzle-orm";
import { createPublicClient, type Hex, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reputationReporterAbi } from "../../abis/ReputationReporter.ts";
import { routeName } from "../../api/http/declare.ts";
import { insertMonitors } from "../../api/monitors/monitors.ts";
import { createMonitorsRoute, removeUnpaidMonitors } from "../../api/monitors/routes.ts";
import { MONITOR_EVENT_TYPES } from "../../api/monitors/schema.ts";
import { reportRoute, revokeUnpaidReports, UNPAID_REASON } from "../../api/passport/report-route.ts";
import { createReporter } from "../../api/passport/reporter.ts";
import type { Ledger } from "../../api/payments/ledger/ledger.ts";
import { ABANDONED_AFTER_MS } from "../../api/payments/lifecycle.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { keyOf } from "../../api/payments/reconcile.ts";
import { creditSpend, monitor } from "../../api/store/schema.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import type { Address } from "../../config/addresses.ts";
import { startTestDevnet, type TestDevnet } from "../support/devnet.ts";
import { type DatabaseSlot, databaseSlot, testDatabase } from "../support/indexer.ts";
import { devnetPaymentSettings, nowSeconds, randomNonce } from "../support/payments.ts";

// The report route names its passport in the ledger row (or, paid from credit, in its hold) before
// publishing it, as POST /api/monitors names its monitors. If the process dies after making them
// and before the payment is settled or recorded (no answer stored), the reconciler still finds what
// to undo: once the payment's authorization lapses unused, or once the credit hold is abandoned.
describe(`a passport published by a claim that never settled (${testDatabase})`, () => {
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let store: ServiceStore;

  beforeAll(async () => {
    devnet = await startTestDevnet({ wallets: 2, months: 2, slotHours: 24 * 7 });
    slot = databaseSlot();
    await slot.prepare();
    store = await openServiceStore(slot.store);
  }, 240_000);

  afterAll(async () => {
    await store?.close();
    await slot?.drop();
    await devnet?.stop();
  });

  /** The service's reporter, and a payment core whose reconciler revokes unpaid passports (as src/api/index.ts wires it). */
  const wiredService = () => {
    const { rpcUrl, reporter: deployed, service } = devnet.manifest;
    const reporter = createReporter({
      rpcUrl,
      contract: deployed.address,
      privateKey: service.reporter.privateKey as Hex,
      original: null,
    });
    const payments = createPayments(devnetPaymentSettings(devnet.manifestPath), store.db, undefined, {
      onOutcome: revokeUnpaidReports(reporter),
    });
    /** Publishes `reportId` about `wallet`, as the report route does once its call is claimed and the passport named. */
    const publish = (reportId: string, wallet: Hex, buyer: Hex, reportHash: string) =>
      reporter.exclusive(() =>
        reporter.publish({
          wallet,
          buyer,
          reputationScore: 70,
          financialHealthScore: 70,
          loanCapacity: "1000",
          reportId,
          reportHash,
          expiresAt: nowSeconds() + 86_400n,
          supersedes: "",
        }),
      );
    /** Whether `reportId` is revoked, read from the contract. */
    const revoked = async (reportId: string) =>
      (
        await createPublicClient({ transport: http(rpcUrl) }).readContract({
          address: deployed.address,
          abi: reputationReporterAbi,
          functionName: "reportStatus",
          args: [reportId],
        })
      )[1];
    return { reporter, payments, publish, revoked };
  };

  /** Credit of `units` bought by `owner` with a payment that settled (its lot spendable). */
  const buyCredit = async (ledger: Ledger, owner: Address, units: bigint) => {
    const purchase = {
      token: devnet.manifest.tokens.USDT.address,
      payer: owner,
      nonce: randomNonce(),
      amount: units,
      route: "POST /api/credit",
      subject: null,
      fingerprint: "p".repeat(64),
      signatureHash: "q".repeat(64),
      encoding: "x-payment-json",
      validBefore: nowSeconds() + 3_600n,
    };
    expect(await ledger.claim(purchase)).toBe(true);
    expect(await ledger.settling(keyOf(purchase), { status: 200, type: "application/json", body: "{}" })).toBe(true);
    await ledger.settled(keyOf(purchase), `0x${"ab".repeat(32)}`);
    await ledger.credit.addLot(keyOf(purchase), units, new Date(Date.now() + 86_400_000));
  };
  /** Two minutes pass for the credit holds: their requests are taken for dead. */
  const abandonHolds = () =>
    store.db.update(creditSpend).set({
      updatedAt: sql`${creditSpend.updatedAt} - ${sql.raw(`interval '${ABANDONED_AFTER_MS + 1_000} milliseconds'`)}`,
    });

  it("is revoked on chain by the reconciler, from the reference its ledger row recorded", async () => {
    const { lenders, personas } = devnet.manifest;
    const { reporter, payments, publish, revoked } = wiredService();
    const payer = lenders[0]!.address as Hex;
    const reportId = "REP-CRASHED001";

    // The claim (authorization already past its validBefore: it can never be settled now), the
    // reference written before publishing, then the publication; the process "dies" here.
    const entry = {
      token: devnet.manifest.tokens.USDT.address,
      payer,
      nonce: randomNonce(),
      amount: 100_000n,
      route: routeName(reportRoute),
      subject: personas.salaried!.address,
      fingerprint: "f".repeat(64),
      signatureHash: "s".repeat(64),
      encoding: "x-payment-json",
      validBefore: nowSeconds() - 1n,
    };
    expect(await payments.ledger.claim(entry)).toBe(true);
    await payments.ledger.reference(entry, reportId);
    await publish(reportId, personas.salaried!.address, payer, "bafkreiexample");
    expect(await revoked(reportId)).toBe(false);

    // A later sweep (ABANDONED_AFTER_MS passed: the row is read as its request died) decides it.
    const [row] = await payments.ledger.unresolved(0).then((rows) => rows.filter((r) => r.nonce === entry.nonce));
    const abandoned = row ?? (await payments.ledger.find(keyOf(entry)))!;
    expect(abandoned.responseBody).toBeNull();
    expect(await payments.reconcileOne({ ...abandoned, updatedAt: new Date(0) })).toMatchObject({ status: "expired" });
    expect(await revoked(reportId)).toBe(true);
    expect(await reporter.revokeOnce(reportId, UNPAID_REASON)).toBe(false);
  });

  it("paid from credit, is revoked by the sweep from the reference its hold recorded, before the price goes back", async () => {
    const { lenders, personas } = devnet.manifest;
    const { reporter, payments, publish, revoked: revokedOf } = wiredService();
    const { ledger } = payments;
    const owner = lenders[1]!.address.toLowerCase() as Address;
    const reportId = "REP-CRASHED002";

    // Credit bought by a payment that settled, then the report's price held from it, the passport
    // named in the hold, and published; the process "dies" here, before the spend is recorded.
    await buyCredit(ledger, owner, 1_000_000n);
    const hold = await ledger.credit.hold({
      id: "report-hold",
      payer: { owner },
      route: routeName(reportRoute),
      subject: personas.merchant!.address,
      fingerprint: "f".repeat(64),
      paymentId: null,
      amount: 100_000n,
    });
    expect("held" in hold).toBe(true);
    await ledger.credit.reference("report-hold", reportId);
    await publish(reportId, personas.merchant!.address, owner, "bafkreiexamplecredit");
    const revoked = () => revokedOf(reportId);
    expect(await revoked()).toBe(false);
    expect(await ledger.credit.balance(owner)).toBe(900_000n);

    // A sweep before ABANDONED_AFTER_MS leaves it (its request may still be running); one after it
    // (the hold's clock moved back, as two minutes passing would) revokes, then gives the price back.
    await payments.reconcileUnresolved(0);
    expect(await revoked()).toBe(false);
    await abandonHolds();
    await payments.reconcileUnresolved(0);
    expect(await revoked()).toBe(true);
    expect(await ledger.credit.balance(owner)).toBe(1_000_000n);
    expect(await reporter.revokeOnce(reportId, UNPAID_REASON)).toBe(false);
  });

  it("removes the monitors a call created when its request died unpaid, paid by x402 or from credit", async () => {
    const { lenders, personas } = devnet.manifest;
    const payments = createPayments(devnetPaymentSettings(devnet.manifestPath), store.db, undefined, {
      onOutcome: removeUnpaidMonitors(Promise.resolve(store.db)),
    });
    const { ledger } = payments;
    const route = routeName(createMonitorsRoute);
    const owner = lenders[0]!.address.toLowerCase() as Address;
    /** The monitor a call creates once it is paid for and has named it (as POST /api/monitors does). */
    const create = (paymentRef: string) =>
      insertMonitors(store.db, {
        owner,
        wallets: [personas.whale!.address],
        events: MONITOR_EVENT_TYPES,
        endpointId: null,
        paidUntil: new Date(Date.now() + 86_400_000),
        paymentRef,
      });
    const standing = async (paymentRef: string) =>
      (await store.db.select().from(monitor).where(eq(monitor.paymentRef, paymentRef))).length;

    // x402: the claim (its authorization lapsed unused), named, its monitor created; the process dies.
    const entry = {
      token: devnet.manifest.tokens.USDT.address,
      payer: owner,
      nonce: randomNonce(),
      amount: 10_000n,
      route,
      subject: null,
      fingerprint: "m".repeat(64),
      signatureHash: "n".repeat(64),
      encoding: "x-payment-json",
      validBefore: nowSeconds() - 1n,
    };
    expect(await ledger.claim(entry)).toBe(true);
    await payments.reference({ key: keyOf(entry) }, "x402-call");
    await create("x402-call");
    // From credit: the price held, named, its monitor created; the process dies.
    await buyCredit(ledger, owner, 100_000n);
    const hold = await ledger.credit.hold({
      id: "monitor-hold",
      payer: { owner },
      route,
      subject: null,
      fingerprint: "m".repeat(64),
      paymentId: null,
      amount: 10_000n,
    });
    expect("held" in hold).toBe(true);
    await payments.reference({ key: keyOf(entry), credit: { spend: "monitor-hold" } }, "credit-call");
    await create("credit-call");
    expect([await standing("x402-call"), await standing("credit-call")]).toEqual([1, 1]);

    const row = (await ledger.find(keyOf(entry)))!;
    expect(await payments.reconcileOne({ ...row, updatedAt: new Date(0) })).toMatchObject({ status: "expired" });
    expect(await standing("x402-call")).toBe(0);
    await abandonHolds();
    await payments.reconcileUnresolved(0);
    expect(await standing("credit-call")).toBe(0);
    expect(await ledger.credit.balance(owner)).toBe(100_000n);
  });
});
