import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { authorizationTypes } from "@x402/evm";
import {
  type Account,
  type Address,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  hashDomain,
  http,
  keccak256,
  type PublicClient,
  pad,
  parseEventLogs,
  parseSignature,
  serializeSignature,
  slice,
  type TransactionReceipt,
  toEventSelector,
  toFunctionSelector,
  toHex,
  type WalletClient,
  zeroAddress,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi, reputationReporterAbi, sanctionsListAbi } from "../abis/index.ts";
import { SANCTIONS_ORACLE } from "../config/celo.ts";
import { devStablecoinArtifact, reputationReporterArtifact } from "../contracts/artifacts.ts";
import { compileContracts, REPO_ROOT } from "../contracts/compile.ts";
import { type Anvil, startAnvil } from "../devnet/anvil.ts";
import { placeSanctionsOracle } from "../devnet/sanctions.ts";
import { waitForReceipt } from "../shared/receipt.ts";

// ------------------------------------------------------------------ helpers

// Anvil's well-known dev keys (public test mnemonic), funded at genesis; never use them elsewhere.
const ANVIL_DEV_KEY_0: Hex = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
const ANVIL_DEV_KEY_1: Hex = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const ANVIL_DEV_KEY_2: Hex = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";

const devnet = defineChain({
  id: 42220,
  name: "Celo devnet (anvil)",
  nativeCurrency: { name: "Celo", symbol: "CELO", decimals: 18 },
  rpcUrls: { default: { http: ["http://127.0.0.1"] } },
});

let anvil: Anvil;
let pub: PublicClient;
/** #0 deploys (owner/admin), #1 and #2 play users. */
let owner: WalletClient<ReturnType<typeof http>, typeof devnet, Account>;
let alice: typeof owner;
let bob: typeof owner;

beforeAll(async () => {
  anvil = await startAnvil();
  const transport = http(anvil.rpcUrl);
  pub = createPublicClient({ chain: devnet, transport, pollingInterval: 20 });
  const wallet = (key: Hex) =>
    createWalletClient({ account: privateKeyToAccount(key), chain: devnet, transport, pollingInterval: 20 });
  owner = wallet(ANVIL_DEV_KEY_0);
  alice = wallet(ANVIL_DEV_KEY_1);
  bob = wallet(ANVIL_DEV_KEY_2);
}, 30_000);

afterAll(async () => {
  await anvil?.stop();
});

/** Waits for a sent transaction and insists it succeeded. */
async function mined(hash: Promise<Hex>): Promise<TransactionReceipt> {
  const receipt = await waitForReceipt(pub, { hash: await hash });
  expect(receipt.status).toBe("success");
  return receipt;
}

async function deployStablecoin(name: string, symbol: string, version: string): Promise<Address> {
  const { abi, bytecode } = devStablecoinArtifact;
  const receipt = await mined(owner.deployContract({ abi, bytecode, args: [name, symbol, version] }));
  return getAddress(receipt.contractAddress!);
}

async function deployReporter(initialReporter: Address): Promise<Address> {
  const { abi, bytecode } = reputationReporterArtifact;
  const receipt = await mined(owner.deployContract({ abi, bytecode, args: [initialReporter] }));
  return getAddress(receipt.contractAddress!);
}

async function now(): Promise<bigint> {
  return (await pub.getBlock()).timestamp;
}

/** Distinct, deterministic addresses that no key controls. */
function holder(i: number): Address {
  return getAddress(slice(keccak256(toHex(`holder-${i}`)), 12));
}

let nonceCounter = 0;
function freshNonce(): Hex {
  return keccak256(toHex(`nonce-${nonceCounter++}`));
}

// ----------------------------------------------------------------- drift

describe("generated files", () => {
  it("match a fresh compile of contracts/src", async () => {
    const files = await compileContracts();
    expect([...files.keys()].sort()).toEqual([
      "abis/DevStablecoin.ts",
      "abis/Multicall3.ts",
      "abis/ReputationReporter.ts",
      "abis/SanctionsList.ts",
      "abis/index.ts",
      "contracts/artifacts/DevStablecoin.json",
      "contracts/artifacts/Multicall3.json",
      "contracts/artifacts/ReputationReporter.json",
      "contracts/artifacts/SanctionsList.json",
    ]);
    for (const [path, expected] of files) {
      const committed = await readFile(join(REPO_ROOT, path), "utf8").catch(() => "<missing>");
      expect(committed, `${path} is stale: run npm run contracts:build`).toBe(expected);
    }
  }, 60_000);
});

// ------------------------------------------------------------ DevStablecoin

describe("DevStablecoin", () => {
  let usdt: Address;
  const usdtDomain = () => ({ name: "Tether USD", version: "1", chainId: 42220, verifyingContract: usdt }) as const;

  const AUTHORIZATION_FIELDS = authorizationTypes.TransferWithAuthorization;
  type Authorization = {
    from: Address;
    to: Address;
    value: bigint;
    validAfter: bigint;
    validBefore: bigint;
    nonce: Hex;
  };

  async function authorization(overrides: Partial<Authorization> = {}): Promise<Authorization> {
    return {
      from: alice.account.address,
      to: bob.account.address,
      value: 1_000_000n,
      validAfter: 0n,
      validBefore: (await now()) + 3600n,
      nonce: freshNonce(),
      ...overrides,
    };
  }

  function sign(
    signer: typeof owner,
    primaryType: "TransferWithAuthorization" | "ReceiveWithAuthorization",
    message: Authorization,
  ): Promise<Hex> {
    const domain = usdtDomain();
    return primaryType === "TransferWithAuthorization"
      ? signer.signTypedData({
          domain,
          types: { TransferWithAuthorization: AUTHORIZATION_FIELDS },
          primaryType,
          message,
        })
      : signer.signTypedData({
          domain,
          types: { ReceiveWithAuthorization: AUTHORIZATION_FIELDS },
          primaryType,
          message,
        });
  }

  /** transferWithAuthorization via the (bytes signature) overload. */
  function transferWithBytes(sender: typeof owner, a: Authorization, signature: Hex) {
    return sender.writeContract({
      address: usdt,
      abi: devStablecoinAbi,
      functionName: "transferWithAuthorization",
      args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signature],
    });
  }

  function balance(account: Address): Promise<bigint> {
    return pub.readContract({ address: usdt, abi: devStablecoinAbi, functionName: "balanceOf", args: [account] });
  }

  beforeAll(async () => {
    usdt = await deployStablecoin("Tether USD", "USDT", "1");
    await mined(
      owner.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "mint",
        args: [alice.account.address, 1_000_000_000n],
      }),
    );
  }, 30_000);

  it("has the FiatToken metadata, typehashes and EIP-712 domain", async () => {
    const read = <F extends "name" | "symbol" | "decimals" | "version" | "DOMAIN_SEPARATOR">(functionName: F) =>
      pub.readContract({ address: usdt, abi: devStablecoinAbi, functionName });
    expect(await read("name")).toBe("Tether USD");
    expect(await read("symbol")).toBe("USDT");
    expect(await read("decimals")).toBe(6);
    expect(await read("version")).toBe("1");
    expect(await read("DOMAIN_SEPARATOR")).toBe(
      hashDomain({
        domain: { ...usdtDomain(), chainId: 42220n },
        types: {
          EIP712Domain: [
            { name: "name", type: "string" },
            { name: "version", type: "string" },
            { name: "chainId", type: "uint256" },
            { name: "verifyingContract", type: "address" },
          ],
        },
      }),
    );
    const [fields, name, version, chainId, verifyingContract] = await pub.readContract({
      address: usdt,
      abi: devStablecoinAbi,
      functionName: "eip712Domain",
    });
    expect([fields, name, version, chainId, verifyingContract]).toEqual(["0x0f", "Tether USD", "1", 42220n, usdt]);

    const typehashes = [
      [
        "TRANSFER_WITH_AUTHORIZATION_TYPEHASH",
        "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)",
      ],
      [
        "RECEIVE_WITH_AUTHORIZATION_TYPEHASH",
        "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)",
      ],
      ["CANCEL_AUTHORIZATION_TYPEHASH", "CancelAuthorization(address authorizer,bytes32 nonce)"],
    ] as const;
    for (const [functionName, typeString] of typehashes) {
      expect(await pub.readContract({ address: usdt, abi: devStablecoinAbi, functionName })).toBe(
        keccak256(toHex(typeString)),
      );
    }
  });

  it("accepts a signed TransferWithAuthorization via the v,r,s and bytes overloads", async () => {
    const before = await balance(bob.account.address);

    const first = await authorization();
    const { r, s, v } = parseSignature(await sign(alice, "TransferWithAuthorization", first));
    // Anyone may relay a transfer authorization: the owner (facilitator) submits it here.
    const receipt = await mined(
      owner.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "transferWithAuthorization",
        args: [first.from, first.to, first.value, first.validAfter, first.validBefore, first.nonce, Number(v), r, s],
      }),
    );
    const used = parseEventLogs({ abi: devStablecoinAbi, logs: receipt.logs, eventName: "AuthorizationUsed" });
    expect(used.map((l) => l.args)).toEqual([{ authorizer: alice.account.address, nonce: first.nonce }]);

    const second = await authorization({ value: 250_000n });
    await mined(transferWithBytes(owner, second, await sign(alice, "TransferWithAuthorization", second)));

    expect(await balance(bob.account.address)).toBe(before + 1_250_000n);
  });

  it("rejects replays, expired, not-yet-valid, wrongly signed and high-s authorizations", async () => {
    const a = await authorization();
    const signature = await sign(alice, "TransferWithAuthorization", a);
    await mined(transferWithBytes(owner, a, signature));
    await expect(transferWithBytes(owner, a, signature)).rejects.toThrow(
      "FiatTokenV2: authorization is used or canceled",
    );

    const expired = await authorization({ validBefore: await now() });
    await expect(
      transferWithBytes(owner, expired, await sign(alice, "TransferWithAuthorization", expired)),
    ).rejects.toThrow("FiatTokenV2: authorization is expired");

    const early = await authorization({ validAfter: (await now()) + 3600n, validBefore: (await now()) + 7200n });
    await expect(
      transferWithBytes(owner, early, await sign(alice, "TransferWithAuthorization", early)),
    ).rejects.toThrow("FiatTokenV2: authorization is not yet valid");

    const forged = await authorization();
    await expect(
      transferWithBytes(owner, forged, await sign(bob, "TransferWithAuthorization", forged)),
    ).rejects.toThrow("FiatTokenV2: invalid signature");

    // The malleable twin (n - s, flipped v) recovers the same signer but must be refused.
    const twin = await authorization();
    const sig = parseSignature(await sign(alice, "TransferWithAuthorization", twin));
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const highS = serializeSignature({ r: sig.r, s: pad(toHex(n - BigInt(sig.s))), yParity: sig.yParity ? 0 : 1 });
    await expect(transferWithBytes(owner, twin, highS)).rejects.toThrow("ECRecover: invalid signature 's' value");
  });

  it("cancels an authorization and flips authorizationState", async () => {
    const a = await authorization();
    const state = () =>
      pub.readContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "authorizationState",
        args: [a.from, a.nonce],
      });
    expect(await state()).toBe(false);

    const cancelSignature = await alice.signTypedData({
      domain: usdtDomain(),
      types: {
        CancelAuthorization: [
          { name: "authorizer", type: "address" },
          { name: "nonce", type: "bytes32" },
        ],
      },
      primaryType: "CancelAuthorization",
      message: { authorizer: a.from, nonce: a.nonce },
    });
    const receipt = await mined(
      owner.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "cancelAuthorization",
        args: [a.from, a.nonce, cancelSignature],
      }),
    );
    expect(
      parseEventLogs({ abi: devStablecoinAbi, logs: receipt.logs, eventName: "AuthorizationCanceled" }),
    ).toHaveLength(1);
    expect(await state()).toBe(true);

    await expect(transferWithBytes(owner, a, await sign(alice, "TransferWithAuthorization", a))).rejects.toThrow(
      "FiatTokenV2: authorization is used or canceled",
    );

    // v,r,s overload of cancel, on a nonce that was used already.
    const used = await authorization();
    await mined(transferWithBytes(owner, used, await sign(alice, "TransferWithAuthorization", used)));
    const { r, s, v } = parseSignature(
      await alice.signTypedData({
        domain: usdtDomain(),
        types: {
          CancelAuthorization: [
            { name: "authorizer", type: "address" },
            { name: "nonce", type: "bytes32" },
          ],
        },
        primaryType: "CancelAuthorization",
        message: { authorizer: used.from, nonce: used.nonce },
      }),
    );
    await expect(
      owner.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "cancelAuthorization",
        args: [used.from, used.nonce, Number(v), r, s],
      }),
    ).rejects.toThrow("FiatTokenV2: authorization is used or canceled");
  });

  it("lets only the payee submit receiveWithAuthorization", async () => {
    const a = await authorization();
    const signature = await sign(alice, "ReceiveWithAuthorization", a);
    const submit = (sender: typeof owner) =>
      sender.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "receiveWithAuthorization",
        args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signature],
      });
    await expect(submit(owner)).rejects.toThrow("FiatTokenV2: caller must be the payee");

    const before = await balance(bob.account.address);
    await mined(submit(bob));
    expect(await balance(bob.account.address)).toBe(before + a.value);

    // A receive signature is not a transfer signature: different typehash.
    const b = await authorization();
    await expect(transferWithBytes(bob, b, await sign(alice, "ReceiveWithAuthorization", b))).rejects.toThrow(
      "FiatTokenV2: invalid signature",
    );
  });

  it("seedTransfers mints from zero, moves balances and emits one Transfer per entry", async () => {
    const [h0, h1, h2] = [holder(0), holder(1), holder(2)];
    const zero: Address = zeroAddress;
    const supplyBefore = await pub.readContract({ address: usdt, abi: devStablecoinAbi, functionName: "totalSupply" });
    const receipt = await mined(
      owner.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "seedTransfers",
        args: [
          [zero, zero, h0, h1],
          [h0, h1, h2, h2],
          [100n, 50n, 30n, 50n],
        ],
      }),
    );
    const transfers = parseEventLogs({ abi: devStablecoinAbi, logs: receipt.logs, eventName: "Transfer" });
    expect(transfers.map((l) => l.args)).toEqual([
      { from: zero, to: h0, value: 100n },
      { from: zero, to: h1, value: 50n },
      { from: h0, to: h2, value: 30n },
      { from: h1, to: h2, value: 50n },
    ]);
    expect(receipt.logs).toHaveLength(4);
    expect([await balance(h0), await balance(h1), await balance(h2)]).toEqual([70n, 0n, 80n]);
    expect(await pub.readContract({ address: usdt, abi: devStablecoinAbi, functionName: "totalSupply" })).toBe(
      supplyBefore + 150n,
    );

    const seed = (sender: typeof owner, from: Address[], to: Address[], value: bigint[]) =>
      sender.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "seedTransfers",
        args: [from, to, value],
      });
    await expect(seed(owner, [h1], [h0], [1n])).rejects.toThrow("ERC20: transfer amount exceeds balance");
    await expect(seed(owner, [h0], [zero], [1n])).rejects.toThrow("ERC20: transfer to the zero address");
    await expect(seed(owner, [h0, h0], [h1], [1n])).rejects.toThrow("length mismatch");
    await expect(seed(alice, [h0], [h1], [1n])).rejects.toThrow("Ownable: caller is not the owner");
  });

  it("seeds 500 transfers between existing holders in one transaction", async () => {
    const count = 500;
    const zero: Address = zeroAddress;
    const holders = Array.from({ length: 2 * count }, (_, i) => holder(1000 + i));
    await mined(
      owner.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "seedTransfers",
        args: [holders.map(() => zero), holders, holders.map(() => 1_000_000n)],
        gas: 60_000_000n,
      }),
    );

    // Distinct, already-funded senders and receivers: every balance slot is cold and non-zero.
    const from = holders.slice(0, count);
    const to = holders.slice(count);
    const receipt = await mined(
      owner.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "seedTransfers",
        args: [from, to, from.map((_, i) => BigInt(1 + i))],
      }),
    );
    expect(receipt.logs).toHaveLength(count);
    console.info(`seedTransfers: ${count} transfers between existing holders used ${receipt.gasUsed} gas`);
    expect(receipt.gasUsed).toBeLessThan(10_000_000n);
  }, 60_000);

  it("deploys as USDC with EIP-712 version 2", async () => {
    const usdc = await deployStablecoin("USDC", "USDC", "2");
    const [, name, version] = await pub.readContract({
      address: usdc,
      abi: devStablecoinAbi,
      functionName: "eip712Domain",
    });
    expect([name, version]).toEqual(["USDC", "2"]);
  });
});

// ------------------------------------------------------- ReputationReporter

describe("ReputationReporter", () => {
  let reporter: Address;
  const wallet = holder(9001);
  const otherWallet = holder(9002);
  const buyer = holder(9003);
  let reportSeq = 0;

  /** A fresh, valid report id and hash: REP- plus 10 of [A-Z0-9]. */
  function nextReport(): { id: string; hash: string } {
    const n = reportSeq++;
    return { id: `REP-TEST${String(n).padStart(6, "0")}`, hash: `sha256:${keccak256(toHex(`report-${n}`)).slice(2)}` };
  }

  function publish(sender: typeof owner, args: { id: string; hash: string; wallet?: Address; score?: number }) {
    return sender.writeContract({
      address: reporter,
      abi: reputationReporterAbi,
      functionName: "publishFinancialReport",
      args: [args.wallet ?? wallet, buyer, args.score ?? 72, 64, "5000 USDC", args.id, args.hash],
    });
  }

  function publishV2(
    sender: typeof owner,
    args: { id: string; hash: string; wallet?: Address; expiresAt?: bigint; supersedes?: string },
  ) {
    return sender.writeContract({
      address: reporter,
      abi: reputationReporterAbi,
      functionName: "publishFinancialReportV2",
      args: [
        args.wallet ?? wallet,
        buyer,
        80,
        70,
        "8000 USDC",
        args.id,
        args.hash,
        args.expiresAt ?? 0n,
        args.supersedes ?? "",
      ],
    });
  }

  function status(reportId: string) {
    return pub.readContract({
      address: reporter,
      abi: reputationReporterAbi,
      functionName: "reportStatus",
      args: [reportId],
    });
  }

  beforeAll(async () => {
    // Admin is #0 (deployer); the reporter role goes to #1 only.
    reporter = await deployReporter(alice.account.address);
  }, 30_000);

  it("publishes a report whose event matches the live reporter's layout", async () => {
    const { id, hash } = nextReport();
    const receipt = await mined(publish(alice, { id, hash }));
    const [log] = receipt.logs;
    expect(receipt.logs).toHaveLength(1);
    expect(log!.topics).toEqual([
      keccak256(toHex("FinancialReportPublished(bytes32,string,address,address,uint8,uint8,string,string,uint256)")),
      keccak256(toHex(id)),
      pad(wallet.toLowerCase() as Hex),
      pad(buyer.toLowerCase() as Hex),
    ]);
    const [event] = parseEventLogs({
      abi: reputationReporterAbi,
      logs: receipt.logs,
      eventName: "FinancialReportPublished",
    });
    const { timestamp, ...args } = event!.args;
    expect(args).toEqual({
      reportIdHash: keccak256(toHex(id)),
      reportId: id,
      wallet,
      buyer,
      reputationScore: 72,
      financialHealthScore: 64,
      loanCapacity: "5000 USDC",
      reportHash: hash,
    });
    expect(timestamp).toBe((await pub.getBlock({ blockNumber: receipt.blockNumber })).timestamp);
  });

  it("enforces the report id format, uniqueness and score range", async () => {
    for (const badId of [
      "rep-ABCDEFGHIJ",
      "REP-abcdefghij",
      "REP-ABCDEFGHI",
      "REP-ABCDEFGHIJK",
      "RPT-ABCDEFGHIJ",
      "REP_ABCDEFGHIJ",
      "REP-ABCDE-GHIJ",
    ]) {
      await expect(publish(alice, { id: badId, hash: nextReport().hash }), badId).rejects.toThrow("invalid report id");
    }
    const first = nextReport();
    await mined(publish(alice, first));
    await expect(publish(alice, { id: first.id, hash: nextReport().hash })).rejects.toThrow("report id exists");
    await expect(publish(alice, { id: nextReport().id, hash: first.hash })).rejects.toThrow("report hash exists");
    await expect(publish(alice, { ...nextReport(), hash: "" })).rejects.toThrow("empty report hash");
    await expect(publish(alice, { ...nextReport(), score: 101 })).rejects.toThrow("score out of range");
    await expect(publish(alice, { ...nextReport(), wallet: zeroAddress })).rejects.toThrow("zero wallet");
  });

  it("separates the admin and reporter roles", async () => {
    const read = (account: Address) =>
      pub.readContract({ address: reporter, abi: reputationReporterAbi, functionName: "isReporter", args: [account] });
    expect(await read(owner.account.address)).toBe(false);
    await expect(publish(owner, nextReport())).rejects.toThrow("not reporter");
    await expect(publish(bob, nextReport())).rejects.toThrow("not reporter");
    await expect(
      alice.writeContract({
        address: reporter,
        abi: reputationReporterAbi,
        functionName: "setReporter",
        args: [bob.account.address, true],
      }),
    ).rejects.toThrow("not admin");

    const grant = await mined(
      owner.writeContract({
        address: reporter,
        abi: reputationReporterAbi,
        functionName: "setReporter",
        args: [owner.account.address, true],
      }),
    );
    expect(
      parseEventLogs({ abi: reputationReporterAbi, logs: grant.logs, eventName: "ReporterUpdated" })[0]!.args,
    ).toEqual({ account: owner.account.address, allowed: true });
    await mined(publish(owner, nextReport()));
    await mined(
      owner.writeContract({
        address: reporter,
        abi: reputationReporterAbi,
        functionName: "setReporter",
        args: [owner.account.address, false],
      }),
    );
    await expect(publish(owner, nextReport())).rejects.toThrow("not reporter");
  });

  it("transfers admin", async () => {
    const other = await deployReporter(owner.account.address);
    const receipt = await mined(
      owner.writeContract({
        address: other,
        abi: reputationReporterAbi,
        functionName: "transferAdmin",
        args: [bob.account.address],
      }),
    );
    expect(
      parseEventLogs({ abi: reputationReporterAbi, logs: receipt.logs, eventName: "AdminTransferred" })[0]!.args,
    ).toEqual({ previousAdmin: owner.account.address, newAdmin: bob.account.address });
    expect(await pub.readContract({ address: other, abi: reputationReporterAbi, functionName: "admin" })).toBe(
      bob.account.address,
    );
    await expect(
      owner.writeContract({
        address: other,
        abi: reputationReporterAbi,
        functionName: "setReporter",
        args: [owner.account.address, false],
      }),
    ).rejects.toThrow("not admin");
  });

  it("publishes V2 reports with expiry and superseding", async () => {
    const original = nextReport();
    await mined(publish(alice, original));

    const expiresAt = (await now()) + 30n * 86_400n;
    const replacement = nextReport();
    const receipt = await mined(publishV2(alice, { ...replacement, expiresAt, supersedes: original.id }));
    expect(parseEventLogs({ abi: reputationReporterAbi, logs: receipt.logs }).map((l) => l.eventName)).toEqual([
      "FinancialReportPublished",
      "ReportExpirySet",
      "ReportSuperseded",
    ]);
    const [expiry] = parseEventLogs({ abi: reputationReporterAbi, logs: receipt.logs, eventName: "ReportExpirySet" });
    expect(expiry!.args).toEqual({
      reportIdHash: keccak256(toHex(replacement.id)),
      reportId: replacement.id,
      expiresAt,
    });
    const [superseded] = parseEventLogs({
      abi: reputationReporterAbi,
      logs: receipt.logs,
      eventName: "ReportSuperseded",
    });
    expect(superseded!.args).toEqual({
      oldReportIdHash: keccak256(toHex(original.id)),
      newReportIdHash: keccak256(toHex(replacement.id)),
      oldReportId: original.id,
      newReportId: replacement.id,
    });

    expect(await status(original.id)).toEqual([true, false, 0n, replacement.id, ""]);
    expect(await status(replacement.id)).toEqual([true, false, expiresAt, "", ""]);

    await expect(publishV2(alice, { ...nextReport(), supersedes: original.id })).rejects.toThrow(
      "report already superseded",
    );
    await expect(
      publishV2(alice, { ...nextReport(), wallet: otherWallet, supersedes: replacement.id }),
    ).rejects.toThrow("superseded report of another wallet");
    await expect(publishV2(alice, { ...nextReport(), supersedes: "REP-NOSUCHREPT" })).rejects.toThrow(
      "superseded report unknown",
    );
    const self = nextReport();
    await expect(publishV2(alice, { ...self, supersedes: self.id })).rejects.toThrow("superseded report unknown");
    await expect(publishV2(alice, { ...nextReport(), expiresAt: await now() })).rejects.toThrow("expiry in past");
  });

  it("revokes a report once, with a reason", async () => {
    const report = nextReport();
    await mined(publish(alice, report));
    const revoke = (sender: typeof owner, reportId: string, reason: string) =>
      sender.writeContract({
        address: reporter,
        abi: reputationReporterAbi,
        functionName: "revokeReport",
        args: [reportId, reason],
      });

    await expect(revoke(bob, report.id, "fraud")).rejects.toThrow("not reporter");
    await expect(revoke(alice, report.id, "")).rejects.toThrow("empty reason");
    await expect(revoke(alice, "REP-NOSUCHREPT", "fraud")).rejects.toThrow("report unknown");

    const receipt = await mined(revoke(alice, report.id, "data source corrected"));
    const [event] = parseEventLogs({ abi: reputationReporterAbi, logs: receipt.logs, eventName: "ReportRevoked" });
    expect(event!.args).toMatchObject({
      reportIdHash: keccak256(toHex(report.id)),
      reportId: report.id,
      wallet,
      reason: "data source corrected",
    });
    expect(await status(report.id)).toEqual([true, true, 0n, "", "data source corrected"]);
    await expect(revoke(alice, report.id, "again")).rejects.toThrow("report already revoked");
    expect(await status("REP-NOSUCHREPT")).toEqual([false, false, 0n, "", ""]);
  });

  it("returns what was published from the views", async () => {
    const fresh = holder(9100);
    const first = nextReport();
    const second = nextReport();
    await mined(publish(alice, { ...first, wallet: fresh, score: 55 }));
    const receipt = await mined(publish(alice, { ...second, wallet: fresh, score: 90 }));
    const publishedAt = (await pub.getBlock({ blockNumber: receipt.blockNumber })).timestamp;
    const read: typeof pub.readContract = (args) => pub.readContract(args);

    const [exists, attestation] = await read({
      address: reporter,
      abi: reputationReporterAbi,
      functionName: "verifyReport",
      args: [second.id],
    });
    expect(exists).toBe(true);
    expect(attestation).toEqual({
      wallet: fresh,
      buyer,
      reputationScore: 90,
      financialHealthScore: 64,
      loanCapacity: "5000 USDC",
      reportHash: second.hash,
      publishedAt,
    });

    const [byHashExists, reportId, byHash] = await read({
      address: reporter,
      abi: reputationReporterAbi,
      functionName: "verifyReportByHash",
      args: [first.hash],
    });
    expect([byHashExists, reportId, byHash.reputationScore]).toEqual([true, first.id, 55]);
    const [missing] = await read({
      address: reporter,
      abi: reputationReporterAbi,
      functionName: "verifyReportByHash",
      args: ["sha256:none"],
    });
    expect(missing).toBe(false);

    expect(
      await read({ address: reporter, abi: reputationReporterAbi, functionName: "getProfile", args: [fresh] }),
    ).toEqual({
      reportCount: 2n,
      latestReportId: second.id,
      latestReputationScore: 90,
      latestFinancialHealthScore: 64,
      lastPublishedAt: publishedAt,
    });
    expect(
      await read({ address: reporter, abi: reputationReporterAbi, functionName: "getWalletReportIds", args: [fresh] }),
    ).toEqual([first.id, second.id]);

    const count = await read({ address: reporter, abi: reputationReporterAbi, functionName: "reportCount" });
    await mined(publish(alice, nextReport()));
    expect(await read({ address: reporter, abi: reputationReporterAbi, functionName: "reportCount" })).toBe(count + 1n);
  });
});

// ------------------------------------------------------------ SanctionsList

describe("SanctionsList (the Chainalysis sanctions oracle's stand-in)", () => {
  const listed = holder(9101);
  const other = holder(9102);
  const isSanctioned = (addr: Address) =>
    pub.readContract({ address: SANCTIONS_ORACLE, abi: sanctionsListAbi, functionName: "isSanctioned", args: [addr] });

  beforeAll(async () => {
    expect(await placeSanctionsOracle(anvil.rpcUrl, ANVIL_DEV_KEY_0)).toEqual({
      address: SANCTIONS_ORACLE,
      owner: owner.account.address.toLowerCase(),
    });
  });

  it("has the original's selectors and event topics", () => {
    const selectors: Record<string, Hex> = {};
    for (const item of sanctionsListAbi) {
      if (item.type === "event") selectors[item.name] = toEventSelector(item);
      if (item.type === "function") selectors[item.name] = toFunctionSelector(item);
    }
    expect(selectors).toMatchObject({
      isSanctioned: "0xdf592f7d",
      addToSanctionsList: "0xb972dfcc",
      removeFromSanctionsList: "0xef782431",
      owner: "0x8da5cb5b",
      name: "0x06fdde03",
      SanctionedAddressesAdded: toEventSelector("SanctionedAddressesAdded(address[])"),
      SanctionedAddressesRemoved: toEventSelector("SanctionedAddressesRemoved(address[])"),
      SanctionedAddress: toEventSelector("SanctionedAddress(address)"),
    });
  });

  it("sits at the real address, owned by the deployer, named as the original", async () => {
    const at = { address: SANCTIONS_ORACLE, abi: sanctionsListAbi } as const;
    expect(await pub.readContract({ ...at, functionName: "name" })).toBe("Chainalysis sanctions oracle");
    expect(await pub.readContract({ ...at, functionName: "owner" })).toBe(owner.account.address);
    expect(await isSanctioned(listed)).toBe(false);
  });

  it("lists and delists for its owner only, logging each change", async () => {
    const write = (
      sender: typeof owner,
      functionName: "addToSanctionsList" | "removeFromSanctionsList",
      addrs: Address[],
    ) => sender.writeContract({ address: SANCTIONS_ORACLE, abi: sanctionsListAbi, functionName, args: [addrs] });
    await expect(write(alice, "addToSanctionsList", [listed])).rejects.toThrow(/Ownable: caller is not the owner/);
    const added = await mined(write(owner, "addToSanctionsList", [listed, other]));
    expect([await isSanctioned(listed), await isSanctioned(other)]).toEqual([true, true]);
    const removed = await mined(write(owner, "removeFromSanctionsList", [other]));
    expect([await isSanctioned(listed), await isSanctioned(other)]).toEqual([true, false]);
    const events = parseEventLogs({ abi: sanctionsListAbi, logs: [...added.logs, ...removed.logs] });
    expect(events.map((e) => [e.address, e.eventName, e.args])).toEqual([
      [SANCTIONS_ORACLE, "SanctionedAddressesAdded", { addrs: [listed, other] }],
      [SANCTIONS_ORACLE, "SanctionedAddressesRemoved", { addrs: [other] }],
    ]);
  });
});
