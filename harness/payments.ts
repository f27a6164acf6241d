import { randomBytes } from "node:crypto";
import { authorizationTypes, ExactEvmScheme } from "@x402/evm";
import { wrapFetchWithPaymentFromConfig } from "@x402/fetch";
import { createPublicClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { devStablecoinAbi } from "../abis/DevStablecoin.ts";
import type { Ledger, PaymentKey } from "../api/payments/ledger/ledger.ts";
import { wireAuthorization as wire } from "../api/payments/verify.ts";
import { readEnv } from "../config/env.ts";
import type { Manifest } from "../config/manifest.ts";
import { type PaymentSettings, resolvePaymentSettings } from "../config/payments.ts";
import { resolveIndexTarget } from "../config/target.ts";

/**
 * The official x402 client (v2, PAYMENT-SIGNATURE) paying with a viem account: configuration only.
 * The devnet's tokens are not the client's known Celo assets, so they are allowed by address,
 * each capped at 0.10 (the dearest single call) unless a caller that means to pay more (a batch) says so.
 */
export function x402Fetch(privateKey: Hex, tokens: { address: Hex }[], maxUnitsPerPayment = 100_000n) {
  return wrapFetchWithPaymentFromConfig(fetch, {
    schemes: [{ network: "eip155:42220", client: new ExactEvmScheme(privateKeyToAccount(privateKey)) }],
    spendControls: {
      allowedAssets: tokens.map((t) => ({
        network: "eip155:42220" as const,
        asset: t.address,
        maxAmountPerPayment: String(maxUnitsPerPayment),
      })),
    },
  });
}

export type Token = Manifest["tokens"]["USDT"];

export type AuthorizationFields = {
  from: Hex;
  to: Hex;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
};

export const randomNonce = (): Hex => `0x${randomBytes(32).toString("hex")}`;
export const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000));

/** An EIP-3009 TransferWithAuthorization signed by hand with viem, as the service interface describes. */
export async function signAuthorization(
  privateKey: Hex,
  token: Pick<Token, "address" | "name" | "version">,
  fields: Partial<AuthorizationFields> & { to: Hex },
  chainId = 42220,
) {
  const account = privateKeyToAccount(privateKey);
  const authorization: AuthorizationFields = {
    from: account.address.toLowerCase() as Hex,
    value: 10_000n,
    validAfter: 0n,
    validBefore: nowSeconds() + 300n,
    nonce: randomNonce(),
    ...fields,
  };
  const signature = await account.signTypedData({
    domain: { name: token.name, version: token.version, chainId, verifyingContract: token.address },
    types: authorizationTypes,
    primaryType: "TransferWithAuthorization",
    message: { ...authorization, from: account.address },
  });
  return { authorization, signature };
}

/** The service interface's X-PAYMENT JSON. */
export function specHeader(signed: { authorization: AuthorizationFields; signature: Hex }, token: Hex) {
  return JSON.stringify({ ...wire(signed.authorization), signature: signed.signature, token });
}

/** x402 v1: X-PAYMENT base64(JSON {x402Version:1, scheme, network, payload}). */
export function v1Header(signed: { authorization: AuthorizationFields; signature: Hex }, network = "celo") {
  const json = {
    x402Version: 1,
    scheme: "exact",
    network,
    payload: { signature: signed.signature, authorization: wire(signed.authorization) },
  };
  return Buffer.from(JSON.stringify(json)).toString("base64");
}

/** x402 v2: PAYMENT-SIGNATURE base64(JSON {x402Version:2, accepted, payload}). */
export function v2Header(
  signed: { authorization: AuthorizationFields; signature: Hex },
  token: Token,
  payTo: Hex,
  network = "eip155:42220",
) {
  const accepted = {
    scheme: "exact",
    network,
    asset: token.address,
    amount: signed.authorization.value.toString(),
    payTo,
    maxTimeoutSeconds: 300,
    extra: { name: token.name, version: token.version },
  };
  return Buffer.from(
    JSON.stringify({
      x402Version: 2,
      accepted,
      payload: { signature: signed.signature, authorization: wire(signed.authorization) },
    }),
  ).toString("base64");
}

export async function tokenBalance(rpcUrl: string, token: Hex, holder: Hex): Promise<bigint> {
  const client = createPublicClient({ transport: http(rpcUrl) });
  return client.readContract({ address: token, abi: devStablecoinAbi, functionName: "balanceOf", args: [holder] });
}

/**
 * The payment settings the service resolves for the devnet whose manifest is at `manifestPath`,
 * with nothing else configured (self-settlement by the manifest's relayer). `rpcUrl` replaces the
 * chain endpoint (a test's proxy in front of anvil).
 */
/** What the service's treasury holds of both devnet tokens, in smallest units. */
export async function treasuryHolds(manifest: Pick<Manifest, "rpcUrl" | "tokens" | "service">): Promise<bigint> {
  const { USDT, USDC } = manifest.tokens;
  const held = await Promise.all(
    [USDT, USDC].map((t) => tokenBalance(manifest.rpcUrl, t.address, manifest.service.treasury.address)),
  );
  return held.reduce((a, b) => a + b, 0n);
}

export function devnetPaymentSettings(manifestPath: string, rpcUrl?: string): PaymentSettings {
  const env = readEnv({ DEVNET_MANIFEST: manifestPath });
  const settings = resolvePaymentSettings(resolveIndexTarget(env), env);
  return rpcUrl ? { ...settings, rpcUrl } : settings;
}

/**
 * Credit bought and settled, as `POST /api/credit` leaves it in a ledger: the purchase's payment
 * claimed and settled, and its lot added (spendable until `expiresAt`, a day by default).
 */
export async function settledCredit(
  ledger: Ledger,
  purchase: PaymentKey,
  amount: bigint,
  expiresAt = new Date(Date.now() + 86_400_000),
): Promise<void> {
  const claimed = await ledger.claim({
    ...purchase,
    amount,
    route: "POST /api/credit",
    subject: null,
    fingerprint: "f",
    signatureHash: "s",
    encoding: "spec",
    validBefore: 2n ** 40n,
  });
  if (!claimed || !(await ledger.settling(purchase, { status: 200, type: "application/json", body: "{}" })))
    throw new Error(`the purchase ${purchase.nonce} was claimed already`);
  await ledger.settled(purchase, "0x01");
  await ledger.credit.addLot(purchase, amount, expiresAt);
}
