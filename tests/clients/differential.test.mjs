// sluice against anvil with full blocks: the same signed transactions go to
// sluice in one JSON-RPC batch (so its blocks hold many, from several
// senders) and to anvil one at a time (automined: one a block, so its
// tracers report each transaction's own gas). Then, transaction by
// transaction: the receipt, every tracer's output (anvil.mjs removes where
// anvil departs from geth, after checking sluice against geth's rule), and
// at the end the state every transaction touched. Two batches: the one a
// deploy script makes (transfers, a deployment, calls to it from other
// senders, reverts, an out-of-gas call) and a randomized one (its seed is
// printed; SUITE_SEED=n repeats it). Then Osaka's additions by eth_call
// (CLZ, P256VERIFY, MODEXP's bounds), the newer methods answer by answer on
// the mined transactions (trace_transaction / trace_block, ots_*,
// eth_simulateV1, txpool_inspect, eth_getAccount; where anvil departs from
// the reference client, that client is named and sluice checked against it),
// and EIP-7825's gas cap at admission. Run by run.sh with SUITE_RPC_URL set
// to a fresh node.
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign as cryptoSign } from "node:crypto";
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
/** Every transaction the batches mined (on both), in order: `{ hash, block }` (sluice's block number). */
const mined = [];

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
    mined.push({ hash: hashes[i], block: a.blockNumber, anvilBlock: b.blockNumber, status: a.status });
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

/** `method(params)` on sluice and on anvil: each `{ result }` or `{ error }` (the JSON-RPC error object). */
async function onBoth(method, params) {
  const ask = async (url) => {
    const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
    const body = await r.json();
    return body.error ? { error: body.error } : { result: body.result };
  };
  return Promise.all([ask(RPC_URL), ask(anvil.url)]);
}

/** eth_call of `call` at latest on both; asserts both answer the same result (or both fail) and returns sluice's answer. */
async function sameCall(label, call) {
  const [a, b] = await onBoth("eth_call", [call, "latest"]);
  assert.equal(!!a.error, !!b.error, `${label}: both fail or neither (sluice ${JSON.stringify(a)}, anvil ${JSON.stringify(b)})`);
  if (!a.error) assert.equal(a.result, b.result, `${label}: the same return data`);
  return a;
}

const word = (n) => BigInt(n).toString(16).padStart(64, "0");

test("Osaka: CLZ, P256VERIFY, and MODEXP's EIP-7823 bounds agree with anvil", async () => {
  // CLZ (EIP-7939, 0x1e): initcode PUSH32 x CLZ PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN, run by eth_call
  // as a creation: its return data is the count of leading zero bits of x.
  const clz = (x) => "0x7f" + word(x) + "1e" + "600052" + "60206000f3";
  const inputs = [0n, 1n, 2n, 0xffn, 1n << 128n, (1n << 255n) - 1n, 1n << 255n, (1n << 256n) - 1n, 0x00000000000000000000000000000000000000000000000000000000deadbeefn];
  for (const x of inputs) {
    const { result } = await sameCall(`CLZ(${x})`, { from: ADDRS[0], data: clz(x) });
    const want = x === 0n ? 256n : 255n - BigInt(x.toString(2).length - 1);
    assert.equal(BigInt(result), want, `CLZ(${x})`);
  }
  // CLZ's gas (3, as ADD): the same estimate on both.
  const [ea, eb] = await onBoth("eth_estimateGas", [{ from: ADDRS[0], data: clz(1n << 200n) }]);
  assert.equal(ea.result, eb.result, "CLZ: the same gas estimate");

  // P256VERIFY (EIP-7951, at 0x100): hash || r || s || x || y, 160 bytes;
  // 32 bytes of 1 when valid, empty return data otherwise (never a failure).
  const P256 = "0x0000000000000000000000000000000000000100";
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const message = Buffer.from("sluice differential: P256VERIFY");
  const hash = createHash("sha256").update(message).digest();
  const sig = cryptoSign("sha256", message, { key: privateKey, dsaEncoding: "ieee-p1363" }); // r || s
  const jwk = publicKey.export({ format: "jwk" });
  const xy = Buffer.concat([Buffer.from(jwk.x, "base64url"), Buffer.from(jwk.y, "base64url")]);
  const input = (h, s, k) => "0x" + Buffer.concat([h, s, k]).toString("hex");
  const good = await sameCall("P256VERIFY, a valid signature", { to: P256, data: input(hash, sig, xy) });
  assert.equal(good.result, "0x" + word(1), "P256VERIFY: valid");
  const badHash = Buffer.from(hash);
  badHash[0] ^= 1;
  const bad = await sameCall("P256VERIFY, another hash", { to: P256, data: input(badHash, sig, xy) });
  assert.equal(bad.result, "0x", "P256VERIFY: invalid is empty");
  const badKey = Buffer.from(xy);
  badKey[63] ^= 1; // y off the curve
  assert.equal((await sameCall("P256VERIFY, a point off the curve", { to: P256, data: input(hash, sig, badKey) })).result, "0x");
  assert.equal((await sameCall("P256VERIFY, 159 bytes", { to: P256, data: input(hash, sig, xy).slice(0, -2) })).result, "0x");
  const [pa, pb] = await onBoth("eth_estimateGas", [{ to: P256, data: input(hash, sig, xy) }]);
  assert.equal(pa.result, pb.result, "P256VERIFY: the same gas estimate");
  const bytes = Buffer.from(input(hash, sig, xy).slice(2), "hex");
  const zeros = BigInt(bytes.filter((b) => b === 0).length);
  const calldata = 4n * zeros + 16n * (BigInt(bytes.length) - zeros);
  assert.equal(BigInt(pa.result), 21000n + calldata + 6900n, "P256VERIFY costs 6900 (EIP-7951)");

  // MODEXP (EIP-7823): each of base, exponent and modulus at most 1024
  // bytes; past it the precompile fails (all gas used). Both fail; the
  // words differ: anvil -32603 "EVM error PrecompileError", sluice geth's
  // (1.16, core/vm/contracts.go: the first length past the bound named).
  const MODEXP = "0x0000000000000000000000000000000000000005";
  const modexp = (bl, el, ml, fill = "03") => "0x" + word(bl) + word(el) + word(ml) + fill.repeat(bl + el + ml);
  const small = await sameCall("MODEXP 3^3 mod 3 (1 byte each)", { to: MODEXP, data: modexp(1, 1, 1) });
  assert.equal(small.result, "0x00");
  const atBound = await sameCall("MODEXP, 1024-byte base", { to: MODEXP, data: modexp(1024, 1, 1), gas: "0x1000000" });
  assert.ok(!atBound.error, "a 1024-byte base is within the bound");
  for (const [label, data, why] of [
    ["1025-byte base", modexp(1025, 1, 1), "base length is too large"],
    ["1025-byte exponent", modexp(1, 1025, 1), "exponent length is too large"],
    ["1025-byte modulus", modexp(1, 1, 1025), "modulus length is too large"],
    ["a 2^255 length, no data", "0x" + word(1n << 255n) + word(1) + word(1), "base length is too large"],
  ]) {
    const r = await sameCall(`MODEXP, ${label}`, { to: MODEXP, data, gas: "0x1000000" });
    assert.ok(r.error, `MODEXP, ${label}: fails`);
    assert.equal(r.error.message, why, `MODEXP, ${label}: geth's words`);
  }
});

/** A parity trace without where a block put it (the chains' blocks differ). */
const ownTrace = ({ blockHash, blockNumber, transactionPosition, ...t }) => t;

test("the newer methods, answer by answer against anvil: eth_simulateV1, trace_transaction, trace_block, ots_*, txpool_inspect, eth_getAccount", async () => {
  assert.ok(mined.length > 50, "the batches above mined transactions");
  // trace_transaction: each mined transaction's flat call traces.
  for (const { hash } of mined) {
    const [a, b] = await onBoth("trace_transaction", [hash]);
    assert.ok(a.result && b.result, `trace_transaction ${hash}: ${JSON.stringify(a.error ?? b.error)}`);
    assert.deepStrictEqual(a.result.map(ownTrace), b.result.map(ownTrace), `trace_transaction ${hash}`);
    for (const t of a.result) assert.equal(t.transactionHash, hash);
  }
  // trace_block: sluice's blocks hold many transactions, anvil's one each;
  // a sluice block's traces are its transactions' anvil traces, in order.
  const blocks = [...new Set(mined.map((m) => m.block))];
  for (const block of blocks) {
    const a = await rpc("trace_block", [block], RPC_URL);
    const inBlock = mined.filter((m) => m.block === block);
    const b = [];
    for (const m of inBlock) b.push(...(await rpc("trace_block", [m.anvilBlock], anvil.url)).filter((t) => t.transactionHash === m.hash));
    assert.deepStrictEqual(a.map(ownTrace), b.map(ownTrace), `trace_block ${block}`);
    assert.ok(a.every((t) => t.blockNumber === Number(block)), `trace_block ${block}: its number`);
  }

  // Otterscan.
  const [la, lb] = await onBoth("ots_getApiLevel", []);
  assert.deepStrictEqual(la, lb, "ots_getApiLevel");
  assert.equal(la.result, 8);
  // ots_getInternalOperations: erigon's OperationsTracer (Otterscan's
  // reference) skips the transaction's own call (OnEnter: `if depth == 0
  // { return }`), so a plain transfer or a deployment has none; anvil 1.7.1
  // lists it first (as erigon did before). Checked on sluice's side, then
  // removed from anvil's before comparing.
  let topLevel = 0;
  let created = 0;
  for (const { hash } of mined) {
    const tx = await rpc("eth_getTransactionByHash", [hash], RPC_URL);
    const isOwn = (op) => op.from.toLowerCase() === tx.from.toLowerCase() && (tx.to ? op.type === 0 && op.to.toLowerCase() === tx.to.toLowerCase() : op.type === 2);
    for (const m of ["ots_traceTransaction", "ots_getInternalOperations", "ots_getTransactionError"]) {
      const [a, b] = await onBoth(m, [hash]);
      assert.ok(a.result !== undefined && b.result !== undefined, `${m} ${hash}: ${JSON.stringify(a.error ?? b.error)}`);
      if (m === "ots_getInternalOperations") {
        assert.ok(!a.result.some(isOwn), `${m} ${hash}: not the transaction's own call (erigon)`);
        if (b.result.length > 0 && isOwn(b.result[0])) {
          b.result = b.result.slice(1);
          topLevel++;
        }
      }
      // ots_traceTransaction of a deployment: erigon's TransactionTracer
      // records the transaction's own CREATE at depth 0 (its OnEnter takes
      // every frame), as sluice does; anvil 1.7.1 leaves it out. Checked on
      // sluice's side (the creation itself), then removed from sluice's.
      if (m === "ots_traceTransaction" && !tx.to && b.result.length === a.result.length - 1) {
        const [own] = a.result;
        const r = await rpc("eth_getTransactionReceipt", [hash], RPC_URL);
        assert.deepStrictEqual(
          [own.type, own.depth, own.from, own.to, own.value, own.input],
          ["CREATE", 0, tx.from.toLowerCase(), r.contractAddress.toLowerCase(), "0x0", tx.input],
          `${m} ${hash}: the deployment's own CREATE (erigon)`,
        );
        a.result = a.result.slice(1);
        created++;
      }
      assert.deepStrictEqual(a, b, `${m} ${hash}`);
    }
  }
  assert.ok(created > 0, "anvil's missing CREATE seen (else drop the removal)");
  assert.ok(topLevel > 0, "anvil's departure seen (else drop the removal)");
  const reverted = mined.filter((m) => m.status === "0x0");
  assert.ok(reverted.length > 0, "a reverted transaction among them");
  // fail(): Error("nope"), the revert data itself.
  const reasons = await Promise.all(reverted.map((m) => rpc("ots_getTransactionError", [m.hash], RPC_URL)));
  assert.ok(reasons.includes(abi.encodeErrorResult("Error", ["nope"])), `a revert reason among ${reasons}`);

  // txpool_inspect on an empty pool (the batches are mined).
  const [pa, pb] = await onBoth("txpool_inspect", []);
  assert.deepStrictEqual(pa, pb, "txpool_inspect, empty");
  assert.deepStrictEqual(pa.result, { pending: {}, queued: {} });

  // eth_getAccount: every dev account (EOAs; the fifth delegated), and one never seen.
  const EMPTY_ROOT = "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421";
  const EMPTY_CODE = "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470";
  let withStorage = 0;
  for (const addr of [...ADDRS, freshAddress(99_999)]) {
    const [a, b] = await onBoth("eth_getAccount", [addr, "latest"]);
    // sluice keeps no storage trie: its storageRoot is always the empty
    // trie's (README, eth_getAccount), wrong only for an account with
    // storage, here the delegated one (its code wrote its own slots).
    // An account that does not exist: null, as reth answers (the method is
    // reth's: its get_account is None there); anvil 1.7.1 answers the
    // empty account. Only then.
    if (a.result === null) {
      assert.deepStrictEqual(b.result, { nonce: "0x0", balance: "0x0", storageRoot: EMPTY_ROOT, codeHash: EMPTY_CODE }, `eth_getAccount ${addr}: anvil's empty account`);
      assert.equal(addr, freshAddress(99_999), "only the account never seen is missing");
      continue;
    }
    if (b.result && b.result.storageRoot !== EMPTY_ROOT) {
      assert.equal(a.result?.storageRoot, EMPTY_ROOT, `eth_getAccount ${addr}: sluice's storageRoot`);
      a.result.storageRoot = b.result.storageRoot;
      withStorage++;
    }
    assert.deepStrictEqual(a, b, `eth_getAccount ${addr}`);
  }

  assert.equal(withStorage, 1, "only the delegated account has storage");

  // eth_simulateV1: two blocks; the first overrides an address's code
  // (a contract that logs its calldata and returns CLZ of it) and calls it,
  // with a transfer; the second calls it again and reverts on a second code.
  // Compared: each call's status, returnData, gasUsed, logs (address,
  // topics, data) and error; not hashes, timestamps or block fields.
  const logger = "0x" + "0000000000000000000000000000000000c0de01";
  const reverter = "0x" + "0000000000000000000000000000000000c0de02";
  // CALLDATALOAD 0, DUP1, PUSH1 0 MSTORE, PUSH1 0xaa PUSH1 32 PUSH1 0 LOG1, CLZ, PUSH1 0 MSTORE, PUSH1 32 PUSH1 0 RETURN
  const loggerCode = "0x600035" + "80" + "600052" + "60aa" + "6020" + "6000" + "a1" + "1e" + "600052" + "6020" + "6000" + "f3";
  // PUSH1 0x2a PUSH1 0 MSTORE PUSH1 32 PUSH1 0 REVERT
  const reverterCode = "0x602a60005260206000fd";
  const sim = [
    {
      blockStateCalls: [
        {
          stateOverrides: { [logger]: { code: loggerCode }, [reverter]: { code: reverterCode } },
          calls: [
            { from: ADDRS[0], to: logger, data: "0x" + word(1n << 100n) },
            { from: ADDRS[1], to: freshAddress(4242), value: "0x2386f26fc10000" },
          ],
        },
        { calls: [{ from: ADDRS[0], to: logger, data: "0x" + word(7) }, { from: ADDRS[2], to: reverter }] },
      ],
    },
    "latest",
  ];
  const [sa, sb] = await onBoth("eth_simulateV1", sim);
  assert.ok(sa.result && sb.result, `eth_simulateV1: ${JSON.stringify(sa.error ?? sb.error)}`);
  const calls = (blocks) =>
    blocks.map((blk) =>
      blk.calls.map((c) => ({
        status: c.status,
        returnData: c.returnData,
        gasUsed: c.gasUsed,
        error: c.error,
        logs: c.logs.map((l) => ({ address: l.address.toLowerCase(), topics: l.topics, data: l.data })),
      })),
    );
  // A reverted call's error: geth's (internal/ethapi/simulate.go: code 3,
  // "execution reverted", the revert data as `data`); anvil 1.7.1 answers
  // -3200 "execution failed" without the data. Checked on sluice's side,
  // then left out of the comparison; every other call has no error on both.
  const sluiceCalls = calls(sa.result);
  const anvilCalls = calls(sb.result);
  assert.deepStrictEqual(sluiceCalls[1][1].error, { code: 3, message: "execution reverted", data: "0x" + word(42) }, "eth_simulateV1: a revert's error (geth)");
  assert.ok(anvilCalls[1][1].error, "anvil: the revert has an error");
  sluiceCalls[1][1].error = anvilCalls[1][1].error = undefined;
  assert.deepStrictEqual(sluiceCalls, anvilCalls, "eth_simulateV1: the calls");
  const [first, second] = calls(sa.result);
  assert.equal(BigInt(first[0].returnData), 155n, "CLZ(2^100) in the simulated block");
  assert.equal(first[0].logs[0].data, "0x" + word(1n << 100n));
  assert.equal(first[1].status, "0x1");
  assert.equal(BigInt(second[0].returnData), 253n);
  assert.equal(second[1].status, "0x0");
  assert.equal(second[1].returnData, "0x" + word(42));
  assert.equal(sa.result.length, 2);
  assert.equal(BigInt(sa.result[1].number), BigInt(sa.result[0].number) + 1n, "consecutive blocks");
});

// Last: anvil keeps the transaction this sends in its pool.
test("Osaka: a transaction over the EIP-7825 gas cap (2^24) is refused at admission, in geth's words", async () => {
  // A nonce far ahead: admitted, it would wait in the pool, never run; so
  // the refusal is the cap's, checked before the nonce (geth's
  // ValidateTransaction, stateless, before ValidateTransactionWithState).
  const tx = {
    type: 2,
    chainId: CHAIN_ID,
    nonce: nonces[5] + 1000,
    maxFeePerGas: 2n * GWEI,
    maxPriorityFeePerGas: 2n * GWEI,
    to: ADDRS[1],
    value: 1n,
  };
  const over = await wallets[5].signTransaction({ ...tx, gasLimit: (1n << 24n) + 1n });
  const [sa, sb] = await onBoth("eth_sendRawTransaction", [over]);
  // geth 1.16, core/txpool/validation.go: fmt.Errorf("%w (cap: %d, tx: %d)", core.ErrGasLimitTooHigh, params.MaxTxGas, tx.Gas()).
  assert.equal(sa.error?.message, `transaction gas limit too high (cap: 16777216, tx: ${(1n << 24n) + 1n})`, JSON.stringify(sa));
  // anvil 1.7.1 departs from geth here: it admits the transaction (and
  // mines it, with its nonce in order: it does not apply EIP-7825's cap
  // with --hardfork osaka). Followed: geth. If anvil refuses too, that is
  // compared.
  if (sb.error) assert.match(sb.error.message, /gas/i, `anvil's refusal names the gas: ${JSON.stringify(sb)}`);
  // At the cap exactly: not over it, so no cap refusal on sluice.
  const [ca] = await onBoth("eth_sendRawTransaction", [await wallets[5].signTransaction({ ...tx, nonce: nonces[5] + 1001, gasLimit: 1n << 24n })]);
  assert.ok(!/gas limit too high/.test(ca.error?.message ?? ""), `at the cap: ${JSON.stringify(ca)}`);
});
