// viem against sluice: public and wallet clients over HTTP, an ERC-20,
// revert reasons, geth-classified errors, watchBlocks / watchContractEvent
// over WebSocket, and simulateCalls (eth_simulateV1) against execution. Run
// by run.sh with SUITE_RPC_URL set to a fresh node.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  ContractFunctionRevertedError,
  InsufficientFundsError,
  MethodNotFoundRpcError,
  NonceTooLowError,
  createPublicClient,
  createWalletClient,
  decodeEventLog,
  getContractAddress,
  http,
  parseAbiItem,
  webSocket,
  zeroAddress,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { foundry } from "viem/chains";

import { ADDRS, BASE_FEE, CHAIN_ID, DEV_BALANCE, KEYS, RPC_URL, TOKEN, WS_URL, causes, freshAddress, until } from "./lib.mjs";

// foundry = chain id 31337 (anvil's). Only the polling cadence is set (the
// default, 4 s, is meant for public chains).
const publicClient = createPublicClient({ chain: foundry, transport: http(RPC_URL), pollingInterval: 100 });
const account = privateKeyToAccount(KEYS[0]);
const wallet = createWalletClient({ account, chain: foundry, transport: http(RPC_URL) });
const SUPPLY = 1_000_000n * 10n ** 18n;
const abi = TOKEN.abi;
let token; // address, set by "deploys an ERC-20"

/** Every error in `err`'s cause chain, by name. */
const names = (err) => causes(err).map((e) => e.name);

test("viem: chain id, latest block and balances", async () => {
  assert.equal(await publicClient.getChainId(), CHAIN_ID);
  // The node seals an empty block when idle: the head may move between two
  // reads, never backwards.
  const before = await publicClient.getBlockNumber({ cacheTime: 0 });
  const block = await publicClient.getBlock({ blockTag: "latest" });
  assert.equal(block.baseFeePerGas, BASE_FEE);
  const after = await publicClient.getBlockNumber({ cacheTime: 0 });
  assert.ok(before <= block.number && block.number <= after, `${before} <= ${block.number} <= ${after}`);
  assert.equal(await publicClient.getBalance({ address: ADDRS[1] }), DEV_BALANCE);
  assert.equal(await publicClient.getTransactionCount({ address: ADDRS[0] }), 0);
});

test("viem: transfers wait for receipts; balances, fees and nonces add up", async () => {
  const to = freshAddress(2);
  const before = await publicClient.getBalance({ address: ADDRS[0] });
  const values = [10n, 20n, 30n, 40n, 50n].map((v) => v * 10n ** 14n);
  const hashes = [];
  // Back to back: viem reads the "pending" nonce before each send.
  for (const value of values) hashes.push(await wallet.sendTransaction({ to, value }));
  assert.equal(await publicClient.getTransactionCount({ address: ADDRS[0], blockTag: "pending" }), 5);
  const receipts = await Promise.all(hashes.map((hash) => publicClient.waitForTransactionReceipt({ hash })));
  let fees = 0n;
  for (const [i, r] of receipts.entries()) {
    assert.equal(r.status, "success");
    assert.equal(r.gasUsed, 21000n);
    assert.equal(r.transactionHash, hashes[i]);
    assert.equal(r.from, ADDRS[0].toLowerCase());
    assert.equal(r.type, "eip1559");
    fees += r.gasUsed * r.effectiveGasPrice;
    const tx = await publicClient.getTransaction({ hash: hashes[i] });
    assert.equal(tx.nonce, i);
    assert.equal(tx.value, values[i]);
    assert.equal(tx.blockNumber, r.blockNumber);
  }
  const sum = values.reduce((a, b) => a + b);
  assert.equal(await publicClient.getBalance({ address: to }), sum);
  assert.equal(await publicClient.getBalance({ address: ADDRS[0] }), before - sum - fees);
  assert.equal(await publicClient.getTransactionCount({ address: ADDRS[0] }), 5);
});

test("viem: deploys an ERC-20", async () => {
  const hash = await wallet.deployContract({ abi, bytecode: TOKEN.bytecode, args: [SUPPLY] });
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "success");
  token = receipt.contractAddress;
  assert.equal(token, getContractAddress({ from: ADDRS[0], nonce: 5n }).toLowerCase());
  assert.equal(await publicClient.getCode({ address: token }), TOKEN.deployedBytecode);
  const read = (functionName, args = []) => publicClient.readContract({ address: token, abi, functionName, args });
  assert.equal(await read("name"), "Sluice Test Token");
  assert.equal(await read("symbol"), "SLT");
  assert.equal(await read("decimals"), 18);
  assert.equal(await read("totalSupply"), SUPPLY);
  assert.equal(await read("balanceOf", [ADDRS[0]]), SUPPLY);
});

test("viem: ERC-20 transfer, balanceOf and the Transfer log in the receipt", async () => {
  const { request } = await publicClient.simulateContract({ account, address: token, abi, functionName: "transfer", args: [ADDRS[1], 2500n] });
  const hash = await wallet.writeContract(request);
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "success");
  assert.ok(receipt.gasUsed > 21000n && receipt.gasUsed < 100000n, `gasUsed ${receipt.gasUsed}`);
  assert.equal(receipt.logs.length, 1);
  const ev = decodeEventLog({ abi, ...receipt.logs[0] });
  assert.equal(ev.eventName, "Transfer");
  assert.deepEqual(ev.args, { from: ADDRS[0], to: ADDRS[1], value: 2500n });
  assert.equal(await publicClient.readContract({ address: token, abi, functionName: "balanceOf", args: [ADDRS[1]] }), 2500n);
  assert.equal(await publicClient.readContract({ address: token, abi, functionName: "balanceOf", args: [ADDRS[0]] }), SUPPLY - 2500n);
});

test("viem: Transfer logs by filter (getContractEvents and getLogs)", async () => {
  for (const value of [11n, 12n]) {
    const hash = await wallet.writeContract({ address: token, abi, functionName: "transfer", args: [ADDRS[2], value] });
    await publicClient.waitForTransactionReceipt({ hash });
  }
  const mint = await publicClient.getContractEvents({ address: token, abi, eventName: "Transfer", args: { from: zeroAddress }, fromBlock: 0n });
  assert.equal(mint.length, 1);
  assert.equal(mint[0].args.value, SUPPLY);
  const toTwo = await publicClient.getLogs({
    address: token,
    event: parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)"),
    args: { to: ADDRS[2] },
    fromBlock: 0n,
    toBlock: "latest",
  });
  assert.deepEqual(
    toTwo.map((l) => l.args.value),
    [11n, 12n],
  );
  assert.ok(toTwo[0].blockNumber < toTwo[1].blockNumber);
  const all = await publicClient.getContractEvents({ address: token, abi, fromBlock: 0n });
  assert.deepEqual(
    all.map((l) => l.eventName),
    ["Transfer", "Transfer", "Transfer", "Transfer"],
  );
});

test("viem: watchContractEvent over HTTP polls an eth_newFilter filter; block filters report hashes", async () => {
  // viem watches events over HTTP with a filter when the node serves them
  // (falling back to eth_getLogs when it does not): record what it sends.
  const methods = [];
  const onFetchRequest = (_request, init) => {
    for (const call of [JSON.parse(init.body)].flat()) methods.push(call.method);
  };
  const client = createPublicClient({ chain: foundry, transport: http(RPC_URL, { onFetchRequest }), pollingInterval: 100 });
  const blockFilter = await client.createBlockFilter();
  const logs = [];
  const unwatch = client.watchContractEvent({ address: token, abi, eventName: "Transfer", args: { to: ADDRS[4] }, onLogs: (ls) => logs.push(...ls) });
  const hashes = [];
  let receipts;
  try {
    await until(() => methods.includes("eth_getFilterChanges"), 10000, "the filter's first poll");
    for (const value of [41n, 42n, 43n]) {
      hashes.push(await wallet.writeContract({ address: token, abi, functionName: "transfer", args: [ADDRS[4], value] }));
    }
    receipts = await Promise.all(hashes.map((hash) => publicClient.waitForTransactionReceipt({ hash })));
    await until(() => logs.length >= 3, 10000, "the three Transfer logs");
  } finally {
    unwatch();
  }
  assert.deepEqual(
    logs.map((l) => l.args.value),
    [41n, 42n, 43n],
  );
  assert.deepEqual(
    logs.map((l) => l.transactionHash),
    hashes,
  );
  assert.ok(methods.includes("eth_newFilter") && !methods.includes("eth_getLogs"), methods.join(" "));
  await until(() => methods.includes("eth_uninstallFilter"), 5000, "the filter uninstalled by unwatch()");
  // Every block since the block filter was made, the transfers' among them.
  const blocks = await client.getFilterChanges({ filter: blockFilter });
  for (const r of receipts) assert.ok(blocks.includes(r.blockHash), `block ${r.blockNumber} reported`);
  assert.equal(await client.uninstallFilter({ filter: blockFilter }), true);
  assert.equal(await client.uninstallFilter({ filter: blockFilter }), false);
});

test("viem: a reverting transfer surfaces as ContractFunctionRevertedError with its reason", async () => {
  const poor = privateKeyToAccount(KEYS[3]); // holds no tokens
  const args = { address: token, abi, functionName: "transfer", args: [ADDRS[1], 1n] };
  await assert.rejects(publicClient.simulateContract({ account: poor, ...args }), (e) => {
    const revert = causes(e).find((c) => c instanceof ContractFunctionRevertedError);
    assert.ok(revert, names(e).join(" <- "));
    assert.equal(revert.reason, "SluiceToken: insufficient balance");
    return true;
  });
  // writeContract estimates gas: the revert shows there, decoded.
  await assert.rejects(wallet.writeContract({ account: poor, ...args }), (e) => {
    const revert = causes(e).find((c) => c instanceof ContractFunctionRevertedError);
    assert.ok(revert, names(e).join(" <- "));
    assert.equal(revert.reason, "SluiceToken: insufficient balance");
    return true;
  });
  // With a gas limit it is mined and reverts on chain.
  const hash = await wallet.writeContract({ account: poor, ...args, gas: 100000n });
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "reverted");
  assert.ok(receipt.gasUsed > 21000n && receipt.gasUsed < 100000n);
  assert.equal(await publicClient.getTransactionCount({ address: poor.address }), 1);
});

test("viem: errors as with geth (NonceTooLowError, InsufficientFundsError, MethodNotFoundRpcError)", async () => {
  await assert.rejects(wallet.sendTransaction({ to: ADDRS[1], value: 1n, nonce: 0 }), (e) => {
    assert.ok(causes(e).some((c) => c instanceof NonceTooLowError), names(e).join(" <- "));
    return true;
  });
  const broke = privateKeyToAccount(generatePrivateKey());
  // Through eth_sendRawTransaction (gas given, nothing to estimate)...
  await assert.rejects(wallet.sendTransaction({ account: broke, to: ADDRS[1], value: 10n ** 18n, gas: 21000n }), (e) => {
    assert.ok(causes(e).some((c) => c instanceof InsufficientFundsError), names(e).join(" <- "));
    return true;
  });
  // ...and through eth_estimateGas.
  await assert.rejects(wallet.sendTransaction({ account: broke, to: ADDRS[1], value: 10n ** 18n }), (e) => {
    assert.ok(causes(e).some((c) => c instanceof InsufficientFundsError), names(e).join(" <- "));
    return true;
  });
  await assert.rejects(publicClient.request({ method: "eth_noSuchMethod", params: [] }), (e) => {
    assert.ok(e instanceof MethodNotFoundRpcError, names(e).join(" <- "));
    assert.equal(e.code, -32601);
    return true;
  });
  // The client is still fine afterwards.
  assert.equal(await publicClient.getChainId(), CHAIN_ID);
});

test("viem: watchBlocks and watchContractEvent over WebSocket get every block and event, in order", async () => {
  const ws = createPublicClient({ chain: foundry, transport: webSocket(WS_URL) });
  const blocks = [];
  const logs = [];
  const unwatchBlocks = ws.watchBlocks({ onBlock: (b) => blocks.push(b) });
  const unwatchEvents = ws.watchContractEvent({ address: token, abi, eventName: "Transfer", onLogs: (ls) => logs.push(...ls) });
  try {
    // JSON-RPC over the socket answers like HTTP.
    assert.equal(await ws.getBalance({ address: ADDRS[1] }), await publicClient.getBalance({ address: ADDRS[1] }));
    // Warm-up: once one transfer's block and log have arrived, both
    // subscriptions are live; everything after must arrive complete.
    const first = await wallet.writeContract({ address: token, abi, functionName: "transfer", args: [ADDRS[5], 1n] });
    const start = (await publicClient.waitForTransactionReceipt({ hash: first })).blockNumber;
    await until(() => logs.length === 1 && blocks.some((b) => b.number >= start), 10000, "the first notifications");
    logs.length = 0;

    const hashes = [];
    for (let i = 0; i < 12; i++) {
      hashes.push(await wallet.writeContract({ address: token, abi, functionName: "transfer", args: [ADDRS[5], 300n + BigInt(i)], gas: 80000n }));
      if (i % 3 === 2) await publicClient.waitForTransactionReceipt({ hash: hashes.at(-1) }); // several blocks
    }
    const receipts = await Promise.all(hashes.map((hash) => publicClient.waitForTransactionReceipt({ hash })));
    const end = receipts.at(-1).blockNumber;
    await until(() => logs.length >= hashes.length && blocks.at(-1)?.number >= end, 10000, "WebSocket notifications");

    const seen = blocks.map((b) => b.number).filter((n) => n > start && n <= end);
    const expected = [];
    for (let n = start + 1n; n <= end; n++) expected.push(n);
    assert.deepEqual(seen, expected, "every block, in order");
    assert.ok(end - start >= 4n, `spread over ${end - start} blocks`);
    for (const b of blocks) assert.equal(b.baseFeePerGas, BASE_FEE);
    assert.deepEqual(
      logs.map((l) => l.args.value),
      hashes.map((_, i) => 300n + BigInt(i)),
      "every event, in order",
    );
    assert.ok(logs.every((l) => l.args.from === ADDRS[0] && l.args.to === ADDRS[5] && l.eventName === "Transfer"));
    assert.deepEqual(
      logs.map((l) => l.transactionHash),
      hashes,
    );
  } finally {
    unwatchBlocks();
    unwatchEvents();
    (await ws.transport.getRpcClient()).close();
  }
});


test("viem: simulateCalls (eth_simulateV1) of a transfer and an ERC-20 call gives what executing them gives", async () => {
  const to = freshAddress(77);
  const value = 12_345n * 10n ** 12n;
  const calls = [
    { to, value },
    { to: token, abi, functionName: "transfer", args: [ADDRS[2], 777n] },
    { to: token, abi, functionName: "balanceOf", args: [ADDRS[2]] },
  ];
  const before = await publicClient.readContract({ address: token, abi, functionName: "balanceOf", args: [ADDRS[2]] });
  const { results, block } = await publicClient.simulateCalls({ account: ADDRS[0], calls });
  assert.equal(results.length, 3);
  for (const [i, r] of results.entries()) assert.equal(r.status, "success", `call ${i}: ${r.error}`);
  assert.equal(results[0].gasUsed, 21000n, "a plain transfer");
  assert.equal(results[0].data, "0x");
  assert.equal(results[1].result, true, "transfer() returned true");
  assert.equal(results[2].result, before + 777n, "the later call sees the earlier one's effect");
  assert.equal(results[1].logs.length, 1);
  const simulated = decodeEventLog({ abi, ...results[1].logs[0] });
  assert.deepEqual(simulated.args, { from: ADDRS[0], to: ADDRS[2], value: 777n });
  assert.ok(block.number > 0n);
  // Nothing was sent.
  assert.equal(await publicClient.getBalance({ address: to }), 0n);

  // Executing the same calls, in the same order, gives the same outcome.
  const pay = await publicClient.waitForTransactionReceipt({ hash: await wallet.sendTransaction({ to, value }) });
  const send = await publicClient.waitForTransactionReceipt({
    hash: await wallet.writeContract({ address: token, abi, functionName: "transfer", args: [ADDRS[2], 777n] }),
  });
  assert.equal(pay.status, "success");
  assert.equal(send.status, "success");
  assert.equal(pay.gasUsed, results[0].gasUsed, "the transfer's gas");
  assert.equal(send.gasUsed, results[1].gasUsed, "the ERC-20 call's gas");
  const strip = (l) => ({ address: l.address.toLowerCase(), topics: l.topics, data: l.data });
  assert.deepEqual(send.logs.map(strip), results[1].logs.map(strip), "the same log");
  assert.equal(await publicClient.getBalance({ address: to }), value);
  assert.equal(await publicClient.readContract({ address: token, abi, functionName: "balanceOf", args: [ADDRS[2]] }), results[2].result);
});
