// foundry's cast against sluice. Run by run.sh with SUITE_RPC_URL set to a
// fresh node. cast is the pinned @foundry-rs/cast npm package; its native
// binary is called directly because the package's node wrapper (bin.mjs)
// exits 0 even when cast fails.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { test } from "node:test";

import { ADDRS, BASE_FEE, CHAIN_ID, DEV_BALANCE, KEYS, RPC_URL, TOKEN, freshAddress, sleep, until } from "./lib.mjs";

const arch = { x64: "amd64", arm64: "arm64" }[process.arch];
const pkg = `@foundry-rs/cast-${process.platform}-${arch}/package.json`;
const CAST = join(dirname(createRequire(import.meta.url).resolve(pkg)), "bin", "cast");
const anvilPkg = `@foundry-rs/anvil-${process.platform}-${arch}/package.json`;
const ANVIL = join(dirname(createRequire(import.meta.url).resolve(anvilPkg)), "bin", "anvil");

// Options go right after the subcommand: `send --create CODE SIG ARGS...`
// takes everything after CODE as constructor arguments.
/** Runs `cast SUB --rpc-url URL ARGS...`; returns stdout (trimmed). */
function cast(sub, ...args) {
  return execFileSync(CAST, [sub, "--rpc-url", RPC_URL, ...args], { encoding: "utf8", timeout: 60000 }).trim();
}
/** Runs cast with --json; returns the parsed output. */
const castJson = (sub, ...args) => JSON.parse(cast(sub, "--json", ...args));
/** Runs cast expecting failure; returns stderr. */
function castFails(sub, ...args) {
  try {
    execFileSync(CAST, [sub, "--rpc-url", RPC_URL, ...args], { encoding: "utf8", timeout: 60000, stdio: "pipe" });
  } catch (e) {
    assert.notEqual(e.status, 0);
    return e.stderr;
  }
  assert.fail(`cast ${sub} ${args.join(" ")} succeeded`);
}
const big = (hexOrDec) => BigInt(hexOrDec);

const SUPPLY = 1_000_000n * 10n ** 18n;
let firstTransfer; // its hash, for "cast receipt"
let legacyTransfer;
let token;

test("cast: chain-id, balance and nonce", () => {
  assert.equal(cast("chain-id"), String(CHAIN_ID));
  assert.equal(cast("balance", ADDRS[1]), String(DEV_BALANCE));
  assert.equal(cast("balance", ADDRS[1], "--ether"), "10000.000000000000000000");
  assert.equal(cast("nonce", ADDRS[0]), "0");
  assert.equal(cast("gas-price"), String(BASE_FEE + 10n ** 9n));
});

test("cast: send waits for the receipt; balance and nonce move by exactly what it cost", () => {
  const to = freshAddress(3);
  const before = big(cast("balance", ADDRS[0]));
  const r = castJson("send", "--private-key", KEYS[0], to, "--value", "1ether");
  assert.equal(r.status, "0x1");
  assert.equal(r.type, "0x2");
  assert.equal(big(r.gasUsed), 21000n);
  assert.equal(r.to, to);
  firstTransfer = r.transactionHash;
  assert.equal(cast("balance", to), String(10n ** 18n));
  assert.equal(big(cast("balance", ADDRS[0])), before - 10n ** 18n - 21000n * big(r.effectiveGasPrice));
  assert.equal(cast("nonce", ADDRS[0]), "1");
});

test("cast: send --legacy (EIP-155 gas price transaction)", () => {
  const to = freshAddress(4);
  const r = castJson("send", "--legacy", "--private-key", KEYS[0], to, "--value", "0.5ether");
  assert.equal(r.status, "0x1");
  assert.equal(r.type, "0x0");
  legacyTransfer = r.transactionHash;
  const tx = castJson("tx", legacyTransfer);
  assert.equal(tx.type, "0x0");
  assert.equal(big(tx.nonce), 1n);
  assert.equal(big(tx.gasPrice), big(r.effectiveGasPrice));
  assert.ok([CHAIN_ID * 2 + 35, CHAIN_ID * 2 + 36].includes(Number(tx.v)), `v ${tx.v} is EIP-155`);
  assert.equal(cast("balance", to), String(5n * 10n ** 17n));
});

test("cast: block latest", () => {
  const head = Number(cast("block-number"));
  const b = castJson("block", "latest");
  // The node seals empty blocks when idle: latest may have moved past the
  // last transfer's block, never below it.
  assert.ok(Number(b.number) >= head, `latest ${b.number} below block-number ${head}`);
  assert.equal(big(b.baseFeePerGas), BASE_FEE);
  assert.equal(b.parentHash, castJson("block", String(Number(b.number) - 1)).hash);
  const mined = Number(castJson("receipt", legacyTransfer).blockNumber);
  assert.ok(mined <= head);
  const full = castJson("block", String(mined), "--full");
  assert.equal(full.transactions[0].hash, legacyTransfer);
  assert.equal(full.transactions[0].from, ADDRS[0].toLowerCase());
});

test("cast: receipt", () => {
  const r = castJson("receipt", firstTransfer);
  assert.equal(r.transactionHash, firstTransfer);
  assert.equal(r.status, "0x1");
  assert.equal(r.from, ADDRS[0].toLowerCase());
  assert.equal(big(r.gasUsed), 21000n);
  assert.equal(r.blockHash, castJson("block", String(Number(r.blockNumber))).hash);
  assert.equal(cast("receipt", firstTransfer, "status"), "true");
});

test("cast: send --create deploys the ERC-20", () => {
  const expected = cast("compute-address", ADDRS[0], "--nonce", "2").replace(/^Computed Address:\s*/, "");
  const r = castJson("send", "--private-key", KEYS[0], "--create", TOKEN.bytecode, "constructor(uint256)", String(SUPPLY));
  assert.equal(r.status, "0x1");
  token = r.contractAddress;
  assert.equal(token.toLowerCase(), expected.toLowerCase());
  assert.equal(cast("code", token), TOKEN.deployedBytecode);
  assert.equal(r.logs.length, 1, "the mint's Transfer event");
});

test("cast: call view functions, send a token transfer, read logs", () => {
  const balanceOf = (a) => cast("call", token, "balanceOf(address)(uint256)", a).split(" ")[0];
  assert.equal(balanceOf(ADDRS[0]), String(SUPPLY));
  assert.equal(cast("call", token, "symbol()(string)"), '"SLT"');
  assert.equal(cast("call", token, "decimals()(uint8)"), "18");
  const r = castJson("send", "--private-key", KEYS[0], token, "transfer(address,uint256)", ADDRS[1], "500");
  assert.equal(r.status, "0x1");
  assert.equal(balanceOf(ADDRS[1]), "500");
  assert.equal(balanceOf(ADDRS[0]), String(SUPPLY - 500n));
  const logs = castJson("logs", "--from-block", "0", "--address", token, "Transfer(address indexed,address indexed,uint256)");
  assert.equal(logs.length, 2);
  assert.equal(big(logs[1].data), 500n);
  assert.equal(logs[1].transactionHash, r.transactionHash);
});

test("cast: run replays a mined transaction with its traces (debug_trace* on the state before its block)", () => {
  const r = castJson("send", "--private-key", KEYS[0], token, "transfer(address,uint256)", ADDRS[4], "9");
  assert.equal(r.status, "0x1");
  const out = cast("run", r.transactionHash);
  // The replayed call: the Transfer it emitted and what it returned.
  assert.match(out, new RegExp(`emit Transfer\\(from: ${ADDRS[0]}, to: ${ADDRS[4]}, amount: 9\\)`, "i"));
  assert.match(out, /← \[Return\] true/);
  assert.match(out, /Transaction successfully executed/);
  assert.match(out, new RegExp(`Gas used: ${big(r.gasUsed)}`));
});

test("cast: errors read as geth's (nonce too low, insufficient funds, revert reason, unknown method)", () => {
  assert.match(castFails("send", "--private-key", KEYS[0], ADDRS[1], "--value", "1", "--nonce", "0"), /nonce too low/);
  const broke = "0x" + "11".repeat(32);
  assert.match(castFails("send", "--private-key", broke, ADDRS[1], "--value", "1ether", "--gas-limit", "21000"), /insufficient funds for gas \* price \+ value/);
  assert.match(castFails("send", "--private-key", broke, ADDRS[1], "--value", "1ether"), /insufficient funds/);
  const revert = castFails("call", token, "transfer(address,uint256)(bool)", ADDRS[2], "1", "--from", ADDRS[3]);
  assert.match(revert, /execution reverted: SluiceToken: insufficient balance/);
  assert.match(castFails("rpc", "eth_noSuchMethod"), /-32601: the method eth_noSuchMethod does not exist\/is not available/);
});

test("cast: balance, nonce and call at an older block (--block N) while the chain moves on", () => {
  const to = freshAddress(21);
  const first = castJson("send", "--private-key", KEYS[2], to, "--value", "1000");
  const n = String(big(first.blockNumber));
  const moved = castJson("send", "--private-key", KEYS[0], token, "transfer(address,uint256)", to, "7");
  assert.equal(moved.status, "0x1");
  castJson("send", "--private-key", KEYS[2], to, "--value", "1000");
  assert.equal(cast("balance", "--block", n, to), "1000");
  assert.equal(cast("balance", to), "2000");
  const sentBy = (block) => Number(cast("nonce", "--block", block, ADDRS[2]));
  // Block n holds the first send; the third came after it.
  assert.equal(sentBy("latest") - sentBy(n), 1);
  const balanceOf = (...block) => cast("call", ...block, token, "balanceOf(address)(uint256)", to).split(" ")[0];
  assert.equal(balanceOf("--block", n), "0");
  assert.equal(balanceOf(), "7");
});

test("anvil: --fork-url at a block sluice has since moved past", async () => {
  const to = freshAddress(22);
  const r = castJson("send", "--private-key", KEYS[3], to, "--value", "1000");
  const forkBlock = String(big(r.blockNumber));
  const port = await new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
  const anvil = spawn(ANVIL, ["--fork-url", RPC_URL, "--fork-block-number", forkBlock, "--port", String(port), "--silent"], {
    stdio: "ignore",
  });
  const local = `http://127.0.0.1:${port}`;
  const onAnvil = (sub, ...args) =>
    execFileSync(CAST, [sub, "--rpc-url", local, ...args], { encoding: "utf8", timeout: 60000, stdio: "pipe" }).trim();
  try {
    await until(
      async () => {
        try {
          return onAnvil("chain-id") === String(CHAIN_ID);
        } catch {
          return false;
        }
      },
      20000,
      "anvil to fork sluice",
    );
    // sluice moves on: the fork block is an older block now, read at it.
    castJson("send", "--private-key", KEYS[3], to, "--value", "1000");
    await sleep(300);
    assert.equal(onAnvil("balance", to), "1000", "the fork reads sluice's state at its block");
    assert.equal(onAnvil("code", token), TOKEN.deployedBytecode, "contract code at the fork block");
    const holder = onAnvil("call", token, "balanceOf(address)(uint256)", ADDRS[1]).split(" ")[0];
    assert.equal(holder, "500", "contract storage at the fork block");
    // A transaction on the fork; sluice is untouched by it.
    const sent = JSON.parse(onAnvil("send", "--json", "--private-key", KEYS[3], to, "--value", "5"));
    assert.equal(sent.status, "0x1");
    assert.equal(onAnvil("balance", to), "1005");
    assert.equal(cast("balance", to), "2000");
  } finally {
    anvil.kill();
  }
});
