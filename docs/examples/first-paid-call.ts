// A lender's first paid call: POST /api/lender/screen, paid with x402 by the stock @x402/fetch client.
// With `npm start` running: npx tsx docs/examples/first-paid-call.ts
import { readFileSync } from "node:fs";
import { ExactEvmScheme } from "@x402/evm";
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from "@x402/fetch";
import { privateKeyToAccount } from "viem/accounts";

const apiUrl = process.env.API_URL ?? "http://127.0.0.1:42069";
const manifest = JSON.parse(readFileSync(process.env.DEVNET_MANIFEST ?? ".devnet/manifest.json", "utf8"));

const lender = privateKeyToAccount(manifest.lenders[0].privateKey); // an anvil dev key
const fetchWithPayment = wrapFetchWithPaymentFromConfig(fetch, {
  schemes: [{ network: "eip155:42220", client: new ExactEvmScheme(lender) }],
  // The devnet's USDT and USDC are not the client's known Celo assets: without this spend control
  // it refuses to pay. Allow them by address, up to 0.10 (100000 units, 6 decimals) per payment.
  spendControls: {
    allowedAssets: [manifest.tokens.USDT, manifest.tokens.USDC].map((token) => ({
      network: "eip155:42220" as const,
      asset: token.address,
      maxAmountPerPayment: "100000",
    })),
  },
});

const res = await fetchWithPayment(`${apiUrl}/api/lender/screen`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ walletAddress: manifest.personas.salaried.address, callerAddress: lender.address }),
});
if (!res.ok) throw new Error(`screen answered ${res.status}: ${await res.text()}`);
console.log(JSON.stringify(await res.json(), null, 2));
console.log("payment:", JSON.stringify(decodePaymentResponseHeader(res.headers.get("payment-response")!)));
