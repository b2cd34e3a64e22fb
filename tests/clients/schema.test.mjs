// Every method sluice serves that the execution-apis specification defines
// answers results that validate against the spec's own schemas
// (execution-apis/, copied from ethereum/execution-apis, commit noted in
// its README). Real responses from a fresh node after a transfer, an
// ERC-20 deploy and a token transfer (so blocks, receipts and logs are not
// empty). Run by run.sh with SUITE_RPC_URL set to a fresh node.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import Ajv from "ajv";
import { Interface, Wallet } from "ethers";
import yaml from "js-yaml";

import { ADDRS, CHAIN_ID, KEYS, TOKEN, freshAddress, rpc, until } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const SPEC = join(here, "execution-apis");

/** The spec: method name -> result schema, and every named schema. */
function loadSpec() {
  const read = (dir) => readdirSync(join(SPEC, dir)).filter((f) => f.endsWith(".yaml")).map((f) => yaml.load(readFileSync(join(SPEC, dir, f), "utf8")));
  const schemas = Object.assign({}, ...read("schemas"));
  const methods = new Map(read("eth").flat().map((m) => [m.name, m]));
  return { schemas, methods };
}

/** `#/components/schemas/X` refs pointed at the registered spec document. */
function retarget(node) {
  if (Array.isArray(node)) return node.map(retarget);
  if (node && typeof node === "object") {
    return Object.fromEntries(
      Object.entries(node).map(([k, v]) => [k, k === "$ref" && typeof v === "string" && v.startsWith("#/") ? `spec${v}` : retarget(v)]),
    );
  }
  return node;
}

test("results validate against the execution-apis schemas, for every spec method sluice serves", async () => {
  const { schemas, methods } = loadSpec();
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema({ $id: "spec", components: { schemas } });

  // Chain activity: a transfer, an ERC-20 deploy, a token transfer.
  const sent = [];
  const wallet = new Wallet(KEYS[2]);
  let nonce = Number(await rpc("eth_getTransactionCount", [wallet.address, "pending"]));
  const send = async (fields) => {
    const raw = await wallet.signTransaction({
      type: 2, chainId: CHAIN_ID, nonce: nonce++, gasLimit: 2_000_000n,
      maxFeePerGas: 3n * 10n ** 9n, maxPriorityFeePerGas: 10n ** 9n, value: 0n, ...fields,
    });
    const hash = await rpc("eth_sendRawTransaction", [raw]);
    sent.push(hash);
    let r = null;
    await until(async () => (r = await rpc("eth_getTransactionReceipt", [hash])) !== null, 20000, "a receipt");
    return r;
  };
  const token = new Interface(TOKEN.abi);
  const filter = await rpc("eth_newFilter", [{ fromBlock: "0x0" }]);
  const blockFilter = await rpc("eth_newBlockFilter");
  const pendingFilter = await rpc("eth_newPendingTransactionFilter");
  const transfer = await send({ to: freshAddress(800), value: 1000n, gasLimit: 21000n });
  const deployed = await send({ data: TOKEN.bytecode + token.encodeDeploy([10n ** 24n]).slice(2) });
  const moved = await send({ to: deployed.contractAddress, data: token.encodeFunctionData("transfer", [ADDRS[3], 77n]) });
  const at = moved.blockNumber;
  const call = { from: wallet.address, to: deployed.contractAddress, data: token.encodeFunctionData("balanceOf", [ADDRS[3]]) };

  const calls = [
    ["eth_chainId", []],
    ["eth_config", []],
    ["net_version", []],
    ["eth_syncing", []],
    ["eth_coinbase", []],
    ["eth_accounts", []],
    ["eth_blockNumber", []],
    ["eth_gasPrice", []],
    ["eth_maxPriorityFeePerGas", []],
    ["eth_blobBaseFee", []],
    ["eth_feeHistory", ["0x4", "latest", [25, 75]]],
    ["eth_getBalance", [wallet.address, "latest"]],
    ["eth_getTransactionCount", [wallet.address, at]],
    ["eth_getCode", [deployed.contractAddress, "latest"]],
    ["eth_getStorageAt", [deployed.contractAddress, "0x0", "latest"]],
    ["eth_call", [call, "latest"]],
    ["eth_estimateGas", [call, "latest"]],
    ["eth_createAccessList", [call, "latest"]],
    ["eth_simulateV1", [{ blockStateCalls: [{ calls: [call, { from: wallet.address, to: freshAddress(801), value: "0x1" }] }, { calls: [call] }], traceTransfers: true }, "latest"]],
    ["eth_simulateV1", [{ blockStateCalls: [{ calls: [call, { from: wallet.address, data: "0xfe" }] }], returnFullTransactions: true, validation: false }, "latest"]],
    ["eth_getBlockByNumber", [at, false]],
    ["eth_getBlockByNumber", [at, true]],
    ["eth_getBlockByNumber", ["0x0", false]],
    ["eth_getBlockByHash", [moved.blockHash, true]],
    ["eth_getBlockByNumber", ["0xffffffff", false]],
    ["eth_getBlockTransactionCountByHash", [moved.blockHash]],
    ["eth_getBlockTransactionCountByNumber", [at]],
    ["eth_getBlockReceipts", [at]],
    ["eth_getTransactionByHash", [transfer.transactionHash]],
    ["eth_getTransactionByHash", [moved.transactionHash]],
    ["eth_getTransactionByBlockHashAndIndex", [moved.blockHash, moved.transactionIndex]],
    ["eth_getTransactionByBlockNumberAndIndex", [at, moved.transactionIndex]],
    ["eth_getTransactionReceipt", [deployed.transactionHash]],
    ["eth_getTransactionReceipt", [moved.transactionHash]],
    ["eth_getLogs", [{ fromBlock: "0x0", toBlock: "latest", address: deployed.contractAddress }]],
    ["eth_getFilterChanges", [filter]],
    ["eth_getFilterChanges", [blockFilter]],
    ["eth_getFilterChanges", [pendingFilter]],
    ["eth_getFilterLogs", [filter]],
    ["eth_newFilter", [{ fromBlock: "latest" }]],
    ["eth_newBlockFilter", []],
    ["eth_newPendingTransactionFilter", []],
    ["eth_uninstallFilter", [filter]],
  ];

  const failures = [];
  const covered = new Set();
  for (const [method, params] of calls) {
    const spec = methods.get(method);
    assert.ok(spec, `${method} is not in the spec`);
    const result = await rpc(method, params);
    const validate = ajv.compile(retarget(spec.result.schema));
    covered.add(method);
    if (!validate(result)) {
      failures.push(`${method}(${JSON.stringify(params).slice(0, 80)}): ${ajv.errorsText(validate.errors, { separator: "; " })}`);
    }
  }
  const submit = ajv.compile(retarget(methods.get("eth_sendRawTransaction").result.schema));
  for (const hash of sent) if (!submit(hash)) failures.push(`eth_sendRawTransaction: ${ajv.errorsText(submit.errors)}`);
  covered.add("eth_sendRawTransaction");
  assert.deepEqual(failures, [], failures.join("\n"));

  // The validator is live: a block without its hash, or with a short one,
  // is refused.
  const block = await rpc("eth_getBlockByNumber", [at, false]);
  const blockSchema = ajv.compile(retarget(methods.get("eth_getBlockByNumber").result.schema));
  assert.ok(blockSchema(block));
  assert.ok(!blockSchema({ ...block, hash: undefined }), "a block without its hash");
  assert.ok(!blockSchema({ ...block, hash: "0x1234" }), "a short hash");

  // eth_getProof is refused by design (README: stateRoot is an app hash,
  // there is no trie to prove against): its answer is that refusal, never
  // a result a schema could check.
  await assert.rejects(
    rpc("eth_getProof", [deployed.contractAddress, [], "latest"]),
    (e) => /-32000/.test(e.message) && /not supported/.test(e.message),
  );
  covered.add("eth_getProof");

  // Every spec method sluice serves is covered above: a method added later
  // cannot escape the check.
  const served = [];
  for (const method of methods.keys()) {
    try {
      await rpc(method, []);
      served.push(method);
    } catch (e) {
      if (!/-32601/.test(e.message) && !/"code":-32601/.test(e.message)) served.push(method);
    }
  }
  const missing = served.filter((m) => !covered.has(m));
  assert.deepEqual(missing, [], `served but not validated: ${missing.join(", ")}`);
});
