// Compiles contracts/SluiceToken.sol with the pinned solcjs (offline) into
// contracts/SluiceToken.json (ABI + bytecode).
//
//   node compile.mjs          write the artifact
//   node compile.mjs --check  exit 1 if the committed artifact is stale
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const solc = createRequire(import.meta.url)("solc");

const SOURCE = "contracts/SluiceToken.sol";
const CONTRACT = "SluiceToken";
export const ARTIFACT = join(here, "contracts", `${CONTRACT}.json`);

// cancun: runs on every spec sluice supports (chain.spec = cancun | prague | osaka).
const SETTINGS = {
  evmVersion: "cancun",
  optimizer: { enabled: true, runs: 200 },
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
};

/** Compiles `source` (a path under tests/clients) with the settings above;
 * returns its contracts by name, as solc's standard JSON output has them. */
export function compileSource(source) {
  const input = {
    language: "Solidity",
    sources: { [source]: { content: readFileSync(join(here, source), "utf8") } },
    settings: SETTINGS,
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length) {
    throw new Error(errors.map((e) => e.formattedMessage).join("\n"));
  }
  return output.contracts[source];
}

/** Compiles the token; returns the artifact object. */
export function compile() {
  const c = compileSource(SOURCE)[CONTRACT];
  return {
    contractName: CONTRACT,
    sourceName: SOURCE,
    compiler: { version: solc.version(), settings: { evmVersion: SETTINGS.evmVersion, optimizer: SETTINGS.optimizer } },
    abi: c.abi,
    bytecode: "0x" + c.evm.bytecode.object,
    deployedBytecode: "0x" + c.evm.deployedBytecode.object,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const fresh = compile();
  if (process.argv.includes("--check")) {
    const committed = JSON.parse(readFileSync(ARTIFACT, "utf8"));
    if (!isDeepStrictEqual(committed, fresh)) {
      console.error(`${ARTIFACT} is stale: run node tests/clients/compile.mjs and commit it`);
      process.exit(1);
    }
    console.log(`${ARTIFACT} is current`);
  } else {
    writeFileSync(ARTIFACT, JSON.stringify(fresh, null, 2) + "\n");
    console.log(`wrote ${ARTIFACT}`);
  }
}
