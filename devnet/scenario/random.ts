import { keccak256, stringToHex } from "viem";
import type { Address } from "../../config/addresses.ts";

/** Deterministic PRNG (mulberry32): the same seed always seeds the same history. */
export class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }
  between(min: number, max: number): number {
    return min + this.next() * (max - min);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
  /** Poisson-distributed count with the given mean (Knuth; means here are small). */
  poisson(mean: number): number {
    if (mean <= 0) return 0;
    if (mean > 50) return Math.max(0, Math.round(mean + Math.sqrt(mean) * this.gaussian()));
    const limit = Math.exp(-mean);
    let k = 0;
    for (let p = this.next(); p > limit; p *= this.next()) k++;
    return k;
  }
  gaussian(): number {
    return Math.sqrt(-2 * Math.log(1 - this.next())) * Math.cos(2 * Math.PI * this.next());
  }
  /** Log-normal amount around `median` (spending and payments are right-skewed). */
  amount(median: number, spread = 0.6): number {
    return median * Math.exp(spread * this.gaussian());
  }
}

/** A stable address for a named actor of the scenario (no key: the seeder moves its money). */
export function actorAddress(seed: number, label: string): Address {
  return keccak256(stringToHex(`devnet:${seed}:${label}`)).slice(0, 42) as Address;
}

/** Whole USD (may have cents) to 6-decimal token units. */
export const usd = (amount: number): bigint => BigInt(Math.round(amount * 100)) * 10_000n;
