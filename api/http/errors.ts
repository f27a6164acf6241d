import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ApiError, errorBody } from "../../shared/errors.ts";
import { log } from "../../shared/log.ts";

/**
 * Errors Hono raises by itself (malformed JSON, an unsupported media type, a body over the limit),
 * as the project's codes.
 */
function fromHttpException(err: HTTPException): ApiError {
  if (err.status === 400 && /JSON/i.test(err.message))
    return new ApiError(400, "invalid_json", "The request body must be JSON (Content-Type: application/json).");
  if (err.status === 415)
    return new ApiError(
      415,
      "unsupported_media_type",
      "This route takes a JSON body: send Content-Type: application/json.",
    );
  return new ApiError(
    err.status as ContentfulStatusCode,
    `http_${err.status}`,
    err.message || "The request was refused.",
  );
}

/** Hono onError handler: known errors keep their status and code; anything else is a logged 500. */
export function handleError(err: Error, c: Context) {
  const known = err instanceof HTTPException ? fromHttpException(err) : err;
  if (known instanceof ApiError) return c.json(errorBody(known.code, known.message, known.details), known.status);
  log.error({ err, method: c.req.method, path: c.req.path }, "unhandled error");
  return c.json(errorBody("internal_error", "The service failed to answer this request; it has been logged."), 500);
}
