import type { OpenAPIHonoOptions } from "@hono/zod-openapi";
import type { z } from "zod";
import { describeIssues } from "../../config/errors.ts";
import { ApiError } from "../../shared/errors.ts";
import type { AppEnv } from "./app-env.ts";

type Issue = z.core.$ZodIssue;

/**
 * Fields whose refusal has a code of its own, wherever they appear: a field means the same on
 * every route. `listAs` names the details key that lists the allowed values of an enum.
 */
const FIELD_ERRORS: Record<
  string,
  { status: 400 | 404; code: string; what: string; listAs?: string; enumOnly?: true; givenOnly?: true }
> = {
  address: { status: 400, code: "invalid_address", what: "address" },
  signal: { status: 404, code: "unknown_signal", what: "signal", listAs: "signals", enumOnly: true },
  // Chat's question when given but empty, too long or not text (a missing one is the request's shape: invalid_request).
  message: { status: 400, code: "invalid_message", what: "message", givenOnly: true },
  fields: { status: 400, code: "unknown_field", what: "field", listAs: "allowed", enumOnly: true },
  period: { status: 400, code: "invalid_period", what: "period", listAs: "allowed", enumOnly: true },
  cid: { status: 400, code: "invalid_cid", what: "CID" },
  id: { status: 400, code: "invalid_report_id", what: "passport id" },
};

/** The error for a request that failed its route's schema: 400 `invalid_request`, or a field's own code. */
function validationError(issues: readonly Issue[], input: unknown): ApiError {
  for (const issue of issues) {
    const rule = FIELD_ERRORS[String(issue.path[0])];
    if (!rule || (rule.enumOnly && issue.code !== "invalid_value")) continue;
    if (rule.givenOnly && (input as Record<PropertyKey, unknown> | null | undefined)?.[issue.path[0]!] === undefined)
      continue;
    if (!rule.listAs) return new ApiError(rule.status, rule.code, describeIssues([issue]), issues);
    const allowed = (issue as { values?: unknown[] }).values ?? [];
    const given = issue.path.reduce<unknown>(
      (value, key) => (value as Record<PropertyKey, unknown> | undefined)?.[key],
      input,
    );
    return new ApiError(
      rule.status,
      rule.code,
      `Unknown ${rule.what} "${String(given)}". Allowed: ${allowed.join(", ")}.`,
      { [rule.listAs]: allowed },
    );
  }
  return new ApiError(400, "invalid_request", describeIssues(issues), issues);
}

/** OpenAPIHono's defaultHook: a request that fails validation is refused before anything else runs (never a charge). */
export const validationHook: NonNullable<OpenAPIHonoOptions<AppEnv>["defaultHook"]> = (result) => {
  if (!result.success) throw validationError(result.error.issues, (result as { data?: unknown }).data);
};
