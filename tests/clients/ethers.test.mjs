// ethers v6 against sluice: the default batching JsonRpcProvider, a Wallet,
// an ERC-20, revert reasons, geth-classified errors, and WebSocketProvider
// subscriptions. Run by run.sh with SLUICE_RPC_URL set to a fresh node.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { ContractFactory, Contract, JsonRpcProvider, NonceManager, Wallet, WebSocketProvider, ethers } from "ethers";

import { ADDRS, BASE_FEE, CHAIN_ID, DEV_BALANCE, KEYS, RPC_URL, TOKEN, WS_URL, freshAddress, until } from "./lib.mjs";

// Only the polling cadence is set (the default, 4 s, is meant for public
// chains); batching and everything else stay at ethers' defaults.
const provider = new JsonRpcProvider(RPC_URL, undefined, { pollingInterval: 100 });
const wallet = new Wallet(KEYS[0], provider);
// ethers caches identical calls for 250 ms (cacheTimeout), so a plain Wallet
// sending twice within 250 ms reads the same "pending" nonce; NonceManager
// is how ethers users send a sequence (its first nonce comes from
// "pending", then it counts).
const signer = new NonceManager(wallet);
const SUPPLY = 1_000_000n * 10n ** 18n;
let token; // deployed by "deploys an ERC-20"

// ethers' tx.wait() learns about blocks by polling eth_blockNumber, and its
// first poll only records the current height. A transaction mined between
// its last receipt check (cached for 250 ms) and that first poll is found
// only when a later block arrives. No traffic is generated here to provide
// that block: the node itself seals an empty one when idle
// (producer.idle_block_interval_ms, 1000 by default), so every wait() below
// ends on a chain that nothing else moves.

/** The node's nonce for `addr` right now (provider.send skips the cache). */
async function nonceOf(addr, tag) {
  return Number(await provider.send("eth_getTransactionCount", [addr, tag]));
}

before(async () => {
  await provider.getNetwork();
});
after(() => {
  provider.destroy();
});

test("ethers: connects and batches (chainId, balances, nonces in one batch)", async () => {
  const net = await provider.getNetwork();
  assert.equal(net.chainId, BigInt(CHAIN_ID));
  // Concurrent calls go out as one JSON-RPC batch with the default options.
  const [b0, b1, n0, head, block] = await Promise.all([
    provider.getBalance(ADDRS[0]),
    provider.getBalance(ADDRS[1]),
    provider.getTransactionCount(ADDRS[0]),
    provider.getBlockNumber(),
    provider.getBlock("latest"),
  ]);
  assert.equal(b0, DEV_BALANCE);
  assert.equal(b1, DEV_BALANCE);
  assert.equal(n0, 0);
  // The node seals an empty block when idle, so one may commit between the
  // batch's two reads of the head.
  assert.ok(Math.abs(block.number - head) <= 1, `latest ${block.number}, blockNumber ${head}`);
  assert.equal(block.baseFeePerGas, BASE_FEE);
});

test("ethers: wallet transfers wait for receipts; balances, fees and nonces add up", async () => {
  const to = freshAddress(1);
  const before0 = await provider.getBalance(ADDRS[0]);
  const values = [1n, 2n, 3n, 4n, 5n].map((v) => v * 10n ** 15n);
  // Sent back to back, then waited for together.
  const txs = [];
  for (const value of values) txs.push(await signer.sendTransaction({ to, value }));
  assert.deepEqual(
    txs.map((t) => t.nonce),
    [0, 1, 2, 3, 4],
  );
  assert.equal(await nonceOf(ADDRS[0], "pending"), 5);
  const receipts = await Promise.all(txs.map((t) => t.wait()));
  let fees = 0n;
  for (const [i, r] of receipts.entries()) {
    assert.equal(r.status, 1);
    assert.equal(r.gasUsed, 21000n);
    assert.equal(r.hash, txs[i].hash);
    assert.equal(r.from, ADDRS[0]);
    assert.equal(r.to.toLowerCase(), to.toLowerCase());
    assert.ok(r.gasPrice >= BASE_FEE);
    fees += r.gasUsed * r.gasPrice;
    const mined = await provider.getTransaction(r.hash);
    assert.equal(mined.blockNumber, r.blockNumber);
    assert.equal(mined.value, values[i]);
  }
  const sum = values.reduce((a, b) => a + b);
  assert.equal(await provider.getBalance(to), sum);
  assert.equal(await provider.getBalance(ADDRS[0]), before0 - sum - fees);
  assert.equal(await nonceOf(ADDRS[0], "latest"), 5);
});

test("ethers: tx.wait() ends on an otherwise idle chain, one transfer at a time", async (t) => {
  // One transaction per block and nothing else moving the chain: the case
  // where wait() can miss its block and needs a later one. The bound is the
  // idle interval (1 s) plus polling, with room for a loaded machine.
  const alone = new NonceManager(new Wallet(KEYS[5], provider));
  const took = [];
  for (let i = 0; i < 8; i++) {
    const start = performance.now();
    const tx = await alone.sendTransaction({ to: freshAddress(5), value: 1n });
    const receipt = await tx.wait(1, 5000); // rejects with TIMEOUT past 5 s
    took.push(Math.round(performance.now() - start));
    assert.equal(receipt.status, 1);
  }
  t.diagnostic(`send + wait() in ms: ${took.join(", ")}`);
});

test("ethers: deploys an ERC-20", async () => {
  const factory = new ContractFactory(TOKEN.abi, TOKEN.bytecode, signer);
  const deployed = await factory.deploy(SUPPLY);
  const receipt = await deployed.deploymentTransaction().wait();
  assert.equal(receipt.status, 1);
  await deployed.waitForDeployment();
  const address = await deployed.getAddress();
  assert.equal(receipt.contractAddress, address);
  assert.equal(address, ethers.getCreateAddress({ from: ADDRS[0], nonce: 5 }));
  assert.equal(await provider.getCode(address), TOKEN.deployedBytecode);
  token = new Contract(address, TOKEN.abi, signer);
  assert.equal(await token.name(), "Sluice Test Token");
  assert.equal(await token.symbol(), "SLT");
  assert.equal(await token.decimals(), 18n);
  assert.equal(await token.totalSupply(), SUPPLY);
  assert.equal(await token.balanceOf(ADDRS[0]), SUPPLY);
});

test("ethers: ERC-20 transfer, balanceOf and the Transfer event in the receipt", async () => {
  const tx = await token.transfer(ADDRS[1], 1000n);
  const receipt = await tx.wait();
  assert.equal(receipt.status, 1);
  assert.ok(receipt.gasUsed > 21000n && receipt.gasUsed < 100000n, `gasUsed ${receipt.gasUsed}`);
  assert.equal(receipt.logs.length, 1);
  const ev = token.interface.parseLog(receipt.logs[0]);
  assert.equal(ev.name, "Transfer");
  assert.deepEqual([...ev.args], [ADDRS[0], ADDRS[1], 1000n]);
  assert.equal(await token.balanceOf(ADDRS[1]), 1000n);
  assert.equal(await token.balanceOf(ADDRS[0]), SUPPLY - 1000n);
});

test("ethers: Transfer logs by filter (queryFilter and getLogs)", async () => {
  for (const v of [7n, 8n]) await (await token.transfer(ADDRS[2], v)).wait();
  const mint = await token.queryFilter(token.filters.Transfer(ethers.ZeroAddress), 0);
  assert.equal(mint.length, 1);
  assert.equal(mint[0].args.value, SUPPLY);
  const toTwo = await token.queryFilter(token.filters.Transfer(ADDRS[0], ADDRS[2]), 0, "latest");
  assert.deepEqual(
    toTwo.map((e) => e.args.value),
    [7n, 8n],
  );
  assert.ok(toTwo[0].blockNumber < toTwo[1].blockNumber);
  const all = await provider.getLogs({ address: await token.getAddress(), fromBlock: 0, toBlock: "latest" });
  assert.equal(all.length, 4, "mint + 3 transfers");
  const topic = token.interface.getEvent("Transfer").topicHash;
  assert.ok(all.every((l) => l.topics[0] === topic));
  assert.deepEqual(
    all.map((l) => l.blockNumber),
    [...all.map((l) => l.blockNumber)].sort((a, b) => a - b),
  );
});

test("ethers: contract events over HTTP come through eth_newFilter / eth_getFilterChanges", async () => {
  // JsonRpcProvider follows contract events with a filter id when the node
  // serves filters (and falls back to eth_getLogs polling when it does not):
  // the methods it sends show which path it took.
  const methods = [];
  const onDebug = (e) => {
    if (e.action === "sendRpcPayload") for (const call of [e.payload].flat()) methods.push(call.method);
  };
  await provider.on("debug", onDebug);
  const events = [];
  const listener = (from, to, value, ev) => {
    if (to === ADDRS[5]) events.push({ value, hash: ev.log.transactionHash });
  };
  await token.on("Transfer", listener);
  let sent = [];
  try {
    await until(() => methods.includes("eth_getFilterChanges"), 10000, "the filter's first poll");
    for (const value of [51n, 52n, 53n]) sent.push(await token.transfer(ADDRS[5], value));
    await Promise.all(sent.map((t) => t.wait()));
    await until(() => events.length >= 3, 10000, "three Transfer events");
  } finally {
    await token.off("Transfer", listener);
  }
  assert.deepEqual(
    events.map((e) => e.value),
    [51n, 52n, 53n],
  );
  assert.deepEqual(
    events.map((e) => e.hash),
    sent.map((t) => t.hash),
  );
  assert.ok(methods.includes("eth_newFilter"), methods.join(" "));
  await until(() => methods.includes("eth_uninstallFilter"), 5000, "the filter uninstalled on off()");
  await provider.off("debug", onDebug);
});

test("ethers: a reverting transfer surfaces as CALL_EXCEPTION with its reason", async () => {
  const poor = new Wallet(KEYS[3], provider); // holds no tokens
  const t = token.connect(poor);
  await assert.rejects(t.transfer.staticCall(ADDRS[1], 1n), (e) => {
    assert.equal(e.code, "CALL_EXCEPTION");
    assert.equal(e.reason, "SluiceToken: insufficient balance");
    return true;
  });
  // Sending estimates gas first: the revert shows there.
  await assert.rejects(t.transfer(ADDRS[1], 1n), (e) => {
    assert.equal(e.code, "CALL_EXCEPTION");
    assert.equal(e.action, "estimateGas");
    assert.equal(e.reason, "SluiceToken: insufficient balance");
    return true;
  });
  // With a gas limit it is mined and reverts on chain: status 0.
  const nonce = await nonceOf(poor.address, "latest");
  const tx = await t.transfer(ADDRS[1], 1n, { gasLimit: 100000n });
  await assert.rejects(tx.wait(), (e) => {
    assert.equal(e.code, "CALL_EXCEPTION");
    assert.equal(e.receipt.status, 0);
    assert.ok(e.receipt.gasUsed > 21000n && e.receipt.gasUsed < 100000n);
    return true;
  });
  assert.equal(await nonceOf(poor.address, "latest"), nonce + 1);
  assert.equal(await token.balanceOf(ADDRS[1]), 1000n);
});

test("ethers: errors classified as with geth (NONCE_EXPIRED, INSUFFICIENT_FUNDS, UNSUPPORTED_OPERATION)", async () => {
  await assert.rejects(wallet.sendTransaction({ to: ADDRS[1], value: 1n, nonce: 0 }), (e) => {
    assert.equal(e.code, "NONCE_EXPIRED", e.message);
    return true;
  });
  const broke = Wallet.createRandom(provider);
  // Through eth_sendRawTransaction (gas limit given, nothing to estimate)...
  await assert.rejects(
    broke.sendTransaction({ to: ADDRS[1], value: 10n ** 18n, gasLimit: 21000n, maxFeePerGas: 2n * BASE_FEE, maxPriorityFeePerGas: 1n }),
    (e) => {
      assert.equal(e.code, "INSUFFICIENT_FUNDS", e.message);
      return true;
    },
  );
  // ...and through eth_estimateGas.
  await assert.rejects(broke.sendTransaction({ to: ADDRS[1], value: 10n ** 18n }), (e) => {
    assert.equal(e.code, "INSUFFICIENT_FUNDS", e.message);
    return true;
  });
  await assert.rejects(provider.send("eth_noSuchMethod", []), (e) => {
    assert.equal(e.code, "UNSUPPORTED_OPERATION", e.message);
    assert.equal(e.error?.code ?? e.info?.error?.code, -32601);
    return true;
  });
});

test("ethers: WebSocketProvider gets every block and every Transfer event, in order", async () => {
  const ws = new WebSocketProvider(WS_URL);
  try {
    assert.equal((await ws.getNetwork()).chainId, BigInt(CHAIN_ID));
    // JSON-RPC over the socket answers like HTTP.
    assert.equal(await ws.getBalance(ADDRS[1]), await provider.getBalance(ADDRS[1]));
    const blocks = [];
    const events = [];
    await ws.on("block", (n) => blocks.push(n));
    const wsToken = new Contract(await token.getAddress(), TOKEN.abi, ws);
    await wsToken.on("Transfer", (from, to, value, ev) => events.push({ from, to, value, block: ev.log.blockNumber, index: ev.log.index }));
    // Warm-up: once one transfer's block and event have arrived, both
    // subscriptions are live; everything after must arrive complete.
    const start = (await (await token.transfer(ADDRS[4], 1n)).wait()).blockNumber;
    await until(() => events.length === 1 && blocks.some((n) => n >= start), 10000, "the first notifications");
    events.length = 0;

    const sent = [];
    for (let i = 0; i < 12; i++) {
      const value = 100n + BigInt(i);
      sent.push(await token.transfer(ADDRS[4], value, { gasLimit: 80000n }));
      if (i % 3 === 2) await sent[sent.length - 1].wait(); // spread over several blocks
    }
    const receipts = await Promise.all(sent.map((t) => t.wait()));
    const end = receipts[receipts.length - 1].blockNumber;
    await until(() => events.length >= sent.length && blocks.at(-1) >= end, 10000, "WebSocket notifications");

    const expectedBlocks = [];
    for (let n = start + 1; n <= end; n++) expectedBlocks.push(n);
    assert.deepEqual(blocks.filter((n) => n > start && n <= end), expectedBlocks, "every block, in order");
    assert.ok(end - start >= 4, `spread over ${end - start} blocks`);
    assert.deepEqual(
      events.map((e) => e.value),
      sent.map((_, i) => 100n + BigInt(i)),
      "every event, in order",
    );
    assert.ok(events.every((e) => e.from === ADDRS[0] && e.to === ADDRS[4]));
    assert.deepEqual(
      events.map((e) => e.block),
      receipts.map((r) => r.blockNumber),
    );
  } finally {
    await ws.destroy();
  }
});
