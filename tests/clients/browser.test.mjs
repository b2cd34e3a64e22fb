// A dapp in a real browser (Debian's headless chromium, driven by
// playwright-core): a page served from another origin than the node's uses
// viem over HTTP and WebSocket to read the chain, preview a transfer with
// simulateCalls (eth_simulateV1), send it signed,
// wait for its receipt and see a new head. Every call crosses origins, so
// it works only if the node answers CORS preflights, puts
// Access-Control-Allow-Origin on responses and accepts the page's Origin on
// the WebSocket handshake (rpc.cors_origins = "*", the default). Run by
// run.sh with SUITE_RPC_URL set to a fresh node.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";
import { chromium } from "playwright-core";

import { CHAIN_ID, KEYS, RPC_URL, freshAddress } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.SUITE_CHROMIUM ?? "/usr/bin/chromium";

test("a page from another origin uses viem over HTTP and WebSocket: reads, a simulateCalls preview, a signed transfer, its receipt, a new head", async () => {
  assert.ok(existsSync(CHROMIUM), `no chromium at ${CHROMIUM} (apt-get install chromium)`);
  const bundle = await build({
    entryPoints: [join(here, "browser", "page.js")],
    bundle: true,
    format: "esm",
    platform: "browser",
    write: false,
    logLevel: "silent",
  });
  const script = bundle.outputFiles[0].text;
  const server = createServer((req, res) => {
    if (req.url.startsWith("/page.js")) {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(script);
    } else {
      res.writeHead(200, { "content-type": "text/html" });
      res.end('<!doctype html><html><body><script type="module" src="/page.js"></script></body></html>');
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  // "localhost", not the node's 127.0.0.1: another host is another origin
  // even before the ports differ.
  const origin = `http://localhost:${server.address().port}`;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    const to = freshAddress(900);
    const query = new URLSearchParams({ rpc: RPC_URL, chain: String(CHAIN_ID), key: KEYS[1], to });
    await page.goto(`${origin}/?${query}`);
    await page.waitForFunction(() => window.__result, null, { timeout: 60000 });
    const result = await page.evaluate(() => window.__result);
    assert.equal(result.error, undefined, `${result.error}; console: ${errors.join(" | ")}`);
    assert.equal(result.origin, origin);
    assert.equal(result.chainId, CHAIN_ID);
    assert.ok(result.blockOverWs >= 0);
    assert.deepEqual(result.preview, [{ status: "success", gasUsed: "21000" }], "the preview (eth_simulateV1)");
    assert.equal(result.balanceAfterPreview, "0", "a preview sends nothing");
    assert.equal(result.status, "success");
    assert.equal(result.gasUsed, result.preview[0].gasUsed, "the preview's gas is what the transfer used");
    assert.equal(result.balance, "1234");
    assert.ok(result.nextHead > result.blockOverWs, JSON.stringify(result));
    assert.deepEqual(errors, [], "no CORS or other errors in the page's console");
  } finally {
    await browser.close();
    server.close();
  }
});
