import { Hono } from "hono";
import { openApiDocument } from "./document.ts";

/** GET /api/openapi.json: free. */
export function openApiRoutes() {
  return new Hono().get("/openapi.json", (c) => c.json(openApiDocument(new URL(c.req.url).origin)));
}
