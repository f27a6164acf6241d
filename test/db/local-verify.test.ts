import { authorizationTypes } from "@x402/evm";
import { concat, type Hex, hexToBigInt, hexToNumber, keccak256, serializeErc6492Signature, slice, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { IndexDb } from "../../api/db.ts";
import { decodePayment } from "../../api/payments/header.ts";
import { indexedPayerState, type PayerState, verifyWithoutRpc } from "../../api/payments/local-verify.ts";
import { PRICES } from "../../api/payments/prices.ts";
import { checkPayment, x402Payment } from "../../api/payments/verify.ts";
import type { Address } from "../../config/addresses.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import { openIndexDb } from "../../harness/index-db.ts";
import { cancelOnChain, settleOnChain } from "../support/authorizations.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { testDatabase, waitForBlock } from "../support/indexer.ts";
import {
  type AuthorizationFields,
  devnetPaymentSettings,
  randomNonce,
  signAuthorization,
  specHeader,
  type Token,
  tokenBalance,
  v1Header,
} from "../support/payments.ts";

// verifyWithoutRpc over the real indexed tables of a devnet whose chain is stopped before the first
// verification (and whose settings name an RPC endpoint where nothing listens): whatever it
// answers, it answered with no chain. Spent nonces and balances come from real transactions,
// indexed; signatures are real.
describe(`payment verification without RPC (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let index: { db: IndexDb; close: () => Promise<void> };
  let settings: PaymentSettings;
  let state: PayerState;
  let USDT: Token;
  let USDC: Token;
  let lender: { address: Address; privateKey: Hex };
  let treasury: Address;
  let used: Signed;
  let cancelled: Signed;
  let chainBalance: bigint;

  type Signed = { authorization: AuthorizationFields; signature: Hex };

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 2, months: 2, slotHours: 24 * 7 });
    devnet = env.devnet;
    const indexer = await env.index();
    const { rpcUrl, service } = devnet.manifest;
    ({ USDT, USDC } = devnet.manifest.tokens);
    lender = devnet.manifest.lenders[0] as typeof lender;
    treasury = service.treasury.address;
    const relayer = service.relayer.privateKey as Hex;

    // One authorization settled on chain, one cancelled by its payer; then indexed.
    used = await signAuthorization(lender.privateKey, USDT, { to: treasury });
    await settleOnChain(rpcUrl, relayer, USDT, used);
    const nonce = randomNonce();
    cancelled = await signAuthorization(lender.privateKey, USDT, { to: treasury, nonce });
    const last = await cancelOnChain(rpcUrl, relayer, lender.privateKey, USDT, nonce);
    await waitForBlock(indexer, Number(last), 360_000); // generous: other suites may share the machine
    chainBalance = await tokenBalance(rpcUrl, USDT.address, lender.address);

    // No chain from here on.
    settings = { ...devnetPaymentSettings(devnet.manifestPath), rpcUrl: "http://127.0.0.1:9/" };
    await indexer.stop();
    await devnet.stop();
    index = await openIndexDb(env.slot);
    state = indexedPayerState(index.db, { schema: env.slot.schema, tracked: null });
  }, 480_000);

  afterAll(async () => {
    await index?.close();
    await env?.stop();
  });

  const sign = (fields: Partial<AuthorizationFields> = {}, token: Token = USDT) =>
    signAuthorization(lender.privateKey, token, { to: treasury, ...fields });
  /** The core's order: decode the header, the local checks (which find the token), then verifyWithoutRpc. */
  const verify = async (header: string, options: { unsettled?: bigint; state?: PayerState } = {}) => {
    const attempt = decodePayment({ xPayment: header }, settings.maxHeaderBytes)!;
    const token = await checkPayment(attempt, PRICES.screen, settings, undefined, Math.floor(Date.now() / 1000));
    return {
      attempt,
      token,
      result: await verifyWithoutRpc(attempt, token, {
        settings,
        state: options.state ?? state,
        unsettled: options.unsettled ?? 0n,
      }),
    };
  };
  const spec = (signed: Signed, token: Token = USDT) => specHeader(signed, token.address);
  const withSignature = (signed: Signed, signature: Hex): Signed => ({ ...signed, signature });

  it("verifies a valid EOA payment from the index alone, as the settlement expects it", async () => {
    const { attempt, token, result } = await verify(spec(await sign()));
    expect(result).toEqual(x402Payment(attempt, token, settings));
    if (result === "needs_rpc") throw new Error("unreachable");
    expect(result.payer).toBe(lender.address);
    expect(result.payload.payload).toEqual({
      signature: attempt.signature,
      authorization: expect.objectContaining({ from: lender.address, to: treasury, value: "10000" }),
    });
    expect(result.requirements).toMatchObject({
      scheme: "exact",
      network: "eip155:42220",
      amount: "10000",
      extra: { name: USDT.name, version: USDT.version },
    });
  });

  it("verifies in either token, and an x402 v1 payment whose token is found from its signature", async () => {
    const usdc = await verify(spec(await sign({}, USDC), USDC));
    expect(usdc.result).toMatchObject({ token: { address: USDC.address }, payer: lender.address });
    const v1 = await verify(v1Header(await sign({}, USDC)));
    expect(v1.result).toMatchObject({ token: { address: USDC.address }, payer: lender.address });
  });

  it("reads the payer's balance as the chain has it", async () => {
    expect((await state.read(USDT.address, lender.address, keccak256("0x00"))).balance).toBe(chainBalance);
    expect(chainBalance).toBeGreaterThan(10_000n);
  });

  it("refuses an authorization used on chain, and one its payer cancelled: nonce_already_used", async () => {
    await expect(verify(spec(used))).rejects.toMatchObject({ code: "nonce_already_used" });
    await expect(verify(spec(cancelled))).rejects.toMatchObject({ code: "nonce_already_used" });
    expect((await state.read(USDT.address, lender.address, used.authorization.nonce)).nonce).toBe("used");
    expect((await state.read(USDT.address, lender.address, cancelled.authorization.nonce)).nonce).toBe("canceled");
    // The same nonce in the other token is another authorization.
    expect((await state.read(USDC.address, lender.address, used.authorization.nonce)).nonce).toBeNull();
  });

  it("refuses a balance the chain covers but not after the payer's unsettled payments: insufficient_balance", async () => {
    const value = 10_000n;
    const header = spec(await sign({ value }));
    // Exactly covered: verifies.
    expect(await verify(header, { unsettled: chainBalance - value })).toMatchObject({ result: { amount: value } });
    await expect(verify(header, { unsettled: chainBalance - value + 1n })).rejects.toMatchObject({
      code: "insufficient_balance",
    });
  });

  it("leaves a signature by another key to the chain (it may be a contract wallet's), and refuses a malleated one the token would refuse: invalid_signature", async () => {
    const signed = await sign();
    const other = await privateKeyToAccount(generatePrivateKey()).signTypedData({
      domain: { name: USDT.name, version: USDT.version, chainId: 42220, verifyingContract: USDT.address },
      types: authorizationTypes,
      primaryType: "TransferWithAuthorization",
      message: signed.authorization,
    });
    expect(await verify(spec(withSignature(signed, other)))).toMatchObject({ result: "needs_rpc" });
    // The same signature with s -> n - s (and v flipped) still recovers to the payer, but FiatToken refuses a high s.
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const s = hexToBigInt(slice(signed.signature, 32, 64));
    const v = hexToNumber(slice(signed.signature, 64, 65));
    const malleated = concat([
      slice(signed.signature, 0, 32),
      toHex(n - s, { size: 32 }),
      toHex(v === 27 ? 28 : 27, { size: 1 }),
    ]);
    await expect(verify(spec(withSignature(signed, malleated)))).rejects.toMatchObject({ code: "invalid_signature" });
  });

  it("leaves contract wallets' signatures (EIP-6492, EIP-1271) to the RPC path: needs_rpc", async () => {
    const signed = await sign();
    const factory = "0x0000000000000000000000000000000000fac700" as Address;
    const wrapped = serializeErc6492Signature({ address: factory, data: "0xdeadbeef", signature: signed.signature });
    expect((await verify(spec(withSignature(signed, wrapped)))).result).toBe("needs_rpc");
    // A multi-owner contract wallet's signature: two owners' 65-byte signatures, concatenated.
    const twoOwners = concat([signed.signature, signed.signature]);
    expect((await verify(spec(withSignature(signed, twoOwners)))).result).toBe("needs_rpc");
  });

  it("leaves a payer outside tracked mode's set to the RPC path (the index does not hold its balance)", async () => {
    const tracked = indexedPayerState(index.db, { schema: env.slot.schema, tracked: new Set([treasury]) });
    expect((await verify(spec(await sign()), { state: tracked })).result).toBe("needs_rpc");
    // Its spent nonces are still known.
    await expect(verify(spec(used), { state: tracked })).rejects.toMatchObject({ code: "nonce_already_used" });
  });
});
