import type { FacilitatorClient } from "@x402/core/http";
import type { PaymentPayload, PaymentRequirements, SettleResponse, VerifyResponse } from "@x402/core/types";
import { authorizationTypes } from "@x402/evm";
import {
  getAddress,
  type Hex,
  numberToHex,
  pad,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
  toEventSelector,
  verifyTypedData,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import {
  type Claim,
  type CreditAdmission,
  PaymentCore,
  type PaymentDeps,
  type PricedRoute,
  type Reply,
} from "../../api/payments/core.ts";
import { CREDIT_LIFETIME_MS } from "../../api/payments/credit-lifecycle.ts";
import { hashCreditToken, mintCreditToken } from "../../api/payments/credit-token.ts";
import type { Facilitator } from "../../api/payments/facilitator.ts";
import type { Authorization } from "../../api/payments/header.ts";
import { MemoryLedger } from "../../api/payments/ledger/memory.ts";
import type { PayerState } from "../../api/payments/local-verify.ts";
import type { Settler, SignedSettlement, SubmitResult } from "../../api/payments/relayer.ts";
import type { Address } from "../../config/addresses.ts";
import { CELO_TOKENS, MULTICALL3, type TokenInfo } from "../../config/celo.ts";
import { PAYMENT_LIMITS, type PaymentSettings } from "../../config/payments.ts";
import { nowSeconds, randomNonce, signAuthorization } from "../../harness/payments.ts";

// The payment core's collaborators as fakes, in the spirit of x402's resource server tests: a token
// on a chain that keeps EIP-3009 state (balances, spent nonces, receipts with the events the
// reconciler reads), a remote facilitator and a relayer that settle on it, and the indexed payer
// state read from it. Nothing leaves the process; signatures are real (viem, anvil's dev keys).

/** Anvil's well-known dev keys: payers in these tests. */
export const PAYER_KEYS = [
  "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
  "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
] as const satisfies Hex[];

export const payerOf = (key: Hex) => privateKeyToAccount(key).address.toLowerCase() as Address;

export const TREASURY = "0x00000000000000000000000000000000000000aa" as Address;
const RELAYER = "0x00000000000000000000000000000000000000ee" as Address;
/** Sends transactions that are not the service's. */
export const OUTSIDER = "0x00000000000000000000000000000000000000cc" as Address;
export const USDT = CELO_TOKENS.USDT;
export const USDC = CELO_TOKENS.USDC;

export const SCREEN: PricedRoute = { name: "POST /api/lender/screen", description: "Screen", microUsd: 10_000n };
/** Free to a payer who paid for a screen of the same wallet recently. */
export const SIGNAL: PricedRoute = {
  name: "GET /api/wallet/{address}/signals/{signal}",
  description: "Signal",
  microUsd: 10_000n,
  freeRead: { after: [SCREEN.name], rule: "free after a screen" },
};
/** Settled before its answer in every mode (the report). */
export const REPORT: PricedRoute = {
  name: "POST /api/lender/report",
  description: "Report",
  microUsd: 50_000n,
  settleFirst: true,
};

export type Mode = "before-remote" | "before-self" | "deferred";

function settingsFor(mode: Mode, caps = { perPayer: 30_000n, total: 100_000n }): PaymentSettings {
  return {
    chainId: 42220,
    network: "eip155:42220",
    payTo: TREASURY,
    tokens: [USDT, USDC],
    ...PAYMENT_LIMITS,
    creditMaxMicroUsd: 50_000_000n,
    settlement:
      mode === "before-remote"
        ? { mode: "facilitator", url: "http://facilitator.invalid" }
        : { mode: "self", relayerKey: PAYER_KEYS[0] },
    timing:
      mode === "deferred"
        ? { mode: "deferred", maxPerPayerMicroUsd: caps.perPayer, maxTotalMicroUsd: caps.total }
        : { mode: "before" },
    rpcUrl: "http://rpc.invalid",
  };
}

export type Signed = { authorization: Authorization; signature: Hex; token: TokenInfo };

export const chainSeconds = nowSeconds;

/** An EIP-3009 TransferWithAuthorization signed by `key` (harness/payments.ts), to the treasury by default. */
export async function sign(
  key: Hex,
  fields: Partial<Authorization> = {},
  token: TokenInfo = USDT,
  chainId = 42220,
): Promise<Signed> {
  const { authorization, signature } = await signAuthorization(key, token, { to: TREASURY, ...fields }, chainId);
  return { authorization: authorization as Authorization, signature, token };
}

const wire = (a: Authorization) => ({
  from: a.from,
  to: a.to,
  value: `${a.value}`,
  validAfter: `${a.validAfter}`,
  validBefore: `${a.validBefore}`,
  nonce: a.nonce,
});
const base64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64");

/** x402 v1: X-PAYMENT base64(JSON {x402Version:1, scheme, network, payload}). */
export const v1Payment = (signed: Signed, network = "celo") => ({
  xPayment: base64({
    x402Version: 1,
    scheme: "exact",
    network,
    payload: { signature: signed.signature, authorization: wire(signed.authorization) },
  }),
});

/** x402 v2: PAYMENT-SIGNATURE base64(JSON {x402Version:2, accepted, payload}). */
export const v2Payment = (
  signed: Signed,
  asset: string = signed.token.address,
  network = "eip155:42220",
  scheme = "exact",
) => ({
  paymentSignature: base64({
    x402Version: 2,
    accepted: {
      scheme,
      network,
      asset,
      amount: `${signed.authorization.value}`,
      payTo: signed.authorization.to,
      maxTimeoutSeconds: 300,
      extra: { name: signed.token.name, version: signed.token.version },
    },
    payload: { signature: signed.signature, authorization: wire(signed.authorization) },
  }),
});

/** The service interface's X-PAYMENT JSON (with an x402 payment-identifier when given). */
export function xPayment(signed: Signed, paymentId?: string): { xPayment: string } {
  return {
    xPayment: JSON.stringify({
      ...wire(signed.authorization),
      signature: signed.signature,
      token: signed.token.address,
      ...(paymentId ? { paymentId } : {}),
    }),
  };
}

const AUTHORIZATION_USED = toEventSelector("AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)");
const TRANSFER = toEventSelector("Transfer(address indexed from, address indexed to, uint256 value)");
const topic = (address: string) => pad(address as Hex, { size: 32 }).toLowerCase() as Hex;

type Log = { address: Hex; topics: Hex[]; data: Hex };
type Receipt = {
  status: "success" | "reverted";
  logs: Log[];
  from: Hex;
  to: Hex;
  transactionHash: Hex;
  blockNumber: bigint;
};
const authKey = (token: string, payer: string, nonce: string) => `${token}:${payer}:${nonce}`.toLowerCase();

/** One authorization as the fake chain takes it: the token's and the signed fields. */
export type Transfer = {
  token: string;
  from: string;
  to: string;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: string;
};

/** A transfer to the treasury: the money the payer paid, by authorization. */
export type Charge = { token: string; payer: string; nonce: string; amount: bigint; transaction: Hex; sender: string };

/**
 * A chain with EIP-3009 tokens, as much of it as the core and its reconciler read (viem's
 * PublicClient methods). `down` makes every read throw (an RPC that does not answer).
 */
export class FakeChain {
  block = 1n;
  /** Seconds added to the wall clock: the chain's time (expiry). */
  skew = 0n;
  down = false;
  private readonly balances = new Map<string, bigint>();
  private readonly spent = new Map<string, { kind: "used" | "canceled"; transaction: Hex }>();
  private readonly receipts = new Map<Hex, Receipt>();
  /** Relayer transactions mined, by relayer: its next nonce on chain. */
  private readonly mined = new Map<string, number>();
  readonly charges: Charge[] = [];

  now(): bigint {
    return chainSeconds() + this.skew;
  }

  fund(token: TokenInfo, wallet: string, amount: bigint): void {
    this.balances.set(`${token.address}:${wallet.toLowerCase()}`, amount);
  }

  balanceOf(token: string, wallet: string): bigint {
    return this.balances.get(`${token.toLowerCase()}:${wallet.toLowerCase()}`) ?? 0n;
  }

  spentAs(token: string, payer: string, nonce: string) {
    return this.spent.get(authKey(token, payer, nonce));
  }

  /** transferWithAuthorization mined in `hash` (sent by `sender`): success with its events, or reverted. */
  execute(transfer: Transfer, hash: Hex = randomNonce(), sender: string = RELAYER, relayerNonce?: number): Receipt {
    const key = authKey(transfer.token, transfer.from, transfer.nonce);
    const balance = this.balanceOf(transfer.token, transfer.from);
    const now = this.now();
    this.block++;
    if (relayerNonce !== undefined) this.mined.set(sender, Math.max(this.mined.get(sender) ?? 0, relayerNonce + 1));
    const base = {
      from: sender as Hex,
      to: transfer.token.toLowerCase() as Hex,
      transactionHash: hash,
      blockNumber: this.block,
    };
    if (this.spent.has(key) || balance < transfer.value || now >= transfer.validBefore || now <= transfer.validAfter) {
      const reverted: Receipt = { ...base, status: "reverted", logs: [] };
      this.receipts.set(hash, reverted);
      return reverted;
    }
    this.spent.set(key, { kind: "used", transaction: hash });
    this.balances.set(`${transfer.token.toLowerCase()}:${transfer.from.toLowerCase()}`, balance - transfer.value);
    const to = transfer.to.toLowerCase();
    this.balances.set(`${transfer.token.toLowerCase()}:${to}`, this.balanceOf(transfer.token, to) + transfer.value);
    if (to === TREASURY)
      this.charges.push({
        token: transfer.token.toLowerCase(),
        payer: transfer.from.toLowerCase(),
        nonce: transfer.nonce.toLowerCase(),
        amount: transfer.value,
        transaction: hash,
        sender: sender.toLowerCase(),
      });
    const token = transfer.token.toLowerCase() as Hex;
    const logs: Log[] = [
      {
        address: token,
        topics: [AUTHORIZATION_USED, topic(transfer.from), transfer.nonce.toLowerCase() as Hex],
        data: "0x",
      },
      {
        address: token,
        topics: [TRANSFER, topic(transfer.from), topic(to)],
        data: numberToHex(transfer.value, { size: 32 }),
      },
    ];
    const receipt: Receipt = { ...base, status: "success", logs };
    this.receipts.set(hash, receipt);
    return receipt;
  }

  /** A batch of ours (aggregate3) mined and reverted whole, out of gas: none of its transfers was tried. */
  revertWhole(hash: Hex, sender: string, relayerNonce: number): void {
    this.block++;
    this.mined.set(sender, Math.max(this.mined.get(sender) ?? 0, relayerNonce + 1));
    const batch = { from: sender as Hex, to: MULTICALL3 as Hex, transactionHash: hash, blockNumber: this.block };
    this.receipts.set(hash, { ...batch, status: "reverted", logs: [] });
  }

  /** The relayer's nonce `relayerNonce` is mined by another of its transactions: the one sent with it never will be. */
  takeRelayerNonce(sender: string, relayerNonce: number): void {
    this.block++;
    this.mined.set(sender, Math.max(this.mined.get(sender) ?? 0, relayerNonce + 1));
  }

  /** The payer cancels its authorization (or spends it elsewhere): the nonce is used without paying us. */
  cancel(token: string, payer: string, nonce: string): void {
    this.block++;
    this.spent.set(authKey(token, payer, nonce), { kind: "canceled", transaction: randomNonce() });
  }

  /** Someone else (the payer, another relayer) submits the authorization as signed: the treasury is paid, not by us. */
  settleElsewhere(transfer: Transfer): void {
    this.execute(transfer, randomNonce(), OUTSIDER);
  }

  /** The payer's authorization is used by someone else's transaction, to another recipient. */
  spendElsewhere(transfer: Transfer): void {
    this.execute({ ...transfer, to: "0x00000000000000000000000000000000000000dd" }, randomNonce(), OUTSIDER);
  }

  receiptOf(hash: Hex): Receipt | undefined {
    return this.receipts.get(hash);
  }

  private answer(): void {
    if (this.down) throw new Error("fetch failed: connect ECONNREFUSED");
  }

  // viem's PublicClient, as far as the core and reconcile.ts read it.
  readonly client = {
    getTransactionReceipt: async ({ hash }: { hash: Hex }) => {
      this.answer();
      const receipt = this.receipts.get(hash);
      if (!receipt) throw new TransactionReceiptNotFoundError({ hash });
      return receipt;
    },
    getBlock: async () => {
      this.answer();
      return { number: this.block, timestamp: this.now() };
    },
    readContract: async ({
      address,
      functionName,
      args,
    }: {
      address: Hex;
      functionName: string;
      args: readonly unknown[];
    }) => {
      this.answer();
      if (functionName === "authorizationState")
        return this.spent.has(authKey(address, args[0] as string, args[1] as string));
      if (functionName === "balanceOf") return this.balanceOf(address, args[0] as string);
      throw new Error(`readContract ${functionName}: not in the fake`);
    },
    getContractEvents: async ({
      eventName,
      args,
    }: {
      address: Hex;
      eventName: string;
      args: { authorizer: string; nonce: string };
    }) => {
      this.answer();
      const events: { transactionHash: Hex }[] = [];
      for (const [key, spent] of this.spent) {
        if (!key.endsWith(`:${args.authorizer}:${args.nonce}`.toLowerCase())) continue;
        if (
          (eventName === "AuthorizationUsed" && spent.kind === "used") ||
          (eventName === "AuthorizationCanceled" && spent.kind === "canceled")
        )
          events.push({ transactionHash: spent.transaction });
      }
      return events;
    },
    getTransactionCount: async ({ address }: { address: Hex }) => {
      this.answer();
      return this.mined.get(address.toLowerCase()) ?? 0;
    },
    getBalance: async () => 10n ** 18n,
  };

  /** The chain as PaymentDeps takes it. */
  get deps(): PaymentDeps["chain"] {
    return this.client as unknown as PaymentDeps["chain"];
  }

  /** The indexed payer state, as if the indexer were at the chain's head. */
  readonly payerState: PayerState = {
    read: async (token, wallet, nonce) => ({
      balance: this.balanceOf(token, wallet),
      nonce: this.spentAs(token, wallet, nonce)?.kind ?? null,
    }),
  };
}

/** Signature checks already made (a signature names its message): the model test presents the same ones in many runs. */
const checked = new Map<string, Promise<boolean>>();
function checkSignature(t: Transfer, requirements: PaymentRequirements, signature: Hex): Promise<boolean> {
  const id = `${requirements.asset}:${t.from}:${t.to}:${t.value}:${t.validAfter}:${t.validBefore}:${t.nonce}:${signature}`;
  let valid = checked.get(id);
  if (!valid) {
    const extra = requirements.extra as { name: string; version: string };
    valid = verifyTypedData({
      address: getAddress(t.from),
      domain: {
        name: extra.name,
        version: extra.version,
        chainId: 42220,
        verifyingContract: getAddress(requirements.asset),
      },
      types: authorizationTypes,
      primaryType: "TransferWithAuthorization",
      message: {
        from: getAddress(t.from),
        to: getAddress(t.to),
        value: t.value,
        validAfter: t.validAfter,
        validBefore: t.validBefore,
        nonce: t.nonce as Hex,
      },
      signature,
    }).catch(() => false);
    checked.set(id, valid);
  }
  return valid;
}

const transferOf = (payload: PaymentPayload, requirements: PaymentRequirements): Transfer => {
  const a = (payload.payload as { authorization: Record<string, string> }).authorization;
  return {
    token: requirements.asset.toLowerCase(),
    from: a.from!,
    to: a.to!,
    value: BigInt(a.value!),
    validAfter: BigInt(a.validAfter!),
    validBefore: BigInt(a.validBefore!),
    nonce: a.nonce!,
  };
};

/**
 * How the next settlement goes. mine: sent and mined; hold: sent, not mined until release() (the
 * outcome unknown meanwhile); throw (remote): the call fails without a verdict, after mining when
 * `thenMine`; refuse: refused before sending (nothing moves); unavailable (self): the RPC did not
 * answer. Failures of ours (self): unfunded: refused before sending, the relayer cannot pay for gas;
 * revert_whole: mined in a batch that reverted whole; drop: sent, and its relayer nonce then mined
 * by another transaction.
 */
export type SettleScript =
  | "mine"
  | "hold"
  | "throw"
  | "throw_after_mining"
  | "refuse"
  | "unavailable"
  | "unfunded"
  | "revert_whole"
  | "drop";

/** The relayer (self-settlement) over the fake chain: records, then sends, as relayer.ts does. */
export class FakeSettler implements Settler {
  readonly relayer = RELAYER;
  script: SettleScript[] = [];
  submits = 0;
  private nonce = 0;
  /** Sent, not mined yet: mined in order by release(). */
  private readonly held: { transfer: Transfer; hash: Hex; nonce: number }[] = [];

  constructor(private readonly chain: FakeChain) {}

  async submit(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    record: (signed: SignedSettlement) => Promise<void>,
  ): Promise<SubmitResult> {
    this.submits++;
    const step = this.script.shift() ?? "mine";
    if (step === "unavailable" || this.chain.down)
      return { sent: false, reason: "connect ECONNREFUSED", unavailable: true };
    if (step === "refuse")
      return { sent: false, reason: "execution reverted: insufficient balance", unavailable: false };
    if (step === "unfunded")
      return { sent: false, reason: "gas required exceeds allowance: 0", unavailable: false, ours: "unfunded" };
    const hash = randomNonce();
    const signed = {
      transaction: hash,
      settler: RELAYER as Hex,
      settlerNonce: this.nonce++,
      rawTransaction: `0x5e${hash.slice(2)}` as Hex,
    };
    await record(signed);
    const transfer = transferOf(payload, requirements);
    // Mined (or its nonce taken) only after the nonces held before it.
    if (step === "revert_whole" || step === "drop") this.release();
    if (step === "revert_whole") this.chain.revertWhole(hash, RELAYER, signed.settlerNonce);
    if (step === "drop") this.chain.takeRelayerNonce(RELAYER, signed.settlerNonce);
    if (step === "revert_whole" || step === "drop") return { sent: true, signed };
    // A nonce cannot be mined before the ones held before it.
    if (step === "hold" || this.held.length > 0) this.held.push({ transfer, hash, nonce: signed.settlerNonce });
    else this.chain.execute(transfer, hash, RELAYER, signed.settlerNonce);
    return { sent: true, signed };
  }

  async receipt(hash: Hex): Promise<TransactionReceipt | undefined> {
    // The fields usedIn reads (status, logs): the rest of a receipt is never looked at.
    return this.chain.receiptOf(hash) as TransactionReceipt | undefined;
  }

  /** The signed transactions sent again (the reconciler's, for a settlement not mined yet). */
  readonly rebroadcasts: Hex[] = [];
  async rebroadcast(raw: Hex): Promise<void> {
    this.rebroadcasts.push(raw);
  }

  /** Mines what was held, in nonce order. */
  release(): void {
    for (const { transfer, hash, nonce } of this.held.splice(0)) this.chain.execute(transfer, hash, RELAYER, nonce);
  }

  get holding(): number {
    return this.held.length;
  }
}

/**
 * A facilitator as x402 defines it, over the fake chain: verify reads the signature, the nonce, the
 * balance and the window; settle (remote mode) follows `script`. With a settler, it is self mode.
 */
export class FakeFacilitator implements FacilitatorClient {
  readonly mode: Facilitator["mode"];
  readonly relayer?: Hex;
  script: SettleScript[] = [];
  verifies = 0;
  settlements = 0;
  down = false;

  constructor(
    private readonly chain: FakeChain,
    readonly settler?: FakeSettler,
  ) {
    this.mode = settler ? "self" : "facilitator";
    this.relayer = settler?.relayer;
  }

  async verify(payload: PaymentPayload, requirements: PaymentRequirements): Promise<VerifyResponse> {
    this.verifies++;
    if (this.down || this.chain.down) throw new Error("fetch failed: connect ECONNREFUSED");
    const t = transferOf(payload, requirements);
    const signature = (payload.payload as { signature: Hex }).signature;
    const valid = await checkSignature(t, requirements, signature);
    const refuse = (invalidReason: string): VerifyResponse => ({ isValid: false, invalidReason, payer: t.from });
    if (!valid) return refuse("invalid_exact_evm_signature");
    if (this.chain.spentAs(t.token, t.from, t.nonce)) return refuse("invalid_exact_evm_nonce_already_used");
    if (t.validBefore <= this.chain.now()) return refuse("invalid_exact_evm_payload_authorization_valid_before");
    if (this.chain.balanceOf(t.token, t.from) < t.value) return refuse("invalid_exact_evm_insufficient_balance");
    return { isValid: true, payer: t.from };
  }

  async settle(payload: PaymentPayload, requirements: PaymentRequirements): Promise<SettleResponse> {
    if (this.settler) throw new Error("self mode settles through its settler");
    this.settlements++;
    const step = this.script.shift() ?? "mine";
    const network = requirements.network;
    if (step === "throw" || this.chain.down) throw new Error("fetch failed: connect ECONNREFUSED");
    if (step === "refuse")
      return { success: false, errorReason: "invalid_exact_evm_insufficient_balance", transaction: "", network };
    const receipt = this.chain.execute(transferOf(payload, requirements));
    if (step === "throw_after_mining") throw new Error("socket hang up");
    if (receipt.status !== "success")
      return { success: false, errorReason: "transaction_failed", transaction: receipt.transactionHash, network };
    return {
      success: true,
      transaction: receipt.transactionHash,
      network,
      payer: transferOf(payload, requirements).from,
    };
  }

  async getSupported() {
    return {
      kinds: [{ x402Version: 2, scheme: "exact", network: "eip155:42220" as const }],
      extensions: [],
      signers: {},
    };
  }
}

/** A service over the fakes: its chain, relayer, facilitator and ledger, and a core on them (another after a crash). */
export class World {
  readonly chain = new FakeChain();
  readonly settler?: FakeSettler;
  readonly facilitator: FakeFacilitator;
  readonly ledger: MemoryLedger;
  readonly settings: PaymentSettings;
  queued = 0;

  constructor(
    readonly mode: Mode,
    options: { caps?: { perPayer: bigint; total: bigint }; ledger?: MemoryLedger } = {},
  ) {
    this.settings = settingsFor(mode, options.caps);
    this.settler = mode === "before-remote" ? undefined : new FakeSettler(this.chain);
    this.facilitator = new FakeFacilitator(this.chain, this.settler);
    // The clock is read at each call: a test that moves Date.now moves the ledger too.
    this.ledger = options.ledger ?? new MemoryLedger({ now: () => Date.now() });
    for (const key of PAYER_KEYS) this.chain.fund(USDT, payerOf(key), 1_000_000n);
  }

  /** A payment core on this world; `ledger` replaces the world's (a wrapper that fails on cue). */
  core(ledger: PaymentDeps["ledger"] = this.ledger, extra: Partial<PaymentDeps> = {}): PaymentCore {
    return new PaymentCore({
      settings: this.settings,
      facilitator: this.facilitator as unknown as Facilitator,
      chain: this.chain.deps,
      ledger,
      receiptWaitMs: 0,
      settlingWaitMs: 0,
      payerState: this.mode === "deferred" ? this.chain.payerState : undefined,
      onQueued: () => this.queued++,
      ...extra,
    });
  }

  row(signed: Signed) {
    return this.ledger.find({
      token: signed.token.address,
      payer: signed.authorization.from,
      nonce: signed.authorization.nonce,
    });
  }

  charged(signed: Signed): Charge[] {
    return this.chain.charges.filter(
      (c) => c.nonce === signed.authorization.nonce.toLowerCase() && c.payer === signed.authorization.from,
    );
  }
}

export const SUBJECT = "0x00000000000000000000000000000000000000b0" as Address;

/** A validated paid request as an adapter hands it over (the screen of `subject` unless `input` says otherwise). */
export const paidRequest = (
  headers: { xPayment?: string; paymentSignature?: string },
  subject: Address = SUBJECT,
  path = "/api/lender/screen",
) => ({
  headers,
  url: `http://service.test${path}`,
  path,
  input: { walletAddress: subject },
  subject,
});

export const ANSWER = { status: 200, type: "application/json", body: '{"paid":"data"}' };

export const claimOf = (admitted: CreditAdmission): Claim => {
  if ("free" in admitted) throw new Error("admitted free");
  if (!("claim" in admitted)) throw new Error(`refused: ${admitted.reply.status} ${admitted.reply.body}`);
  return admitted.claim;
};

/** A paid screen as an adapter makes it: admitted with `headers`, answered, concluded (the conclusion). */
export const payScreen = async (core: PaymentCore, headers: Parameters<typeof paidRequest>[0]) =>
  core.conclude(SCREEN, paidRequest({}), claimOf(await core.admit(SCREEN, paidRequest(headers))), { answer: ANSWER });

/** The stable code of a refusal (402 bodies carry it at the top, others under error). */
export const codeOf = (reply: Reply): string => {
  const body = JSON.parse(reply.body) as { code?: string; error?: { code?: string } };
  return body.code ?? body.error?.code ?? "";
};

/** The purchase route as its declaration makes it: `amount` micro-USD, settled first, never paid from credit. */
const creditRoute = (amount: bigint): PricedRoute => ({
  name: "POST /api/credit",
  description: "Credit",
  microUsd: amount,
  settleFirst: true,
  buysCredit: true,
});

/** Buys `amount` of credit as the purchase handler does: the lot, then the settlement; the token issued. */
export async function buyCredit(world: World, core: PaymentCore, amount: bigint, key: Hex = PAYER_KEYS[0]!) {
  const route = creditRoute(amount);
  const request = { ...paidRequest({}, undefined as never, "/api/credit"), input: { amount: `${amount}` } };
  const signed = await sign(key, { value: amount });
  const claim = claimOf(await core.admit(route, { ...request, headers: xPayment(signed) }));
  await world.ledger.credit.addLot(claim.key, amount, new Date(Date.now() + CREDIT_LIFETIME_MS));
  const token = mintCreditToken();
  await world.ledger.credit.issueToken(claim.billing.payer, hashCreditToken(token));
  const concluded = await core.conclude(route, request, claim, { answer: ANSWER });
  return { token, signed, concluded };
}
