import { Hono, type MiddlewareHandler } from "hono";
import { ApiError, errorBody } from "../../shared/errors.ts";

export type DataAppDeps = {
  /** Ponder's read-only GraphQL over the indexed tables and views. */
  graphql: MiddlewareHandler;
  /** `@ponder/client`'s SQL over HTTP (api/data/sql.ts). */
  sql: MiddlewareHandler;
  /** Prometheus text of the process (Ponder's metrics registry). */
  metrics: () => Promise<string>;
};

/**
 * The data listener's app (docs/data.md): GraphQL, SQL over HTTP and metrics, for the operator's
 * own data team. Free and unpriced, so it listens apart from the public API, on DATA_HOST:DATA_PORT.
 */
export function createDataApp(deps: DataAppDeps) {
  const app = new Hono();
  app.use("/graphql", deps.graphql);
  app.use("/sql/*", deps.sql);
  app.get("/metrics", async (c) =>
    c.text(await deps.metrics(), 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }),
  );
  app.all("*", (c) =>
    c.json(
      errorBody(
        "not_found",
        `No route ${c.req.method} ${c.req.path} on the data listener (it serves /graphql, /sql/* and /metrics).`,
      ),
      404,
    ),
  );
  app.onError((error, c) => {
    // A refused or failed query (api/data/run.ts): the client's, in the project's error shape.
    if (error instanceof ApiError) return c.json(errorBody(error.code, error.message, error.details), error.status);
    console.error(`[data] ${c.req.method} ${c.req.path}: ${error.message}`);
    return c.json(errorBody("internal_error", "The data listener could not answer."), 500);
  });
  return app;
}
