// sluice against anvil with full blocks: the same signed transactions go to
// sluice in one JSON-RPC batch (so its blocks hold many, from several
// senders) and to anvil one at a time (automined: one a block, so its
// tracers report each transaction's own gas). Then, transaction by
// transaction: the receipt, every tracer's output (anvil.mjs removes where
// anvil departs from geth, after checking sluice against geth's rule), and
// at the end the state every transaction touched. Two batches: the one a
// deploy script makes (transfers, a deployment, calls to it from other
// senders, reverts, an out-of-gas call) and a randomized one (its seed is
// printed; SUITE_SEED=n repeats it). Run by run.sh with SUITE_RPC_URL set to
// a fresh node.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Interface, Wallet, getCreateAddress } from "ethers";

import { compareTraces, startAnvil } from "./anvil.mjs";
import { compileSource } from "./compile.mjs";
import { ADDRS, CHAIN_ID, KEYS, RPC_URL, freshAddress, rpc, until } from "./lib.mjs";

const GWEI = 10n ** 9n;
const counter = compileSource("contracts/Differential.sol").Counter;
const abi = new Interface(counter.abi);
const wallets = KEYS.map((k) => new Wallet(k));
const nonces = KEYS.map(() => 0);

let anvil;
before(async () => {
  anvil = await startAnvil();
});
after(() => anvil?.stop());

/**
 * One transaction from account `from` (nonce in order). Fee cap = tip = 2
 * gwei: both chains then charge 2 gwei a gas (the base fee, which anvil
 * moves, only splits it between burn and coinbase).
 */
async function sign(from, fields) {
  const tx = {
    type: 2,
    chainId: CHAIN_ID,
    nonce: nonces[from]++,
    maxFeePerGas: 2n * GWEI,
    maxPriorityFeePerGas: 2n * GWEI,
    gasLimit: 300_000n,
    value: 0n,
    ...fields,
  };
  return { raw: await wallets[from].signTransaction(tx), gasLimit: BigInt(tx.gasLimit), from };
}

const deploy = (from) => sign(from, { data: "0x" + counter.evm.bytecode.object, gasLimit: 600_000n });
const call = (from, to, fn, args = [], gasLimit = 300_000n) => sign(from, { to, data: abi.encodeFunctionData(fn, args), gasLimit });
const pay = (from, to, value) => sign(from, { to, value, gasLimit: 21_000n });
const nextCreate = (from) => getCreateAddress({ from: ADDRS[from], nonce: nonces[from] });

async function receipt(hash, url) {
  let r = null;
  await until(async () => (r = await rpc("eth_getTransactionReceipt", [hash], url)) !== null, 30000, `receipt of ${hash} on ${url}`);
  return r;
}

/** What a receipt says about its own transaction (not where a block put it). */
function own(r) {
  const logs = r.logs.map((l) => ({ address: l.address.toLowerCase(), topics: l.topics, data: l.data }));
  return {
    status: r.status,
    gasUsed: BigInt(r.gasUsed),
    effectiveGasPrice: BigInt(r.effectiveGasPrice),
    from: r.from.toLowerCase(),
    to: r.to?.toLowerCase() ?? null,
    contractAddress: r.contractAddress?.toLowerCase() ?? null,
    type: BigInt(r.type),
    logs,
    logsBloom: r.logsBloom,
  };
}

/**
 * Sends `txs` to sluice in one batch and to anvil one by one, then compares
 * receipts and traces one by one and the state of `addresses` and `contracts`.
 */
async function compare(label, txs, addresses, contracts) {
  const batch = txs.map((t, i) => ({ jsonrpc: "2.0", id: i, method: "eth_sendRawTransaction", params: [t.raw] }));
  const answers = await (await fetch(RPC_URL, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(batch) })).json();
  const hashes = [];
  for (const a of answers.sort((x, y) => x.id - y.id)) {
    assert.ok(a.result, `${label}: sluice admitted #${a.id}: ${JSON.stringify(a.error)}`);
    hashes.push(a.result);
  }
  for (const [i, t] of txs.entries()) {
    assert.equal(await rpc("eth_sendRawTransaction", [t.raw], anvil.url), hashes[i], `${label}: the same hash on anvil`);
    await receipt(hashes[i], anvil.url);
  }
  const blocks = new Set();
  for (const [i, t] of txs.entries()) {
    const [a, b] = [await receipt(hashes[i], RPC_URL), await receipt(hashes[i], anvil.url)];
    blocks.add(a.blockNumber);
    assert.deepStrictEqual(own(a), own(b), `${label}: receipt of #${i}`);
    await compareTraces(`${label} #${i}`, hashes[i], t.gasLimit, RPC_URL, anvil.url);
  }
  assert.ok(blocks.size < txs.length / 4, `${label}: sluice put ${txs.length} transactions in ${blocks.size} blocks`);
  for (const addr of addresses) {
    for (const m of ["eth_getBalance", "eth_getTransactionCount", "eth_getCode"]) {
      const [a, b] = await Promise.all([rpc(m, [addr, "latest"], RPC_URL), rpc(m, [addr, "latest"], anvil.url)]);
      assert.equal(a, b, `${label}: ${m} of ${addr}`);
    }
  }
  for (const { at, holders } of contracts) {
    const reads = [["count"], ...holders.map((h) => ["by", [h]])];
    for (const [fn, args = []] of reads) {
      const data = abi.encodeFunctionData(fn, args);
      const [a, b] = await Promise.all([rpc("eth_call", [{ to: at, data }, "latest"], RPC_URL), rpc("eth_call", [{ to: at, data }, "latest"], anvil.url)]);
      assert.equal(a, b, `${label}: ${fn}(${args}) of ${at}`);
    }
  }
}

test("a deploy script's batch: transfers, a deployment, calls to it from five other senders, reverts, out of gas, an EIP-7702 delegation", async () => {
  const txs = [];
  const fresh = [];
  // 25 transfers from accounts 1-5, to fresh accounts.
  for (let n = 0; n < 5; n++) {
    for (let from = 1; from <= 5; from++) {
      fresh.push(freshAddress(100 + fresh.length));
      txs.push(await pay(from, fresh.at(-1), 10n ** 15n));
    }
  }
  // The deployment from account 0, then 20 calls from accounts 1-5: every
  // one must run on the deployed code (the counter ends at 20).
  const at = nextCreate(0);
  txs.push(await deploy(0));
  for (let n = 0; n < 4; n++) for (let from = 1; from <= 5; from++) txs.push(await call(from, at, "bump"));
  txs.push(await call(1, at, "fail"), await call(2, at, "fail"));
  txs.push(await call(3, at, "fill", [40n], 60_000n));
  // EIP-7702: account 4 delegates to the counter (its authorization signed
  // for its nonce after its transfers), carried and called by account 5.
  const auth = await wallets[4].authorize({ address: at, nonce: nonces[4]++, chainId: CHAIN_ID });
  txs.push(await sign(5, { type: 4, to: ADDRS[4], authorizationList: [auth], data: abi.encodeFunctionData("bump") }));
  await compare("deploy script", txs, [...ADDRS, ...fresh, at], [{ at, holders: ADDRS }, { at: ADDRS[4], holders: ADDRS }]);
  const count = await rpc("eth_call", [{ to: at, data: abi.encodeFunctionData("count") }, "latest"], RPC_URL);
  assert.equal(BigInt(count), 20n, "every call counted");
  // The delegation took effect on both (not merely failed the same way).
  assert.equal(await rpc("eth_getCode", [ADDRS[4], "latest"], RPC_URL), `0xef0100${at.slice(2).toLowerCase()}`);
  const own4 = await rpc("eth_call", [{ to: ADDRS[4], data: abi.encodeFunctionData("count") }, "latest"], RPC_URL);
  assert.equal(BigInt(own4), 1n, "the delegated account counted its own bump");
});

test("a randomized batch: several senders, deploy then call in one block, storage, reverts, logs, fresh recipients", async () => {
  const seed = Number(process.env.SUITE_SEED ?? Date.now() % 1_000_000);
  console.log(`differential: seed ${seed} (SUITE_SEED=${seed} repeats it)`);
  let state = seed;
  const rand = (n) => {
    // mulberry32: small, seeded, good enough to pick cases.
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (((t ^ (t >>> 14)) >>> 0) % n);
  };
  const txs = [];
  const fresh = [];
  const contracts = [];
  // Not account 4: the test above delegated it (EIP-7702), and a delegated
  // sender gets one transaction in flight (geth's rule, which sluice
  // follows and anvil does not), so a batch holds at most one of its.
  const senders = [0, 1, 2, 3, 5];
  for (let i = 0; i < 48; i++) {
    const from = senders[rand(senders.length)];
    const pick = rand(10);
    if (pick === 0 || contracts.length === 0) {
      contracts.push({ at: nextCreate(from), holders: [...ADDRS] });
      txs.push(await deploy(from));
    } else if (pick <= 3) {
      fresh.push(freshAddress(1000 + fresh.length));
      txs.push(await pay(from, rand(2) ? fresh.at(-1) : ADDRS[rand(6)], BigInt(rand(1000) + 1) * 10n ** 12n));
    } else {
      const c = contracts[rand(contracts.length)].at;
      const kind = rand(6);
      if (kind === 0) txs.push(await call(from, c, "fail"));
      else if (kind === 1) txs.push(await call(from, c, "fill", [BigInt(rand(6) + 1)]));
      else if (kind === 2) txs.push(await call(from, c, "fill", [30n], 50_000n));
      else txs.push(await call(from, c, "bump"));
    }
  }
  await compare(`seed ${seed}`, txs, [...ADDRS, ...fresh, ...contracts.map((c) => c.at)], contracts);
});
