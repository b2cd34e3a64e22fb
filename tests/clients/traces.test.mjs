// geth's tracers, sluice against anvil (both on revm-inspectors): the same
// signed transactions on the same genesis (anvil's dev accounts from the
// same mnemonic, 10,000 ETH each, chain id 31337, prague), then every
// tracer's output for each, compared field for field. Run by run.sh with
// SUITE_RPC_URL set to a fresh node; anvil is started here.
//
// anvil records steps only with --steps-tracing. One difference is removed
// before comparing because it is one of the chains, not of tracing: the
// coinbase's balance (prestateTracer), since priority fees are the fee cap
// minus the base fee, which sluice keeps fixed and anvil moves block by
// block. Two more are where anvil departs from geth (see `normalize`).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";

import { Interface, Wallet } from "ethers";

import { compileSource } from "./compile.mjs";
import { CHAIN_ID, KEYS, RPC_URL, freshAddress, rpc, until } from "./lib.mjs";

const require = createRequire(import.meta.url);
const arch = { x64: "amd64", arm64: "arm64" }[process.arch];
const ANVIL = join(dirname(require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`)), "bin", "anvil");
const COINBASE = "0x0000000000000000000000000000000000000000";
const GWEI = 10n ** 9n;

let anvil;
let ANVIL_URL;

before(async () => {
  const port = await new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
  anvil = spawn(ANVIL, ["--port", String(port), "--chain-id", String(CHAIN_ID), "--hardfork", "prague", "--steps-tracing", "--silent"], {
    stdio: "ignore",
  });
  ANVIL_URL = `http://127.0.0.1:${port}`;
  await until(
    async () => {
      try {
        return BigInt(await rpc("eth_chainId", [], ANVIL_URL)) === BigInt(CHAIN_ID);
      } catch {
        return false;
      }
    },
    20000,
    "anvil to start",
  );
});

after(() => anvil?.kill());

/** Sends `raw` to both nodes; returns the receipts (sluice, anvil). */
async function sendBoth(raw) {
  const [a, b] = await Promise.all([rpc("eth_sendRawTransaction", [raw], RPC_URL), rpc("eth_sendRawTransaction", [raw], ANVIL_URL)]);
  assert.equal(a, b, "the same hash on both");
  const receipt = async (url) => {
    let r = null;
    await until(async () => (r = await rpc("eth_getTransactionReceipt", [a], url)) !== null, 20000, `receipt on ${url}`);
    return r;
  };
  return [a, await receipt(RPC_URL), await receipt(ANVIL_URL)];
}

/** Removes the coinbase from prestateTracer output (see the top). */
function withoutCoinbase(trace) {
  const strip = (m) => (m && typeof m === "object" ? Object.fromEntries(Object.entries(m).filter(([k]) => k.toLowerCase() !== COINBASE)) : m);
  if (trace && trace.pre && trace.post) return { pre: strip(trace.pre), post: strip(trace.post) };
  return strip(trace);
}

/**
 * The two ways anvil 1.7.1 (built on an older revm-inspectors) departs from
 * geth, and sluice does not, made equal before comparing; each is checked
 * on sluice's side against geth's rule:
 * - callTracer's top call: geth reports the transaction's gas limit as its
 *   `gas`; anvil the gas left after the intrinsic cost.
 * - prestateTracer: geth (1.16, go-ethereum#31855) omits accounts that
 *   were empty before the transaction, in both modes, unless asked with
 *   `includeEmpty`; anvil lists them with a zero balance (and in diffMode
 *   so does revm-inspectors 0.44, which sluice corrects).
 */
function normalize(name, sluice, anvil, gasLimit) {
  if (name.startsWith("callTracer")) {
    assert.equal(BigInt(sluice.gas), gasLimit, `${name}: the top call's gas is the transaction's gas limit (geth)`);
    return [{ ...sluice, gas: undefined }, { ...anvil, gas: undefined }];
  }
  // Empty before: no balance, nonce or code (its slots, if listed, all zero).
  const empty = (a) =>
    BigInt(a.balance ?? 0) === 0n && !a.nonce && !a.code && Object.values(a.storage ?? {}).every((v) => BigInt(v) === 0n);
  const noEmpty = (state, what) => {
    for (const [addr, a] of Object.entries(state)) assert.ok(!empty(a), `${what}: ${addr} was empty before; geth omits it`);
  };
  const dropEmpty = (state) => Object.fromEntries(Object.entries(state).filter(([, a]) => !empty(a)));
  if (name === "prestateTracer") {
    noEmpty(sluice, name);
    return [sluice, dropEmpty(anvil)];
  }
  if (name === "prestateTracer diffMode") {
    noEmpty(sluice.pre, name);
    return [sluice, { ...anvil, pre: dropEmpty(anvil.pre) }];
  }
  return [sluice, anvil];
}

const TRACERS = [
  ["struct logger", {}],
  ["struct logger, memory and return data", { enableMemory: true, enableReturnData: true }],
  ["struct logger, no stack, no storage", { disableStack: true, disableStorage: true }],
  ["callTracer", { tracer: "callTracer" }],
  ["callTracer withLog", { tracer: "callTracer", tracerConfig: { withLog: true } }],
  ["callTracer onlyTopCall", { tracer: "callTracer", tracerConfig: { onlyTopCall: true } }],
  ["prestateTracer", { tracer: "prestateTracer" }],
  ["prestateTracer diffMode", { tracer: "prestateTracer", tracerConfig: { diffMode: true } }],
  ["4byteTracer", { tracer: "4byteTracer" }],
  ["noopTracer", { tracer: "noopTracer" }],
];

test("every tracer's output equals anvil's for transfers, a deploy, nested calls with a revert, logs, a self-destruct and a failed call", async () => {
  const contracts = compileSource("contracts/TraceCases.sol");
  const parent = new Interface(contracts.Parent.abi);
  const wallet = new Wallet(KEYS[0]);
  let nonce = 0;
  const sign = (fields) =>
    wallet.signTransaction({
      type: 2,
      chainId: CHAIN_ID,
      nonce: nonce++,
      maxFeePerGas: 2n * GWEI,
      maxPriorityFeePerGas: 2n * GWEI,
      gasLimit: 1_000_000n,
      value: 0n,
      ...fields,
    });

  const cases = [];
  const run = async (label, fields, status = "0x1") => {
    const [hash, onSluice, onAnvil] = await sendBoth(await sign(fields));
    assert.equal(onSluice.status, status, `${label} on sluice`);
    assert.equal(onAnvil.status, status, `${label} on anvil`);
    assert.equal(onSluice.gasUsed, onAnvil.gasUsed, `${label}: gas used`);
    cases.push([label, hash, BigInt(fields.gasLimit ?? 1_000_000n)]);
    return onSluice;
  };
  await run("transfer", { to: freshAddress(700), value: 10n ** 18n, gasLimit: 21000n });
  const deployed = await run("deploy (creates its child)", { data: "0x" + contracts.Parent.evm.bytecode.object });
  const at = deployed.contractAddress;
  await run("nested calls, a revert in the middle, logs, storage", { to: at, data: parent.encodeFunctionData("nested", [5n]) });
  await run("self-destruct with value", { to: at, value: 1000n, data: parent.encodeFunctionData("kill") });
  await run("a call that reverts", { to: at, data: parent.encodeFunctionData("fail") }, "0x0");

  let compared = 0;
  for (const [label, hash, gasLimit] of cases) {
    for (const [name, opts] of TRACERS) {
      const [a, b] = await Promise.all([
        rpc("debug_traceTransaction", [hash, opts], RPC_URL),
        rpc("debug_traceTransaction", [hash, opts], ANVIL_URL),
      ]);
      const [x, y] = normalize(name, withoutCoinbase(a), withoutCoinbase(b), gasLimit);
      assert.deepStrictEqual(x, y, `${label}: ${name}`);
      compared++;
    }
  }
  assert.equal(compared, cases.length * TRACERS.length);

  // debug_traceCall on the state both chains reached.
  const call = { from: wallet.address, to: at, data: parent.encodeFunctionData("nested", [9n]), gas: "0xf4240" };
  for (const [name, opts] of TRACERS) {
    const a = await rpc("debug_traceCall", [call, "latest", opts], RPC_URL);
    // anvil answers "unsupported tracer type" to 4byteTracer on a call.
    if (name === "4byteTracer") {
      assert.deepStrictEqual(a, { "0x10b80908-32": 1, "0x773acdef-32": 2, "0xa169ce09-0": 1 });
      continue;
    }
    const b = await rpc("debug_traceCall", [call, "latest", opts], ANVIL_URL);
    const [x, y] = normalize(name, withoutCoinbase(a), withoutCoinbase(b), 1_000_000n);
    assert.deepStrictEqual(x, y, `traceCall: ${name}`);
  }
});
