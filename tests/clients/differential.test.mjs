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
  // bytes; past it the precompile fails (all gas used). Only the failure is
  // compared: the words differ (anvil: -32603 "EVM error PrecompileError";
  // sluice: revm's "PrecompileErrorWithContext(...)"; geth 1.16 names the
  // length, core/vm/contracts.go: "base length is too large", ...).
  const MODEXP = "0x0000000000000000000000000000000000000005";
  const modexp = (bl, el, ml, fill = "03") => "0x" + word(bl) + word(el) + word(ml) + fill.repeat(bl + el + ml);
  const small = await sameCall("MODEXP 3^3 mod 3 (1 byte each)", { to: MODEXP, data: modexp(1, 1, 1) });
  assert.equal(small.result, "0x00");
  const atBound = await sameCall("MODEXP, 1024-byte base", { to: MODEXP, data: modexp(1024, 1, 1), gas: "0x1000000" });
  assert.ok(!atBound.error, "a 1024-byte base is within the bound");
  for (const [label, data] of [
    ["1025-byte base", modexp(1025, 1, 1)],
    ["1025-byte exponent", modexp(1, 1025, 1)],
    ["1025-byte modulus", modexp(1, 1, 1025)],
    ["a 2^255 length, no data", "0x" + word(1n << 255n) + word(1) + word(1)],
  ]) {
    const r = await sameCall(`MODEXP, ${label}`, { to: MODEXP, data, gas: "0x1000000" });
    assert.ok(r.error, `MODEXP, ${label}: fails`);
  }
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
