import type { Context } from "hono";
import type { z } from "zod";
import { describeIssues } from "../../config/errors.ts";
import { ApiError } from "./errors.ts";

/** Parses a JSON body against a zod schema: 400 `invalid_json` or `invalid_request` naming the fields. */
export async function jsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S>> {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new ApiError(400, "invalid_json", "The request body must be JSON (Content-Type: application/json).");
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new ApiError(400, "invalid_request", describeIssues(parsed.error.issues), parsed.error.issues);
  return parsed.data;
}
