// anvil beside sluice, for the flows that compare the two (traces,
// differential): starting it, the tracers compared, and the ways anvil
// departs from geth, removed before comparing after checking sluice's side
// against geth's rule.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";

import { CHAIN_ID, rpc, until } from "./lib.mjs";

const require = createRequire(import.meta.url);
const arch = { x64: "amd64", arm64: "arm64" }[process.arch];
const ANVIL = join(dirname(require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`)), "bin", "anvil");

/** sluice's default coinbase (and anvil's). */
export const COINBASE = "0x0000000000000000000000000000000000000000";

/**
 * Starts anvil on a free port with sluice's dev chain (same mnemonic, chain
 * id, osaka, sluice's default rules), recording steps for the struct logger; automining, so one
 * transaction a block. Returns `{ url, stop }`.
 */
export async function startAnvil() {
  const port = await new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
  const child = spawn(ANVIL, ["--port", String(port), "--chain-id", String(CHAIN_ID), "--hardfork", "osaka", "--steps-tracing", "--silent"], {
    stdio: "ignore",
  });
  const url = `http://127.0.0.1:${port}`;
  await until(
    async () => {
      try {
        return BigInt(await rpc("eth_chainId", [], url)) === BigInt(CHAIN_ID);
      } catch {
        return false;
      }
    },
    20000,
    "anvil to start",
  );
  return { url, stop: () => child.kill() };
}

/** geth's tracers and their options, as compared. */
export const TRACERS = [
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

/**
 * Removes the coinbase from prestateTracer output: a difference of the
 * chains, not of tracing (priority fees are the fee cap minus the base fee,
 * which sluice keeps fixed and anvil moves block by block).
 */
export function withoutCoinbase(trace) {
  const strip = (m) => (m && typeof m === "object" ? Object.fromEntries(Object.entries(m).filter(([k]) => k.toLowerCase() !== COINBASE)) : m);
  if (trace && trace.pre && trace.post) return { pre: strip(trace.pre), post: strip(trace.post) };
  return strip(trace);
}

/**
 * The ways anvil 1.7.1 (built on an older revm-inspectors) departs from
 * geth, and sluice does not, made equal before comparing; each is checked
 * on sluice's side against geth's rule:
 * - callTracer's top call: geth reports the transaction's gas limit as its
 *   `gas`; anvil the gas left after the intrinsic cost.
 * - prestateTracer: geth (1.16, go-ethereum#31855) omits accounts that
 *   were empty before the transaction, in both modes, unless asked with
 *   `includeEmpty`; anvil lists them with a zero balance (and in diffMode
 *   so does revm-inspectors 0.44, which sluice corrects).
 * - the struct logger: geth words a failing step's error as its EVM does
 *   (core/vm/errors.go: "out of gas"); anvil writes revm's status in Rust
 *   debug form ("Some(OutOfGas)").
 */
export function normalize(name, sluice, anvil, gasLimit) {
  if (name.startsWith("struct logger")) {
    const geth = {
      OutOfGas: "out of gas",
      ReentrancySentryOOG: "not enough gas for reentrancy sentry",
      InvalidFEOpcode: "invalid opcode: INVALID",
      InvalidJump: "invalid jump destination",
    };
    for (const l of sluice.structLogs) assert.ok(!l.error?.startsWith("Some("), `${name}: geth's words, not ${l.error}`);
    const words = (l) => {
      const debug = l.error?.match(/^Some\((\w+)\)$/);
      return debug && geth[debug[1]] ? { ...l, error: geth[debug[1]] } : l;
    };
    return [sluice, { ...anvil, structLogs: anvil.structLogs.map(words) }];
  }
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

/** Every tracer's output for transaction `hash` on sluice and on anvil, compared (`label` names it). */
export async function compareTraces(label, hash, gasLimit, sluiceUrl, anvilUrl) {
  for (const [name, opts] of TRACERS) {
    const [a, b] = await Promise.all([rpc("debug_traceTransaction", [hash, opts], sluiceUrl), rpc("debug_traceTransaction", [hash, opts], anvilUrl)]);
    const [x, y] = normalize(name, withoutCoinbase(a), withoutCoinbase(b), gasLimit);
    assert.deepStrictEqual(x, y, `${label}: ${name}`);
  }
}
