import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { envSchema } from "../config/env.ts";

// config/env.ts is the one list of environment variables: each is documented for operators and in
// the README's table.
describe("every environment variable is documented", () => {
  const variables = Object.keys(envSchema.shape);
  const tableRows = (file: string) =>
    new Set([...readFileSync(file, "utf8").matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]));

  it("has the schema's variables", () => expect(variables.length).toBeGreaterThan(30));

  for (const file of ["docs/operations.md", "README.md"]) {
    it(`in ${file}'s table`, () => {
      const rows = tableRows(file);
      expect(
        variables.filter((v) => !rows.has(v)),
        `missing from ${file}`,
      ).toEqual([]);
    });
  }

  // .env.example is the operator's template: each variable once, set or commented out, and none the schema lacks.
  it("in .env.example, and nothing else", () => {
    const named = [...readFileSync(".env.example", "utf8").matchAll(/^#?\s*([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]!);
    expect(
      variables.filter((v) => !named.includes(v)),
      "missing from .env.example",
    ).toEqual([]);
    expect(
      named.filter((v) => !variables.includes(v)),
      "in .env.example but not in config/env.ts",
    ).toEqual([]);
    expect(
      named.filter((v, i) => named.indexOf(v) !== i),
      "named twice in .env.example",
    ).toEqual([]);
  });
});
