import { bytesToHex } from "viem";
import { mnemonicToAccount } from "viem/accounts";

/**
 * Anvil's well-known dev mnemonic. Its keys are public knowledge and must never hold real funds;
 * they are the only keys this repository names.
 */
const ANVIL_DEV_MNEMONIC = "test test test test test test test test test test test junk";

/** Anvil dev account #index (address lowercase, private key hex). */
export function anvilDevAccount(index: number) {
  const account = mnemonicToAccount(ANVIL_DEV_MNEMONIC, { addressIndex: index });
  const privateKey = bytesToHex(account.getHdKey().privateKey!);
  return { address: account.address.toLowerCase() as `0x${string}`, privateKey };
}

/** Which anvil dev account plays which part on the devnet. */
export const DEVNET_ROLES = {
  /** #0 deploys the tokens (their owner, who seeds history) and administers the reporter. */
  deployer: anvilDevAccount(0),
  /** #1 and #2 are lenders, funded with both stablecoins, who pay for screens. */
  lenders: [
    { label: "lender-1 (anvil #1)", ...anvilDevAccount(1) },
    { label: "lender-2 (anvil #2)", ...anvilDevAccount(2) },
  ],
  /** #3 holds the reporter role: the service publishes passports with it. */
  reporter: anvilDevAccount(3),
  /** #4 relays EIP-3009 authorizations (self-facilitated settlement). */
  relayer: anvilDevAccount(4),
  /** #5 is the treasury that payments are made out to (publicPayTo). */
  treasury: anvilDevAccount(5),
};
