import { defineConfig } from "drizzle-kit";

// drizzle-kit's view of the service store: `npm run db:generate` diffs schema.ts against the last
// snapshot in migrations/meta and writes the next migration there (commit it). Paths are relative
// to the working directory, which npm scripts set to the project root.
export default defineConfig({
  dialect: "postgresql",
  schema: "./api/store/schema.ts",
  out: "./api/store/migrations",
});
