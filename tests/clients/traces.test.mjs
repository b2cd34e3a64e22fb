// geth's tracers, sluice against anvil (both on revm-inspectors): the same
// signed transactions on the same genesis (anvil's dev accounts from the
// same mnemonic, 10,000 ETH each, chain id 31337, osaka), then every
// tracer's output for each, compared field for field. Run by run.sh with
// SUITE_RPC_URL set to a fresh node; anvil is started here.
//
// What is removed before comparing, and why: anvil.mjs (`withoutCoinbase`,
// `normalize`).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Interface, Wallet } from "ethers";

import { TRACERS, compareTraces, normalize, startAnvil, withoutCoinbase } from "./anvil.mjs";
import { compileSource } from "./compile.mjs";
import { CHAIN_ID, KEYS, RPC_URL, freshAddress, rpc, until } from "./lib.mjs";

const GWEI = 10n ** 9n;

let anvil;
let ANVIL_URL;

before(async () => {
  anvil = await startAnvil();
  ANVIL_URL = anvil.url;
});

after(() => anvil?.stop());

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

  for (const [label, hash, gasLimit] of cases) await compareTraces(label, hash, gasLimit, RPC_URL, ANVIL_URL);
  assert.equal(cases.length, 5);

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
