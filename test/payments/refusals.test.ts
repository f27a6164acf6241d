import type { Hex } from "viem";
import { describe, expect, it } from "vitest";
import {
  chainSeconds,
  codeOf,
  PAYER_KEYS,
  paidRequest,
  SCREEN,
  SUBJECT,
  sign,
  TREASURY,
  USDC,
  USDT,
  v1Payment,
  v2Payment,
  World,
  xPayment,
} from "./fakes.ts";

// test/db/payments.test.ts's table of bad payments, against the core and its fakes: every refusal
// before a claim, with its status and code; nothing claimed, nothing charged, no handler run. The
// chain's own verdicts (a real signature check, a simulated transfer) stay in the end-to-end table.

const [payer, other, broke] = PAYER_KEYS;
const world = new World("before-self");
world.chain.fund(USDT, (await sign(broke)).authorization.from, 0n);
const used = await sign(payer);
const cancelled = await sign(payer);
world.chain.execute({ token: USDT.address, ...used.authorization });
world.chain.cancel(USDT.address, cancelled.authorization.from, cancelled.authorization.nonce);

type Headers = { xPayment?: string; paymentSignature?: string };
const valid = async () => JSON.parse(xPayment(await sign(payer)).xPayment) as Record<string, unknown>;
const changed = async (fields: Record<string, unknown>): Promise<Headers> => ({
  xPayment: JSON.stringify({ ...(await valid()), ...fields }),
});
const b64 = (value: unknown) =>
  Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64");
const spec = async (fields: Parameters<typeof sign>[1] = {}, key: Hex = payer) => xPayment(await sign(key, fields));
const now = () => chainSeconds();

type BadCase = [name: string, headers: () => Promise<Headers>, status: number, code: string, caller?: Hex];
const badPayments: BadCase[] = [
  ["missing header", async () => ({}), 402, "payment_required"],
  ["X-PAYMENT not JSON", async () => ({ xPayment: "{from: lender}" }), 400, "payment_malformed"],
  ["X-PAYMENT not base64", async () => ({ xPayment: "%%% not base64 %%%" }), 400, "payment_malformed"],
  ["base64 of text that is not JSON", async () => ({ xPayment: b64("hello there") }), 400, "payment_malformed"],
  [
    "base64 JSON of an unknown x402Version",
    async () => ({ xPayment: b64({ x402Version: 3 }) }),
    400,
    "payment_malformed",
  ],
  ["base64 JSON array", async () => ({ xPayment: b64([1, 2]) }), 400, "payment_malformed"],
  [
    "v1 without payload",
    async () => ({ xPayment: b64({ x402Version: 1, scheme: "exact", network: "celo" }) }),
    400,
    "payment_malformed",
  ],
  [
    "v2 without accepted",
    async () => ({ paymentSignature: b64({ x402Version: 2, payload: {} }) }),
    400,
    "payment_malformed",
  ],
  [
    "PAYMENT-SIGNATURE holding raw JSON",
    async () => ({ paymentSignature: JSON.stringify(await valid()) }),
    400,
    "payment_malformed",
  ],
  ["empty X-PAYMENT", async () => ({ xPayment: "" }), 400, "payment_malformed"],
  ["both headers at once", async () => ({ ...(await spec()), paymentSignature: "abc" }), 400, "payment_malformed"],
  ["value as a number", () => changed({ value: 10000 }), 400, "payment_malformed"],
  ["value as hex", () => changed({ value: "0x2710" }), 400, "payment_malformed"],
  ["value with decimals", () => changed({ value: "10000.5" }), 400, "payment_malformed"],
  ["value empty", () => changed({ value: "" }), 400, "payment_malformed"],
  ["value beyond uint256", () => changed({ value: "9".repeat(78) }), 400, "payment_malformed"],
  ["validBefore negative", () => changed({ validBefore: "-1" }), 400, "payment_malformed"],
  ["validAfter as a number", () => changed({ validAfter: 0 }), 400, "payment_malformed"],
  ["nonce too short", () => changed({ nonce: "0x1234" }), 400, "payment_malformed"],
  ["from not an address", () => changed({ from: "lender" }), 400, "payment_malformed"],
  ["to missing", () => changed({ to: undefined }), 400, "payment_malformed"],
  ["token missing", () => changed({ token: undefined }), 400, "payment_malformed"],
  ["signature missing", () => changed({ signature: undefined }), 400, "payment_malformed"],
  ["signature not hex", () => changed({ signature: "signed-by-me" }), 400, "payment_malformed"],
  ["signature of 64 bytes", () => changed({ signature: `0x${"ab".repeat(64)}` }), 400, "payment_malformed"],
  ["header too large", () => changed({ memo: "x".repeat(9000) }), 431, "payment_header_too_large"],
  ["random signature", () => changed({ signature: `0x${"11".repeat(65)}` }), 402, "invalid_signature"],
  [
    "signature with a byte of r flipped",
    async () => {
      const o = await valid();
      const sig = String(o.signature);
      return changed({
        signature: `0x${(Number.parseInt(sig.slice(2, 4), 16) ^ 0xff).toString(16).padStart(2, "0")}${sig.slice(4)}`,
      });
    },
    402,
    "invalid_signature",
  ],
  [
    "signed by someone else",
    async () => spec({ from: (await sign(payer)).authorization.from }, other),
    402,
    "invalid_signature",
  ],
  [
    "from the zero address",
    () => changed({ from: "0x0000000000000000000000000000000000000000" }),
    402,
    "invalid_signature",
    "0x0000000000000000000000000000000000000000",
  ],
  ["value changed after signing", () => changed({ value: "10001" }), 402, "invalid_signature"],
  ["signed for another chain", async () => xPayment(await sign(payer, {}, USDT, 1)), 402, "invalid_signature"],
  [
    "signed over USDT's domain, presented as USDC",
    async () => xPayment({ ...(await sign(payer)), token: USDC }),
    402,
    "invalid_signature",
  ],
  [
    "v1 with a bad signature",
    async () => v1Payment({ ...(await sign(payer)), signature: `0x${"22".repeat(65)}` }),
    402,
    "invalid_signature",
  ],
  [
    "v2 on another network",
    async () => v2Payment(await sign(payer), USDT.address, "eip155:1"),
    402,
    "unsupported_network",
  ],
  ["v1 on another network", async () => v1Payment(await sign(payer), "base"), 402, "unsupported_network"],
  [
    "v2 with another scheme",
    async () => v2Payment(await sign(payer), USDT.address, "eip155:42220", "upto"),
    402,
    "unsupported_scheme",
  ],
  [
    "a token that is not accepted",
    () => changed({ token: "0x1111111111111111111111111111111111111111" }),
    402,
    "unsupported_token",
  ],
  [
    "v2 naming a token that is not accepted",
    async () => v2Payment(await sign(payer), "0x2222222222222222222222222222222222222222"),
    402,
    "unsupported_token",
  ],
  [
    "paying the wrong recipient",
    () => spec({ to: "0x00000000000000000000000000000000000000bb" }),
    402,
    "wrong_recipient",
  ],
  [
    "v2 paying the wrong recipient",
    async () => v2Payment(await sign(payer, { to: "0x00000000000000000000000000000000000000bb" })),
    402,
    "wrong_recipient",
  ],
  ["underpaid by one unit", () => spec({ value: 9_999n }), 402, "insufficient_amount"],
  ["zero value", () => spec({ value: 0n }), 402, "insufficient_amount"],
  ["v1 underpaid", async () => v1Payment(await sign(payer, { value: 5_000n })), 402, "insufficient_amount"],
  ["over the per-call maximum", () => spec({ value: 2_000_000n }), 402, "amount_too_large"],
  ["expired", () => spec({ validBefore: now() - 10n }), 402, "authorization_expired"],
  ["expiring within seconds", () => spec({ validBefore: now() + 2n }), 402, "authorization_expired"],
  ["not yet valid", () => spec({ validAfter: now() + 120n }), 402, "authorization_not_yet_valid"],
  ["validity window too long", () => spec({ validBefore: now() + 86_400n }), 402, "authorization_window_too_long"],
  ["nonce already used on chain", async () => xPayment(used), 402, "nonce_already_used"],
  ["nonce cancelled on chain", async () => xPayment(cancelled), 402, "nonce_already_used"],
  ["payer without balance", () => spec({}, broke), 402, "insufficient_balance", (await sign(broke)).authorization.from],
  [
    "callerAddress is not the payer",
    () => spec(),
    400,
    "caller_mismatch",
    "0x000000000000000000000000000000000000ca11",
  ],
];

describe("bad payments", () => {
  it(`refuses ${badPayments.length} bad payments with their status and code, claiming nothing and charging nothing`, async () => {
    const core = world.core();
    const charges = world.chain.charges.length;
    for (const [name, headers, status, code, caller] of badPayments) {
      const request = {
        ...paidRequest(await headers(), SUBJECT),
        caller: caller ?? (await sign(payer)).authorization.from,
      };
      const admitted = await core.admit(SCREEN, request);
      if (!("reply" in admitted)) throw new Error(`${name}: claimed`);
      expect(`${name}: ${admitted.reply.status} ${codeOf(admitted.reply)}`).toBe(`${name}: ${status} ${code}`);
      if (status === 402) {
        // Any x402 client can act on it: the v1 body and the v2 header, both tokens offered.
        expect(JSON.parse(admitted.reply.body).accepts, name).toHaveLength(2);
        expect(admitted.reply.headers["PAYMENT-REQUIRED"], name).toBeTruthy();
      }
    }
    expect(world.ledger.snapshot()).toEqual([]);
    expect(world.chain.charges).toHaveLength(charges);
    expect(TREASURY).toBe(world.settings.payTo);
  });
});
