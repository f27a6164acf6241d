import type { JsonSchema } from "./route-schemas.ts";

/** A wallet to show in examples: anvil's well-known account #1 (a dev key, never a real wallet). */
const EXAMPLE_WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

/** Values for the string patterns the route schemas use; a pattern not here fails loudly (a test generates every example). */
const PATTERNS: Record<string, string> = {
  "^0x[a-fA-F0-9]{40}$": EXAMPLE_WALLET,
  "^\\d{1,10}$": "1",
  "^(REP-[A-Z0-9]{10}|0x[0-9a-fA-F]{64}|(?!0[xX])[A-Za-z0-9]{20,120})$": "REP-7K2M9Q4X8D",
};

const FORMATS: Record<string, string> = {
  "date-time": "2026-11-01T00:00:00.000Z",
  date: "2026-11-01",
  uri: "https://example.com/webhooks/reputation",
  uuid: "3f1c1f5e-8a2b-4c3d-9e4f-5a6b7c8d9e0f",
};

/**
 * An example value that the schema accepts, built from the schema alone (deterministic): what a
 * discovery listing shows an agent of a route's request and answer. Every property is filled in,
 * so the example shows the whole shape.
 */
export function exampleOf(schema: JsonSchema): unknown {
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  if ("default" in schema) return schema.default;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const branches = (schema.anyOf ?? schema.oneOf) as JsonSchema[] | undefined;
  if (branches) return exampleOf(branches.find((b) => b.type !== "null") ?? (branches[0] as JsonSchema));
  if (Array.isArray(schema.allOf))
    return Object.assign({}, ...(schema.allOf as JsonSchema[]).map((s) => exampleOf(s) as object));
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  switch (type) {
    case "object": {
      const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
      return Object.fromEntries(Object.entries(properties).map(([name, s]) => [name, exampleOf(s)]));
    }
    case "array": {
      const count = Math.max(1, Number(schema.minItems ?? 1));
      return Array.from({ length: count }, () => exampleOf((schema.items ?? {}) as JsonSchema));
    }
    case "string":
      return stringExample(schema);
    case "integer":
    case "number":
      return numberExample(schema);
    case "boolean":
      return true;
    case "null":
      return null;
    default:
      return {};
  }
}

function stringExample(schema: JsonSchema): string {
  if (typeof schema.pattern === "string") {
    const value = PATTERNS[schema.pattern];
    if (value === undefined) throw new Error(`no example for the string pattern ${schema.pattern}`);
    return value;
  }
  if (typeof schema.format === "string" && FORMATS[schema.format]) return FORMATS[schema.format] as string;
  return "example".padEnd(Number(schema.minLength ?? 0), "x").slice(0, Number(schema.maxLength ?? 64));
}

function numberExample(schema: JsonSchema): number {
  const min = typeof schema.exclusiveMinimum === "number" ? schema.exclusiveMinimum + 1 : Number(schema.minimum ?? 1);
  const max =
    typeof schema.exclusiveMaximum === "number" ? schema.exclusiveMaximum - 1 : Number(schema.maximum ?? Infinity);
  return Math.min(Math.max(min, 1), max);
}
