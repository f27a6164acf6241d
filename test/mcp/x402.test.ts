import {
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
} from "@x402/core/http";
import type { PaymentPayload, PaymentRequired, SettleResponse } from "@x402/core/types";
import { describe, expect, it } from "vitest";
import { PAYMENT_META_KEY, PAYMENT_RESPONSE_META_KEY, paymentHeader, toolResult } from "../../api/mcp/x402.ts";

// The x402 MCP transport against the examples of its specification (x402 specs/transports-v2/mcp.md):
// the tool call with a payment in _meta, the payment-required result, and the settlement responses.
const accepted = {
  scheme: "exact",
  network: "eip155:84532",
  amount: "10000",
  asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
  payTo: "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
  maxTimeoutSeconds: 60,
  extra: { name: "USDC", version: "2" },
};
const resource = {
  url: "mcp://tool/financial_analysis",
  description: "Advanced financial analysis tool",
  mimeType: "application/json",
};
/** The spec's "Tool Call with Payment": params._meta["x402/payment"]. */
const specPayment = {
  x402Version: 2,
  resource,
  accepted,
  payload: {
    signature:
      "0x2d6a7588d6acca505cbf0d9a4a227e0c52c6c34008c8e8986a1283259764173608a2ce6496642e377d6da8dbbf5836e9bd15092f9ecab05ded3d6293af148b571c",
    authorization: {
      from: "0x857b06519E91e3A54538791bDbb0E22373e36b66",
      to: "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
      value: "10000",
      validAfter: "1740672089",
      validBefore: "1740672154",
      nonce: "0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480",
    },
  },
} as unknown as PaymentPayload;
/** The spec's "Successful Settlement": result._meta["x402/payment-response"]. */
const specSettlement = {
  success: true,
  transaction: "0x1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef",
  network: "eip155:84532",
  payer: "0x857b06519E91e3A54538791bDbb0E22373e36b66",
} as SettleResponse;

const tool = { name: "financial_analysis", description: "Advanced financial analysis tool" };
const discovery = { bazaar: { info: { input: { type: "mcp", toolName: "financial_analysis" } } } };

/** The route's 402, as the HTTP transport gives it (the v2 PaymentRequired in PAYMENT-REQUIRED, our v1 body with its code). */
const http402 = (code: string, message: string) => {
  const required: PaymentRequired = {
    x402Version: 2,
    error: message,
    resource: {
      url: "http://127.0.0.1:42069/api/analysis",
      description: "Advanced financial analysis tool",
      mimeType: "application/json",
    },
    accepts: [accepted as PaymentRequired["accepts"][number]],
    extensions: { "payment-identifier": { info: { required: false } }, "sign-in-with-x": { info: {} } },
  };
  return {
    status: 402,
    headers: new Headers({ "payment-required": encodePaymentRequiredHeader(required) }),
    body: JSON.stringify({ x402Version: 1, error: message, code, accepts: [] }),
  };
};

describe("the x402 MCP transport", () => {
  it("hands the payment in _meta to the payment core as the PAYMENT-SIGNATURE header", () => {
    const header = paymentHeader({ [PAYMENT_META_KEY]: specPayment, progressToken: 1 });
    expect(decodePaymentSignatureHeader(header!)).toEqual(specPayment);
    expect(paymentHeader({})).toBeUndefined();
    expect(paymentHeader(undefined)).toBeUndefined();
  });

  it("keeps the payment identifier of the payment's extensions and leaves the echoed rest out", () => {
    const id = { info: { required: false, id: "pay_0123456789abcdef" } };
    const echoed = { ...specPayment, extensions: { "payment-identifier": id, bazaar: { big: "x".repeat(20_000) } } };
    const decoded = decodePaymentSignatureHeader(paymentHeader({ [PAYMENT_META_KEY]: echoed })!);
    expect(decoded.extensions).toEqual({ "payment-identifier": id });
  });

  it("answers an unpaid call with the spec's payment-required result", () => {
    const result = toolResult(tool, http402("payment_required", "Payment required to access this resource"), discovery);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      x402Version: 2,
      error: "Payment required to access this resource",
      resource,
      accepts: [accepted],
    });
    expect(result.structuredContent!.code).toBe("payment_required");
    // The tool's own discovery metadata and the payment identifier; signing in is HTTP's.
    expect(result.structuredContent!.extensions).toEqual({
      "payment-identifier": { info: { required: false } },
      ...discovery,
    });
    expect(result.content).toHaveLength(1);
    expect(result.content[0]!.type).toBe("text");
    expect(JSON.parse(result.content[0]!.text)).toEqual(result.structuredContent);
    expect(result._meta).toBeUndefined();
  });

  it("carries the settlement of a paid answer in _meta, as the spec's successful settlement", () => {
    const answer = { verdict: "strong" };
    const result = toolResult(
      tool,
      {
        status: 200,
        headers: new Headers({ "payment-response": encodePaymentResponseHeader(specSettlement) }),
        body: JSON.stringify(answer),
      },
      discovery,
    );
    expect(result.isError).toBeUndefined();
    expect(result.structuredContent).toEqual(answer);
    expect(result.content).toEqual([{ type: "text", text: JSON.stringify(answer) }]);
    expect(result._meta).toEqual({ [PAYMENT_RESPONSE_META_KEY]: specSettlement });
  });

  it("gives no answer when the settlement failed after the tool ran, and says why as the spec's settlement failure", () => {
    const result = toolResult(tool, http402("settlement_failed", "The payment could not be settled"), discovery);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      x402Version: 2,
      resource,
      accepts: [accepted],
      [PAYMENT_RESPONSE_META_KEY]: {
        success: false,
        errorReason: "settlement_failed",
        transaction: "",
        network: "eip155:84532",
      },
    });
    expect(result.content[0]!.text).not.toContain("verdict");
    expect(JSON.parse(result.content[0]!.text)).toEqual(result.structuredContent);
  });

  it("answers any other refusal with isError and the route's error body", () => {
    const body = { error: { code: "invalid_address", message: "address: not an address" } };
    const result = toolResult(tool, { status: 400, headers: new Headers(), body: JSON.stringify(body) }, discovery);
    expect(result).toEqual({
      isError: true,
      structuredContent: body,
      content: [{ type: "text", text: JSON.stringify(body) }],
    });
  });
});
