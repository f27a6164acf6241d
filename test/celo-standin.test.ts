import { randomBytes } from "node:crypto";
import { decodePaymentSignatureHeader, encodePaymentRequiredHeader } from "@x402/core/http";
import type { PaymentRequired, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm";
import { wrapFetchWithPaymentFromConfig } from "@x402/fetch";
import {
  type Address,
  createPublicClient,
  createTestClient,
  createWalletClient,
  getAddress,
  type Hex,
  http,
  parseAbiItem,
  toHex,
  zeroHash,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../abis/DevStablecoin.ts";
import { sanctionsListAbi } from "../abis/SanctionsList.ts";
import { SANCTIONS_ORACLE, type TokenInfo } from "../config/celo.ts";
import { devnetChain } from "../devnet/chain.ts";
import { type CeloStandin, startCeloStandin } from "../harness/celo-standin.ts";
import { celoDomainSeparator } from "../harness/place-dev-token.ts";
import { waitForReceipt } from "../shared/receipt.ts";

// The stand-in for Celo mainnet, judged by the chain itself: what a client, a facilitator or an
// indexer reads there must be what it would read on Celo.

const transferEvent = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)");

let standin: CeloStandin;
let publicClient: ReturnType<typeof createPublicClient>;

beforeAll(async () => {
  standin = await startCeloStandin();
  publicClient = createPublicClient({
    chain: devnetChain(standin.rpcUrl),
    transport: http(standin.rpcUrl),
    pollingInterval: 100,
  });
});

afterAll(async () => {
  await standin?.stop();
});

const tokens = () => [standin.tokens.USDT, standin.tokens.USDC];
const balanceOf = (token: TokenInfo, holder: Address) =>
  publicClient.readContract({
    address: token.address,
    abi: devStablecoinAbi,
    functionName: "balanceOf",
    args: [holder],
  });

/** transferWithAuthorization sent by the relayer, as the service settles a payment; waits for its block. */
async function settle(
  token: TokenInfo,
  a: { from: Address; to: Address; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex },
  signature: Hex,
) {
  const relayer = createWalletClient({
    chain: devnetChain(standin.rpcUrl),
    transport: http(standin.rpcUrl),
    account: privateKeyToAccount(standin.accounts.relayer.privateKey),
  });
  const hash = await relayer.writeContract({
    address: token.address,
    abi: devStablecoinAbi,
    functionName: "transferWithAuthorization",
    args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signature],
  });
  const receipt = await waitForReceipt(publicClient, { hash });
  expect(receipt.status).toBe("success");
}

describe("Celo stand-in", () => {
  it("serves chain 42220 with code at the real USDT and USDC addresses", async () => {
    expect(await publicClient.getChainId()).toBe(42220);
    expect(standin.tokens.USDT.address).toBe("0x48065fbbe25f71c9282ddf5e1cd6d6a887483d5e");
    expect(standin.tokens.USDC.address).toBe("0xceba9300f2b948710d2653dd7b07f33a8b32118c");
    for (const token of tokens())
      expect((await publicClient.getCode({ address: token.address }))?.length).toBeGreaterThan(2);
  });

  it("has the Chainalysis sanctions oracle at its address: `sanctioned` listed, `delisted` no longer", async () => {
    const oracle = { address: SANCTIONS_ORACLE, abi: sanctionsListAbi } as const;
    expect(standin.sanctions).toEqual({ address: SANCTIONS_ORACLE, owner: standin.accounts.deployer.address });
    expect(await publicClient.readContract({ ...oracle, functionName: "name" })).toBe("Chainalysis sanctions oracle");
    expect((await publicClient.readContract({ ...oracle, functionName: "owner" })).toLowerCase()).toBe(
      standin.accounts.deployer.address,
    );
    const isSanctioned = (persona: string) =>
      publicClient.readContract({
        ...oracle,
        functionName: "isSanctioned",
        args: [standin.personas[persona]!.address],
      });
    expect([await isSanctioned("sanctioned"), await isSanctioned("delisted"), await isSanctioned("salaried")]).toEqual([
      true,
      false,
      false,
    ]);
  });

  it("answers name, symbol, decimals and version as Celo's tokens", async () => {
    for (const token of tokens()) {
      const read = <F extends "name" | "symbol" | "decimals" | "version">(functionName: F) =>
        publicClient.readContract({ address: token.address, abi: devStablecoinAbi, functionName });
      expect([await read("name"), await read("symbol"), await read("decimals"), await read("version")]).toEqual([
        token.name,
        token.symbol,
        6,
        token.version,
      ]);
    }
    expect([
      standin.tokens.USDT.name,
      standin.tokens.USDT.version,
      standin.tokens.USDC.name,
      standin.tokens.USDC.version,
    ]).toEqual(["Tether USD", "1", "USDC", "2"]);
  });

  it("has Celo's EIP-712 domain at each real address", async () => {
    for (const token of tokens()) {
      const [fields, name, version, chainId, verifyingContract, salt, extensions] = await publicClient.readContract({
        address: token.address,
        abi: devStablecoinAbi,
        functionName: "eip712Domain",
      });
      expect({ fields, name, version, chainId, verifyingContract, salt, extensions }).toEqual({
        fields: "0x0f",
        name: token.name,
        version: token.version,
        chainId: 42220n,
        verifyingContract: getAddress(token.address),
        salt: zeroHash,
        extensions: [],
      });
      // The separator signatures are checked against (cached in the code), not only the one eip712Domain() describes.
      expect(
        await publicClient.readContract({
          address: token.address,
          abi: devStablecoinAbi,
          functionName: "DOMAIN_SEPARATOR",
        }),
      ).toBe(celoDomainSeparator(token));
    }
  });

  it("holds the seeded history: as many Transfer logs as the seeder reports, none before its start block", async () => {
    const { startBlock, headBlock, transfers } = standin.history;
    const address = tokens().map((t) => t.address);
    const logs = await publicClient.getLogs({
      address,
      event: transferEvent,
      fromBlock: BigInt(startBlock),
      toBlock: BigInt(headBlock),
    });
    expect(transfers).toBeGreaterThan(1_000);
    expect(logs.length).toBe(transfers);
    expect(
      await publicClient.getLogs({ address, event: transferEvent, fromBlock: 0n, toBlock: BigInt(startBlock - 1) }),
    ).toEqual([]);
    expect(new Set(logs.map((l) => l.blockNumber)).size).toBeGreaterThan(100);
    const wallets = new Set(logs.flatMap((l) => [l.args.from!.toLowerCase(), l.args.to!.toLowerCase()]));
    for (const [name, persona] of Object.entries(standin.personas))
      expect(wallets.has(persona.address), name).toBe(true);
  });

  it("funds the lenders with 25,000 USDT and 25,000 USDC each", async () => {
    const lender = standin.accounts.lenders[1]!; // lender-2: lender-1 pays in the tests below
    for (const token of tokens()) expect(await balanceOf(token, lender.address)).toBe(25_000_000_000n);
  });

  it("mines a block a second on its own once seeded", async () => {
    expect(await createTestClient({ mode: "anvil", transport: http(standin.rpcUrl) }).getAutomine()).toBe(false);
    const head = await publicClient.getBlockNumber();
    expect(head).toBeGreaterThanOrEqual(BigInt(standin.history.headBlock));
    await expect.poll(() => publicClient.getBlockNumber(), { timeout: 30_000, interval: 200 }).toBeGreaterThan(head);
  });

  it("settles a transferWithAuthorization signed with viem for the real domain, moving exactly the amount", async () => {
    const lender = privateKeyToAccount(standin.accounts.lenders[0]!.privateKey);
    const treasury = standin.accounts.treasury.address;
    for (const token of tokens()) {
      const [payerBefore, treasuryBefore] = [await balanceOf(token, lender.address), await balanceOf(token, treasury)];
      const authorization = {
        from: lender.address,
        to: getAddress(treasury),
        value: 12_345n,
        validAfter: 0n,
        validBefore: BigInt(Math.floor(Date.now() / 1000) + 600),
        nonce: toHex(randomBytes(32)),
      };
      const signature = await lender.signTypedData({
        domain: {
          name: token.name,
          version: token.version,
          chainId: 42220,
          verifyingContract: getAddress(token.address),
        },
        types: {
          TransferWithAuthorization: [
            { name: "from", type: "address" },
            { name: "to", type: "address" },
            { name: "value", type: "uint256" },
            { name: "validAfter", type: "uint256" },
            { name: "validBefore", type: "uint256" },
            { name: "nonce", type: "bytes32" },
          ],
        },
        primaryType: "TransferWithAuthorization",
        message: authorization,
      });
      await settle(token, authorization, signature);
      expect(await balanceOf(token, lender.address)).toBe(payerBefore - 12_345n);
      expect(await balanceOf(token, treasury)).toBe(treasuryBefore + 12_345n);
    }
  });

  it("is paid by the stock @x402/fetch client with no spendControls: it knows Celo's USDT and USDC", async () => {
    const lender = standin.accounts.lenders[0]!;
    const treasury = standin.accounts.treasury.address;
    const offer = (asset: Address, extra: { name: string; version: string }): PaymentRequirements => ({
      scheme: "exact",
      network: "eip155:42220",
      asset: getAddress(asset),
      amount: "10000",
      payTo: getAddress(treasury),
      maxTimeoutSeconds: 300,
      extra,
    });
    // A resource server in a few lines: 402 with the offers, then settle what the client signed.
    const server = (accepts: PaymentRequirements[]) => async (request: Request) => {
      const header = request.headers.get("PAYMENT-SIGNATURE");
      if (!header) {
        const required: PaymentRequired = {
          x402Version: 2,
          error: "payment required",
          resource: { url: request.url },
          accepts,
        };
        return new Response("{}", {
          status: 402,
          headers: { "PAYMENT-REQUIRED": encodePaymentRequiredHeader(required) },
        });
      }
      const payment = decodePaymentSignatureHeader(header);
      const a = payment.payload.authorization as Record<string, string>;
      const token = tokens().find((t) => getAddress(t.address) === payment.accepted.asset)!;
      await settle(
        token,
        {
          from: a.from as Address,
          to: a.to as Address,
          value: BigInt(a.value!),
          validAfter: BigInt(a.validAfter!),
          validBefore: BigInt(a.validBefore!),
          nonce: a.nonce as Hex,
        },
        payment.payload.signature as Hex,
      );
      return new Response(JSON.stringify({ paid: token.symbol }), { status: 200 });
    };
    const stockClient = (fetchImpl: (request: Request) => Promise<Response>) =>
      wrapFetchWithPaymentFromConfig(fetchImpl as typeof fetch, {
        schemes: [{ network: "eip155:42220", client: new ExactEvmScheme(privateKeyToAccount(lender.privateKey)) }],
      });

    for (const token of tokens()) {
      const [payerBefore, treasuryBefore] = [await balanceOf(token, lender.address), await balanceOf(token, treasury)];
      const res = await stockClient(server([offer(token.address, { name: token.name, version: token.version })]))(
        "http://service.invalid/api/lender/screen",
        { method: "POST" },
      );
      expect(await res.json()).toEqual({ paid: token.symbol });
      expect(await balanceOf(token, lender.address)).toBe(payerBefore - 10_000n);
      expect(await balanceOf(token, treasury)).toBe(treasuryBefore + 10_000n);
    }
    // The same client refuses a token it does not know (as the devnet's): the stand-in's are known by address.
    const unknown = offer("0x5fbdb2315678afecb367f032d93f642f64180aa3", { name: "Tether USD", version: "1" });
    await expect(
      stockClient(server([unknown]))("http://service.invalid/api/lender/screen", { method: "POST" }),
    ).rejects.toThrow(/spendControls/);
  });
});
