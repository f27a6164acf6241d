import type { RouteHandler } from "@hono/zod-openapi";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, jsonBody } from "../http/declare.ts";
import { walletRead } from "../http/payment.ts";
import { indexedWallet } from "../wallet/indexed.ts";
import { lenderScreenResultSchema, screenRequestSchema } from "./schema.ts";
import { type ScreenDeps, screenWallets } from "./screen.ts";

export const screenRoute = declareRoute("screen", {
  method: "post",
  path: "/api/lender/screen",
  tags: ["Lender"],
  summary: "Screen a borrower's wallet",
  description:
    "The LenderScreenResult of the service interface: trust, scores, income, loan capacity and passport status, from the indexed chain.",
  request: { body: jsonBody(screenRequestSchema, "The borrower's wallet, and the paying lender's when it differs") },
  ok: lenderScreenResultSchema,
  errors: { 404: ["wallet_not_indexed"] },
  middleware: [indexedWallet],
  payment: walletRead,
});

/** The screen itself, after validation and payment (exported so benchmarks can time it unpaid). */
export function screenHandler(deps: ScreenDeps): RouteHandler<typeof screenRoute, AppEnv> {
  return async (c) => {
    const { walletAddress } = c.req.valid("json");
    const [result] = await screenWallets(deps, [walletAddress], {
      baseUrl: new URL(c.req.url).origin,
      billing: c.var.billing,
    });
    return c.json(result!, 200);
  };
}
