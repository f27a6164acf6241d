import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  encodePaymentSignatureHeader,
} from "@x402/core/http";
import type { PaymentPayload, PaymentRequired, SettleResponse } from "@x402/core/types";
import { PAYMENT_IDENTIFIER } from "@x402/extensions/payment-identifier";
import { SIGN_IN_WITH_X } from "@x402/extensions/sign-in-with-x";

// The x402 MCP transport (x402 specs/transports-v2/mcp.md) over the service's HTTP answers: a paid
// tool answers what its route answers, with the payment moved from HTTP headers to MCP `_meta`.

/** Where a tool call carries its payment: params._meta["x402/payment"], a PaymentPayload. */
export const PAYMENT_META_KEY = "x402/payment";
/** Where a tool result carries the settlement: _meta["x402/payment-response"], a SettleResponse. */
export const PAYMENT_RESPONSE_META_KEY = "x402/payment-response";

/** A tool's resource in payment requirements. */
const toolResourceUrl = (tool: string) => `mcp://tool/${tool}`;

/** The MCP tool result (CallToolResult) the transport produces. */
export type ToolResult = {
  content: { type: "text"; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
};

/** An HTTP answer of the tool's route. */
export type RouteAnswer = { status: number; headers: Headers; body: string };

/**
 * The PAYMENT-SIGNATURE header for the payment a tool call carries (undefined: none), with the one
 * extension the service honours in a payment (payment-identifier). Clients echo every extension of
 * the PaymentRequired, discovery metadata included (for facilitators' catalogues), which would not
 * fit a header. A payload that is not a PaymentPayload is still handed on: the payment core
 * refuses it as HTTP would.
 */
export function paymentHeader(meta: Record<string, unknown> | undefined): string | undefined {
  const payment = meta?.[PAYMENT_META_KEY];
  if (payment === undefined) return undefined;
  const { extensions, ...rest } = (payment ?? {}) as PaymentPayload;
  const identifier = extensions?.[PAYMENT_IDENTIFIER];
  return encodePaymentSignatureHeader(
    (identifier === undefined ? rest : { ...rest, extensions: { [PAYMENT_IDENTIFIER]: identifier } }) as PaymentPayload,
  );
}

const json = (text: string): Record<string, unknown> | undefined => {
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
};

const result = (structured: Record<string, unknown> | undefined, text: string, extra: Partial<ToolResult> = {}) => ({
  content: [{ type: "text" as const, text }],
  ...(structured ? { structuredContent: structured } : {}),
  ...extra,
});

/**
 * The tool result for the route's answer:
 * - 2xx: the answer as structuredContent and text, and the settlement in _meta["x402/payment-response"];
 * - 402: isError, structuredContent = the x402 v2 PaymentRequired for mcp://tool/<name> (and the
 *   same JSON as text), with the HTTP body's stable `code`, and the tool's own discovery declaration
 *   as `bazaar`; a settlement that failed after the route ran also names
 *   it in "x402/payment-response", and carries no answer;
 * - any other status: isError with the route's error body ({error: {code, message}}).
 */
export function toolResult(
  tool: { name: string; description: string },
  answer: RouteAnswer,
  discovery: Record<string, unknown>,
): ToolResult {
  if (answer.status >= 200 && answer.status < 300) {
    const receipt = answer.headers.get("payment-response");
    const settlement: SettleResponse | undefined = receipt ? decodePaymentResponseHeader(receipt) : undefined;
    return result(
      json(answer.body),
      answer.body,
      settlement ? { _meta: { [PAYMENT_RESPONSE_META_KEY]: settlement } } : {},
    );
  }
  const header = answer.headers.get("payment-required");
  if (answer.status !== 402 || !header) return result(json(answer.body), answer.body, { isError: true });
  const required: PaymentRequired = decodePaymentRequiredHeader(header);
  const code = (json(answer.body) as { code?: string } | undefined)?.code;
  // Signing in is an HTTP header's business: the tool's extensions are the payment identifier and its discovery.
  const { [SIGN_IN_WITH_X]: _, ...extensions } = required.extensions ?? {};
  const paymentRequired = {
    ...required,
    ...(code ? { code } : {}),
    resource: { url: toolResourceUrl(tool.name), description: tool.description, mimeType: "application/json" },
    extensions: { ...extensions, ...discovery },
    ...(code === "settlement_failed" || code === "unsettled_payment"
      ? {
          [PAYMENT_RESPONSE_META_KEY]: {
            success: false,
            errorReason: code,
            transaction: "",
            network: required.accepts[0]?.network ?? "",
          },
        }
      : {}),
  };
  return result(paymentRequired, JSON.stringify(paymentRequired), { isError: true });
}
