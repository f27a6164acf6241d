import { createRoute, type OpenAPIHono, type RouteConfig } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { z } from "zod";
import { errorBodySchema } from "../../shared/errors.ts";
import { advertiseDiscovery } from "../discovery/bazaar.ts";
import { brief } from "../discovery/brief.ts";
import { INDEX_NOT_CURRENT, indexCurrent } from "../indexing/gate.ts";
import { unitsToUsd } from "../money.ts";
import { PAYMENT_ERRORS, type PaymentErrorCode } from "../payments/errors.ts";
import { freeReadRule } from "../payments/free-read.ts";
import type { Reply } from "../payments/priced-route.ts";
import { PRICES, type RouteId } from "../payments/prices.ts";
import { paymentRequiredBodySchema } from "../payments/schema.ts";
import {
  SIGN_IN_ERRORS,
  SIGN_IN_HEADER,
  type SignInGrants,
  type SignInRoute,
  signInRule,
} from "../payments/sign-in.ts";
import type { AppEnv } from "./app-env.ts";
import { BODY_LIMIT_BYTES } from "./limits.ts";
import { beforeValidation } from "./mount.ts";
import { OWNER_SIGN_IN_ERRORS, ownerSignIn, ownerSignInRule } from "./owner.ts";
import { type PaymentHooks, payment } from "./payment.ts";
import { unpaidProbe } from "./probe.ts";
import { freeRateLimit } from "./rate-limit.ts";

type Method = "get" | "post" | "delete";
type ErrorStatus = 400 | 401 | 404 | 409 | 413 | 415 | 422 | 429 | 431 | 500 | 503;

/** A route as its module declares it: the route itself, plus what the declaration adds for every route. */
type Also = Record<number, { description: string; schema: z.ZodType }>;
type JsonResponse<S extends z.ZodType> = { description: string; content: { "application/json": { schema: S } } };
/** A 200 that is not JSON (a file served as it was stored): one schema per media type. */
type OkContent = Record<string, z.ZodType>;
type OkResponse<S extends z.ZodType, C extends OkContent | undefined> = [C] extends [OkContent]
  ? { description: string; content: { [K in keyof C]: { schema: C[K] } } }
  : JsonResponse<S>;

/** The declared route's type: what handlers are checked against (request schemas and the answers they may give). */
export type DeclaredRoute<
  M extends Method,
  P extends string,
  Req extends RouteConfig["request"],
  S extends z.ZodType,
  A extends Also,
  C extends OkContent | undefined = undefined,
> = Omit<RouteConfig, "request" | "responses"> & {
  method: M;
  path: P;
  request: Req;
  responses: { 200: OkResponse<S, C> } & {
    [K in keyof A]: {
      description: string;
      content: { "application/json": { schema: A[K] extends { schema: infer T } ? T : never } };
    };
  };
  getRoutingPath(): string;
};

type Declaration<
  M extends Method,
  P extends string,
  Req extends RouteConfig["request"],
  S extends z.ZodType,
  A extends Also,
  C extends OkContent | undefined,
> = {
  method: M;
  path: P;
  summary: string;
  description?: string;
  tags: string[];
  request?: Req;
  /** The 200 answer (JSON). */
  ok?: S;
  /** Instead of `ok`: a 200 that is not JSON, by media type (e.g. GET /ipfs/{cid}: PDF, CSV or JSON as pinned). */
  okContent?: C;
  /** Error codes the route itself can give, by status (validation, payment and the rest are added here). */
  errors?: Partial<Record<ErrorStatus, readonly string[]>>;
  /** Checks run after validation and before payment (e.g. the indexed-wallet check). */
  middleware?: MiddlewareHandler<AppEnv>[];
  /** A free route limited per client (FREE_RATE_LIMIT_PER_MINUTE): 429 `rate_limited` with Retry-After past it. */
  rateLimited?: boolean;
  /** A paid call that is free to a payer who paid for one of these routes about the same wallet recently. */
  freeAfter?: readonly { method: string; path: string; summary?: string }[];
  /** A paid call that is free to a caller signed in (SIGN-IN-WITH-X) as the wallet it is about, limited per wallet. */
  ownWalletFree?: boolean;
  /**
   * A free route that answers its owner only: the caller proves its wallet with SIGN-IN-WITH-X
   * (`c.var.owner`), else 401 `sign_in_required` with a challenge to sign (api/http/owner.ts).
   */
  owner?: boolean;
  payment?: PaymentHooks;
  /** Other answers that are not errors (e.g. health's 503, which carries the same report). */
  alsoAnswers?: A;
};

export const routeName = (route: { method: string; path: string }) => `${route.method.toUpperCase()} ${route.path}`;

/** A JSON request body, as routes declare it. */
export const jsonBody = <S extends z.ZodType>(schema: S, description: string) => ({
  required: true as const,
  description: `${description} (JSON, at most ${BODY_LIMIT_BYTES} bytes)`,
  content: { "application/json": { schema } },
});

const errorResponse = (codes: readonly string[], extra: z.ZodRawShape = {}) => ({
  description: `Error codes: ${codes.join(", ")}`,
  content: {
    "application/json": {
      schema: errorBodySchema.extend({
        error: errorBodySchema.shape.error.extend({ code: z.enum(codes as [string, ...string[]]) }),
        ...extra,
      }),
    },
  },
});

/** A 401 of an owner route carries a fresh sign-in-with-x challenge, as the 402s do. */
const signInChallenge = {
  extensions: z
    .record(z.string(), z.unknown())
    .optional()
    .describe("`sign-in-with-x`: a fresh challenge to sign and send back in SIGN-IN-WITH-X"),
};

const signInCodes = Object.keys(SIGN_IN_ERRORS);

/** The security schemes paid routes name, registered once on the app's document. */
export function registerPaymentSchemes(registry: OpenAPIHono["openAPIRegistry"]) {
  registry.registerComponent("securitySchemes", "xPayment", {
    type: "apiKey",
    in: "header",
    name: "X-PAYMENT",
    description:
      "The service's payment JSON (from, to, value, validAfter, validBefore, nonce, signature, token), or x402 v1 base64",
  });
  registry.registerComponent("securitySchemes", "paymentSignature", {
    type: "apiKey",
    in: "header",
    name: "PAYMENT-SIGNATURE",
    description: "x402 v2 base64",
  });
  registry.registerComponent("securitySchemes", "creditToken", {
    type: "http",
    scheme: "bearer",
    description:
      "Prepaid credit (POST /api/credit): `Authorization: Bearer crd_…` pays the call from the token owner's balance instead of a payment",
  });
  registry.registerComponent("securitySchemes", "signInWithX", {
    type: "apiKey",
    in: "header",
    name: SIGN_IN_HEADER,
    description:
      "x402 sign-in-with-x: base64 JSON of a CAIP-122 (SIWE) message signed by your wallet, from the `sign-in-with-x` challenge of a 402 answer (or of an owner route's 401). No payment; see x-sign-in.",
  });
}

const paymentCodes = (status: number) =>
  (Object.entries(PAYMENT_ERRORS) as [PaymentErrorCode, number][])
    .filter(([, s]) => s === status)
    .map(([code]) => code);

/**
 * One route, declared once: method, path, request and response schemas, middleware, tags and
 * docs. Validation, the handler's types and the OpenAPI operation (price, 402 answer, every error
 * code) all come from it; its price comes from the price table under `id`.
 */
export function declareRoute<
  M extends Method,
  P extends string,
  Req extends RouteConfig["request"] = undefined,
  S extends z.ZodType = z.ZodType,
  A extends Also = {},
  C extends OkContent | undefined = undefined,
>(id: RouteId, d: Declaration<M, P, Req, S, A, C>): DeclaredRoute<M, P, Req, S, A, C> {
  const microUsd = PRICES[id];
  const paid = microUsd > 0n;
  const freeRead = d.freeAfter && { after: d.freeAfter.map(routeName), rule: freeReadRule(d.freeAfter) };
  // Sign-in-with-x applies where it can make the call free: the free read, one's own wallet.
  const signIn: SignInGrants | undefined =
    paid && (freeRead || d.ownWalletFree)
      ? { freeRead: Boolean(freeRead), ownWallet: Boolean(d.ownWalletFree) }
      : undefined;
  const priced: SignInRoute = {
    name: routeName(d),
    description: brief(d.description ?? d.summary),
    microUsd,
    ...(freeRead ? { freeRead } : {}),
    ...(signIn ? { signIn } : {}),
    ...(d.payment?.settleFirst ? { settleFirst: true } : {}),
    ...(d.payment?.buysCredit ? { buysCredit: true } : {}),
  };
  const creditAccepted = paid && !d.payment?.buysCredit;

  const codes: Partial<Record<ErrorStatus, string[]>> = {};
  const add = (status: ErrorStatus, ...more: readonly string[]) =>
    (codes[status] = [...new Set([...(codes[status] ?? []), ...more])]);
  for (const [status, list] of Object.entries(d.errors ?? {})) add(Number(status) as ErrorStatus, ...list);
  if (d.request?.body) {
    add(400, "invalid_json", "invalid_request");
    add(413, "body_too_large");
    add(415, "unsupported_media_type");
  }
  if (paid) for (const status of [400, 409, 431, 503] as const) add(status, ...paymentCodes(status));
  if (creditAccepted) add(401, ...paymentCodes(401));
  if (paid) add(503, INDEX_NOT_CURRENT);
  if (d.rateLimited || signIn?.ownWallet) add(429, "rate_limited");
  if (d.owner) add(401, ...Object.keys(OWNER_SIGN_IN_ERRORS));
  add(500, "internal_error");

  // A 402 names the route's discovery metadata (Bazaar), built from the declaration below.
  const advertise = (reply: Reply, path: string): Reply => advertiseDiscovery(reply, route, path);
  const route: RouteConfig = createRoute({
    method: d.method,
    path: d.path,
    operationId: id,
    summary: d.summary,
    description: d.description ?? d.summary,
    tags: d.tags,
    request: d.request as Req,
    // A route priced per unit names it: `per: "wallet"` means amountUnits is each wallet's price.
    "x-price": {
      amountUnits: microUsd.toString(),
      usd: unitsToUsd(microUsd),
      ...(d.payment?.units ? { per: d.payment.units.name } : {}),
      ...(freeRead ? { freeWhen: freeRead.rule } : {}),
    },
    ...(signIn ? { "x-sign-in": signInRule(signIn) } : {}),
    ...(d.owner ? { "x-sign-in": ownerSignInRule } : {}),
    ...(paid
      ? {
          security: [
            { xPayment: [] },
            { paymentSignature: [] },
            ...(creditAccepted ? [{ creditToken: [] }] : []),
            ...(signIn || creditAccepted ? [{ signInWithX: [] }] : []),
          ],
        }
      : {}),
    ...(d.owner ? { security: [{ signInWithX: [] }] } : {}),
    responses: {
      200: {
        description: paid
          ? "The answer; PAYMENT-RESPONSE and X-PAYMENT-RESPONSE carry the settlement receipt"
          : "The answer",
        content: d.okContent
          ? Object.fromEntries(Object.entries(d.okContent).map(([type, schema]) => [type, { schema }]))
          : { "application/json": { schema: d.ok } },
      },
      ...(paid
        ? {
            402: {
              description: `Payment required or refused (codes: ${[...paymentCodes(402).filter((code) => creditAccepted || !code.startsWith("credit_")), ...(signIn || creditAccepted ? signInCodes : [])].join(", ")}). The body is x402 v1; the PAYMENT-REQUIRED header carries the v2 requirements${signIn ? "; both carry a fresh sign-in-with-x challenge in extensions" : ""}.`,
              headers: z.object({
                "PAYMENT-REQUIRED": z
                  .string()
                  .describe("base64 JSON of the x402 v2 PaymentRequired: the accepted tokens, amounts and treasury"),
              }),
              content: { "application/json": { schema: paymentRequiredBodySchema } },
            },
          }
        : {}),
      ...Object.fromEntries(
        Object.entries(codes).map(([status, list]) => [
          status,
          errorResponse(list, status === "401" ? signInChallenge : {}),
        ]),
      ),
      ...Object.fromEntries(
        Object.entries(d.alsoAnswers ?? {}).map(([status, a]) => [
          status,
          { description: a.description, content: { "application/json": { schema: a.schema } } },
        ]),
      ),
    },
    // Bad input is refused first (validation, the route's own checks), then an index that cannot back the answer, then the payment.
    middleware: [
      ...(d.rateLimited ? [freeRateLimit] : []),
      ...(d.owner ? [ownerSignIn(priced)] : []),
      ...(d.middleware ?? []),
      ...(paid ? [indexCurrent, payment(priced, d.payment, advertise)] : []),
    ],
  } as RouteConfig);
  if (paid) beforeValidation(route, unpaidProbe(priced, advertise));
  return route as unknown as DeclaredRoute<M, P, Req, S, A, C>;
}
