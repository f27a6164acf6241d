import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { envSchema } from "../config/env.ts";

// config/env.ts is the one list of environment variables: each is documented for operators and in
// the README's table.
describe("every environment variable is documented", () => {
  const variables = Object.keys(envSchema.shape);
  const tableRows = (file: string) => new Set([...readFileSync(file, "utf8").matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]));

  it("has the schema's variables", () => expect(variables.length).toBeGreaterThan(30));

  for (const file of ["docs/operations.md", "README.md"]) {
    it(`in ${file}'s table`, () => {
      const rows = tableRows(file);
      expect(variables.filter((v) => !rows.has(v)), `missing from ${file}`).toEqual([]);
    });
  }
});
