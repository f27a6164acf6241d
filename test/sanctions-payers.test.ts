import { describe, expect, it } from "vitest";
import { verdictPerCheckpoint } from "../api/sanctions/payers.ts";
import type { Address } from "../config/addresses.ts";

// The payer's sanctions check of every paid call (api/sanctions/payers.ts): asked of the index once
// per payer at each checkpoint the gate read; never a verdict older than the index state it names.

const alice = "0x00000000000000000000000000000000000a11ce" as Address;
const bob = "0x0000000000000000000000000000000000000b0b" as Address;

function checked() {
  const asked: Address[] = [];
  const listed = new Set<Address>();
  let checkpoint: string | undefined = "cp-100";
  let failNext = false;
  const check = verdictPerCheckpoint(
    async (payer) => {
      asked.push(payer);
      if (failNext) {
        failNext = false;
        throw new Error("the index database does not answer");
      }
      return listed.has(payer);
    },
    () => checkpoint,
  );
  return {
    check,
    asked,
    listed,
    moveTo: (cp: string | undefined) => void (checkpoint = cp),
    failOnce: () => void (failNext = true),
  };
}

describe("a payer's sanctions verdict, per indexed checkpoint", () => {
  it("asks once per payer while the checkpoint stays, and again once it moves (a listing indexed is seen)", async () => {
    const t = checked();
    expect(await Promise.all([t.check.isListed(alice), t.check.isListed(alice), t.check.isListed(bob)])).toEqual([
      false,
      false,
      false,
    ]);
    expect(t.asked).toEqual([alice, bob]);
    // Listed in a block the index has not reached: the verdict stands for the state the gate read.
    t.listed.add(alice);
    expect(await t.check.isListed(alice)).toBe(false);
    t.moveTo("cp-101");
    expect(await t.check.isListed(alice)).toBe(true);
    expect(await t.check.isListed(alice)).toBe(true);
    expect(t.asked).toEqual([alice, bob, alice]);
    // A reorg or a crash recovery moves it back: asked again there too.
    t.listed.delete(alice);
    t.moveTo("cp-100");
    expect(await t.check.isListed(alice)).toBe(false);
    expect(t.asked).toHaveLength(4);
  });

  it("keeps no failed lookup, and asks every time before any checkpoint was read", async () => {
    const t = checked();
    t.failOnce();
    await expect(t.check.isListed(alice)).rejects.toThrow(/does not answer/);
    expect(await t.check.isListed(alice)).toBe(false);
    expect(t.asked).toEqual([alice, alice]);
    t.moveTo(undefined);
    await t.check.isListed(bob);
    await t.check.isListed(bob);
    expect(t.asked).toEqual([alice, alice, bob, bob]);
  });
});
