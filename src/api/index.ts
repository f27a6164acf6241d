import { db, publicClients } from "ponder:api";
import schema from "ponder:schema";
import { graphql } from "ponder";
import { createApp } from "../../api/app.ts";
import { resolveIndexTarget } from "../../config/target.ts";

// Ponder serves this app; all behaviour lives in api/, which only needs the read-only db.
const app = createApp({ db, target: resolveIndexTarget(), chain: publicClients.celo });

// A read-only GraphQL view of the indexed tables and views, for data teams.
app.use("/graphql", graphql({ db, schema }));

export default app;
