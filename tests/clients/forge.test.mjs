// foundry's forge against sluice: `forge script --broadcast`, the deploy
// tool, sends a script's transactions with several in flight, so nonces
// arrive out of order and the node must hold a nonce above the sender's
// next until the gap fills (as geth does). Run by run.sh with SUITE_RPC_URL
// set to a fresh node. Then `forge test --fork-url` under the `osaka`
// profile (forge/test/OsakaFork.t.sol): Osaka's opcodes and precompiles in
// forge's EVM, over state read from sluice; and `forge script --broadcast`
// of a contract built for Osaka (forge/script/DeployOsaka.s.sol), whose
// CLZ then runs in sluice's own blocks. The project is forge/ (solcjs
// 0.8.37 behind forge/solc, offline; osaka and `clz` need solc >= 0.8.31).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { id } from "ethers";

import { ADDRS, CHAIN_ID, KEYS, RPC_URL, rpc } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const PROJECT = join(here, "forge");
const arch = { x64: "amd64", arm64: "arm64" }[process.arch];
const pkg = `@foundry-rs/forge-${process.platform}-${arch}/package.json`;
const FORGE = join(dirname(createRequire(import.meta.url).resolve(pkg)), "bin", "forge");

/** The last run's final registry and the one before it, for the fork test. */
let lastRun;

test("forge script --broadcast deploys 12 transactions in flight, three runs in a row", async () => {
  const deployer = ADDRS[5];
  for (let run = 0; run < 3; run++) {
    const out = execFileSync(
      FORGE,
      ["script", "script/Deploy.s.sol", "--rpc-url", RPC_URL, "--broadcast", "--root", PROJECT],
      { cwd: PROJECT, encoding: "utf8", timeout: 180000, env: { ...process.env, DEPLOYER_KEY: KEYS[5] } },
    );
    assert.match(out, /ONCHAIN EXECUTION COMPLETE & SUCCESSFUL/, out);
    const saved = JSON.parse(
      readFileSync(join(PROJECT, "broadcast", "Deploy.s.sol", String(CHAIN_ID), "run-latest.json"), "utf8"),
    );
    assert.equal(saved.transactions.length, 12);
    assert.equal(saved.receipts.length, 12);
    for (const r of saved.receipts) assert.equal(r.status, "0x1", JSON.stringify(r));
    // Every nonce of the run was included, in order.
    assert.equal(BigInt(await rpc("eth_getTransactionCount", [deployer, "latest"])), BigInt(12 * (run + 1)));
    // The last registry links to the one before it, as the script built them.
    const creates = saved.transactions.filter((t) => t.transactionType === "CREATE");
    assert.equal(creates.length, 8);
    const last = creates[7].contractAddress;
    const previous = await rpc("eth_call", [{ to: last, data: id("previous()").slice(0, 10) }, "latest"]);
    assert.equal(BigInt(previous), BigInt(creates[6].contractAddress));
    lastRun = { last, previous: creates[6].contractAddress };
  }
});

test("forge test --fork-url on Osaka (evm_version = \"osaka\"): CLZ, P256VERIFY, MODEXP's bounds, and a registry the script deployed read from sluice", async () => {
  assert.ok(lastRun, "the script ran");
  const out = execFileSync(FORGE, ["test", "--fork-url", RPC_URL, "--root", PROJECT, "-vv"], {
    cwd: PROJECT,
    encoding: "utf8",
    timeout: 180000,
    env: { ...process.env, FOUNDRY_PROFILE: "osaka", LAST_REGISTRY: lastRun.last, PREVIOUS_REGISTRY: lastRun.previous },
  });
  for (const t of ["test_clz()", "test_p256verify()", "test_modexp_bounds()", "test_forked_state()"]) {
    assert.match(out, new RegExp(`\\[PASS\\] ${t.replace(/[()]/g, "\\$&")}`), out);
  }
  assert.match(out, /4 tests passed, 0 failed/, out);
});

test("forge script --broadcast of a contract built for Osaka (clz): deployed and run by sluice's EVM", async () => {
  const out = execFileSync(
    FORGE,
    ["script", "script/DeployOsaka.s.sol", "--tc", "DeployOsaka", "--rpc-url", RPC_URL, "--broadcast", "--root", PROJECT],
    { cwd: PROJECT, encoding: "utf8", timeout: 180000, env: { ...process.env, FOUNDRY_PROFILE: "osaka", DEPLOYER_KEY: KEYS[4] } },
  );
  assert.match(out, /ONCHAIN EXECUTION COMPLETE & SUCCESSFUL/, out);
  const saved = JSON.parse(
    readFileSync(join(PROJECT, "broadcast", "DeployOsaka.s.sol", String(CHAIN_ID), "run-latest.json"), "utf8"),
  );
  assert.equal(saved.receipts.length, 2);
  for (const r of saved.receipts) assert.equal(r.status, "0x1", JSON.stringify(r));
  const deployed = saved.transactions.find((t) => t.transactionType === "CREATE").contractAddress;
  // record(2^100) ran CLZ in sluice's block: 155 leading zero bits stored.
  const last = await rpc("eth_call", [{ to: deployed, data: id("last()").slice(0, 10) }, "latest"]);
  assert.equal(BigInt(last), 155n);
});
