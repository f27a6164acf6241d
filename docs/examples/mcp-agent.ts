// An AI agent screens a wallet over MCP and pays with x402 by itself (the x402 MCP transport).
// With `npm start` running: npx tsx docs/examples/mcp-agent.ts
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { x402Client } from "@x402/core/client";
import type { PaymentRequired } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm";
import { privateKeyToAccount } from "viem/accounts";

const apiUrl = process.env.API_URL ?? "http://127.0.0.1:42069";
const manifest = JSON.parse(readFileSync(process.env.DEVNET_MANIFEST ?? ".devnet/manifest.json", "utf8"));

const lender = privateKeyToAccount(manifest.lenders[0].privateKey); // an anvil dev key
const payer = x402Client.fromConfig({
  schemes: [{ network: "eip155:42220", client: new ExactEvmScheme(lender) }],
  // The devnet's tokens are not the client's known Celo assets: allow them, up to 0.10 a payment.
  spendControls: {
    allowedAssets: [manifest.tokens.USDT, manifest.tokens.USDC].map((token) => ({
      network: "eip155:42220" as const,
      asset: token.address,
      maxAmountPerPayment: "100000",
    })),
  },
});

const mcp = new Client({ name: "lender-agent", version: "1.0.0" });
await mcp.connect(new StreamableHTTPClientTransport(new URL(`${apiUrl}/mcp`)));
const { tools } = await mcp.listTools();
console.log("tools:", tools.map((tool) => tool.name).join(", "));

const call = {
  name: "screen_wallet",
  arguments: { walletAddress: manifest.personas.salaried.address, callerAddress: lender.address },
};
// Unpaid, a paid tool answers isError with the x402 PaymentRequired: what to pay, to whom, in which token.
const unpaid = await mcp.callTool(call);
const required = unpaid.structuredContent as PaymentRequired;
// Sign an EIP-3009 authorization for it, and call again with the payment in _meta.
const payment = await payer.createPaymentPayload(required);
const paid = await mcp.callTool({ ...call, _meta: { "x402/payment": payment } });
if (paid.isError) throw new Error(`screen_wallet failed: ${JSON.stringify(paid.structuredContent)}`);
console.log(JSON.stringify(paid.structuredContent, null, 2));
console.log("payment:", JSON.stringify(paid._meta?.["x402/payment-response"]));
await mcp.close();
