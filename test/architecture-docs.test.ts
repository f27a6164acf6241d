import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

// docs/architecture.md, "Adding a paid route": its sample is the screen route as the code has it,
// and the two lines it tells a reader to add are the ones the screen route has.
const read = (file: string) => readFileSync(new URL(`../${file}`, import.meta.url), "utf8");

describe("docs/architecture.md", () => {
  const page = read("docs/architecture.md");

  it("shows the screen route's declaration and handler as api/screen/route.ts has them", () => {
    const block = /<!-- screen-route:start -->\n```ts\n([\s\S]*?)```\n<!-- screen-route:end -->/.exec(page)?.[1];
    expect(block, "a ts block between the screen-route markers").toBeDefined();
    expect(read("api/screen/route.ts")).toContain(block);
  });

  it("names the price and the route list lines the screen route really has", () => {
    expect(page).toContain("(`screen: CENT`)");
    expect(read("api/payments/prices.ts")).toMatch(/^ {2}screen: CENT,$/m);
    expect(page).toContain("`served(screenRoute, screenHandler)`");
    expect(read("api/routes.ts")).toContain("  served(screenRoute, screenHandler),");
  });
});
