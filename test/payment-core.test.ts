import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FacilitatorClient } from "@x402/core/http";
import type { PaymentPayload, SettleResponse, VerifyResponse } from "@x402/core/types";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Claim, PaymentCore, type PricedRoute, type Reply } from "../api/payments/core.ts";
import { createSqlLedger } from "../api/payments/ledger/sql/sql-ledger.ts";
import { payment } from "../api/store/schema.ts";
import { openServiceStore, type ServiceStore } from "../api/store/store.ts";
import { CELO_TOKENS } from "../config/celo.ts";
import { PAYMENT_LIMITS, type PaymentSettings } from "../config/payments.ts";
import { signAuthorization, specHeader } from "./support/payments.ts";

/** A facilitator as the x402 interface defines it, answering from a script: nothing leaves the process. */
class ScriptedFacilitator implements FacilitatorClient {
  readonly mode = "facilitator" as const;
  verifies = 0;
  settlements: PaymentPayload[] = [];
  verifyAnswer: VerifyResponse = { isValid: true };
  settleAnswer: () => Promise<SettleResponse> = async () => ({ success: true, transaction: `0x${"ab".repeat(32)}`, network: "eip155:42220" });
  async verify(): Promise<VerifyResponse> {
    this.verifies++;
    return this.verifyAnswer;
  }
  async settle(payload: PaymentPayload): Promise<SettleResponse> {
    this.settlements.push(payload);
    return this.settleAnswer();
  }
  async getSupported() {
    return { kinds: [{ x402Version: 2, scheme: "exact", network: "eip155:42220" as const }], extensions: [], signers: {} };
  }
}

// The payment core alone: no HTTP framework, no chain. A scripted facilitator and a PGlite ledger.
describe("payment core", () => {
  let store: ServiceStore;
  let directory: string;
  const payer = generatePrivateKey();
  const payerAddress = privateKeyToAccount(payer).address.toLowerCase() as `0x${string}`;
  const treasury = "0x00000000000000000000000000000000000000aa" as const;
  const USDT = CELO_TOKENS.USDT;
  const settings: PaymentSettings = {
    chainId: 42220,
    network: "eip155:42220",
    payTo: treasury,
    timing: { mode: "before" },
    tokens: [USDT, CELO_TOKENS.USDC],
    ...PAYMENT_LIMITS,
    settlement: { mode: "facilitator", url: "http://facilitator.invalid" },
    rpcUrl: "http://rpc.invalid",
  };
  const screen: PricedRoute = { name: "POST /api/lender/screen", description: "Screen", microUsd: 10_000n };
  const signal: PricedRoute = { name: "GET /api/wallet/{address}/signals/{signal}", description: "Signal", microUsd: 10_000n, freeRead: { after: [screen.name], rule: "free after a screen" } };
  const wallet = "0x00000000000000000000000000000000000000b0" as const;

  const coreWith = (facilitator: ScriptedFacilitator) =>
    new PaymentCore({ settings, facilitator, chain: undefined as never, ledger: createSqlLedger(store.db) });
  const header = async () => ({ xPayment: specHeader(await signAuthorization(payer, USDT, { to: treasury }), USDT.address) });
  const request = (headers: { xPayment?: string }, input: { walletAddress: `0x${string}` } = { walletAddress: wallet }) => ({
    headers,
    url: "http://service.test/api/lender/screen",
    path: "/api/lender/screen",
    input,
    subject: input.walletAddress,
  });
  const claimOf = (admitted: { claim: Claim } | { reply: Reply }) => {
    if (!("claim" in admitted)) throw new Error(`refused: ${admitted.reply.status} ${admitted.reply.body}`);
    return admitted.claim;
  };
  const answer = { answer: { status: 200, type: "application/json", body: '{"paid":"data"}' } };

  beforeAll(async () => {
    directory = mkdtempSync(join(tmpdir(), "core-ledger-"));
    store = await openServiceStore({ kind: "pglite", directory });
  });
  afterAll(async () => {
    await store?.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it("answers a call without payment with 402: the x402 v1 body and the v2 PAYMENT-REQUIRED header, both tokens", async () => {
    const admitted = await coreWith(new ScriptedFacilitator()).admit(screen, request({}));
    expect("reply" in admitted && admitted.reply.status).toBe(402);
    const reply = (admitted as { reply: Reply }).reply;
    expect(JSON.parse(reply.body)).toMatchObject({ x402Version: 1, code: "payment_required", accepts: [{ maxAmountRequired: "10000" }, { maxAmountRequired: "10000" }] });
    expect(reply.headers["PAYMENT-REQUIRED"]).toBeTruthy();
  });

  it("verifies, claims, settles once after the handler answered, and replays that answer to a retry", async () => {
    const facilitator = new ScriptedFacilitator();
    const core = coreWith(facilitator);
    const headers = await header();
    const claim = claimOf(await core.admit(screen, request(headers)));
    expect(claim.billing).toMatchObject({ chargedUnits: 10_000n, waived: false, payer: payerAddress });
    expect(facilitator.settlements).toHaveLength(0);
    const concluded = await core.conclude(screen, request(headers), claim, answer);
    expect("headers" in concluded && concluded.headers["PAYMENT-RESPONSE"]).toBeTruthy();
    expect(facilitator.settlements).toHaveLength(1);

    const retry = await core.admit(screen, request(headers));
    expect(retry).toMatchObject({ reply: { status: 200, body: '{"paid":"data"}', headers: { "x-payment-replayed": "true" } } });
    expect(facilitator.settlements).toHaveLength(1);
    const other = await core.admit(screen, request(headers, { walletAddress: "0x00000000000000000000000000000000000000b1" }));
    expect(other).toMatchObject({ reply: { status: 409 } });
  });

  it("settles nothing when the handler failed, and lets the same payment be used again", async () => {
    const facilitator = new ScriptedFacilitator();
    const core = coreWith(facilitator);
    const headers = await header();
    const claim = claimOf(await core.admit(screen, request(headers)));
    await core.conclude(screen, request(headers), claim, { failed: "handler answered 500" });
    expect(facilitator.settlements).toHaveLength(0);
    const [row] = await store.db.select().from(payment).where((await import("drizzle-orm")).eq(payment.nonce, claim.key.nonce));
    expect(row).toMatchObject({ status: "failed", transaction: null });
    expect("claim" in (await core.admit(screen, request(headers)))).toBe(true);
  });

  it("returns no data when settlement fails or cannot be reached", async () => {
    const facilitator = new ScriptedFacilitator();
    const core = coreWith(facilitator);
    facilitator.settleAnswer = async () => ({ success: false, errorReason: "invalid_exact_evm_insufficient_balance", transaction: "", network: "eip155:42220" });
    const headers = await header();
    const failed = await core.conclude(screen, request(headers), claimOf(await core.admit(screen, request(headers))), answer);
    expect(failed).toMatchObject({ reply: { status: 402 } });
    expect(JSON.parse((failed as { reply: Reply }).reply.body).code).toBe("settlement_failed");

    facilitator.settleAnswer = async () => {
      throw new Error("connect ECONNREFUSED");
    };
    const down = await header();
    const unavailable = await core.conclude(screen, request(down), claimOf(await core.admit(screen, request(down))), answer);
    // A settlement that may or may not have happened is the chain's to decide: retry with the same payment.
    expect(unavailable).toMatchObject({ reply: { status: 503, headers: { "Retry-After": expect.any(String) } } });
    expect(["settlement_pending", "settlement_unavailable"]).toContain(JSON.parse((unavailable as { reply: Reply }).reply.body).error.code);
  });

  it("refuses what the facilitator refuses, with the project's codes", async () => {
    const facilitator = new ScriptedFacilitator();
    facilitator.verifyAnswer = { isValid: false, invalidReason: "invalid_exact_evm_signature" };
    const refused = await coreWith(facilitator).admit(screen, request(await header()));
    expect(refused).toMatchObject({ reply: { status: 402 } });
    expect(JSON.parse((refused as { reply: Reply }).reply.body).code).toBe("invalid_signature");
  });

  it("waives a read the route's hook makes free, and settles nothing for it", async () => {
    const facilitator = new ScriptedFacilitator();
    const core = coreWith(facilitator);
    // A wallet this payer has not paid for yet: the first read is charged.
    const fresh = { walletAddress: "0x00000000000000000000000000000000000000c0" as const };
    const paidRead = claimOf(await core.admit(signal, request(await header(), fresh)));
    expect(paidRead.waived).toBe(false);

    const headers = await header();
    await core.conclude(screen, request(headers, fresh), claimOf(await core.admit(screen, request(headers, fresh))), answer);
    const free = claimOf(await core.admit(signal, request(await header(), fresh)));
    expect(free.billing).toMatchObject({ chargedUnits: 0n, waived: true });
    const settledBefore = facilitator.settlements.length;
    await core.conclude(signal, request(await header()), free, answer);
    expect(facilitator.settlements).toHaveLength(settledBefore);
  });
});
