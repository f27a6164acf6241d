import { db, publicClients } from "ponder:api";
import schema from "ponder:schema";
import { client, graphql } from "ponder";
import { createApp } from "../../api/app.ts";
import { resolveIndexTarget } from "../../config/target.ts";

// Ponder serves this app; all behaviour lives in api/, which only needs the read-only db.
const app = createApp({ db, target: resolveIndexTarget(), chain: publicClients.celo });

// Read-only views of the indexed tables for data teams: GraphQL, and SQL over HTTP (@ponder/client).
app.use("/graphql", graphql({ db, schema }));
app.use("/sql/*", client({ db, schema }));

export default app;
