// Shared by the JS flows: the node under test, the dev keys and the token
// artifact. run.sh starts one sluice node per client and passes its URL in
// SUITE_RPC_URL (WebSocket: the same port, ws://).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** HTTP JSON-RPC URL of the node under test. */
export const RPC_URL = process.env.SUITE_RPC_URL ?? "http://127.0.0.1:8545";
/** The same port, as a WebSocket. */
export const WS_URL = RPC_URL.replace(/^http/, "ws");
/** sluice's dev chain id (anvil's and hardhat's). */
export const CHAIN_ID = 31337;

/** The first dev keys of the test mnemonic (anvil / hardhat accounts 0-5). */
export const KEYS = [
  "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
  "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
  "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
  "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
];
/** Their addresses. */
export const ADDRS = [
  "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
  "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
  "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
  "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
  "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
  "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc",
];
/** Each dev account's genesis balance: 10,000 ether. */
export const DEV_BALANCE = 10_000n * 10n ** 18n;
/** sluice's constant base fee: 1 gwei. */
export const BASE_FEE = 10n ** 9n;

/** The compiled ERC-20 (contracts/SluiceToken.json). */
export const TOKEN = JSON.parse(readFileSync(join(here, "contracts", "SluiceToken.json"), "utf8"));

/** A fresh address nobody funded. */
export function freshAddress(i) {
  return "0x" + (0xc0ffee000000n + BigInt(i)).toString(16).padStart(40, "0");
}

/** Resolves after `ms`. */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Waits until `check()` is true (polled), or fails after `ms`. */
export async function until(check, ms, what) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** Walks an error's `cause` chain (viem wraps errors in errors). */
export function causes(err) {
  const out = [];
  for (let e = err; e && out.length < 20; e = e.cause) out.push(e);
  return out;
}

/** One JSON-RPC call to `url` (the node by default); throws on an error answer. */
export async function rpc(method, params = [], url = RPC_URL) {
  const r = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const body = await r.json();
  if (body.error) throw new Error(`${url} ${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}
