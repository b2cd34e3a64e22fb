// A dapp's page: viem over HTTP and WebSocket, from the browser. It reads
// the chain, previews a transfer as a wallet does (viem's simulateCalls,
// eth_simulateV1), sends it signed, waits for its receipt and for a new
// head over eth_subscribe, and leaves what it saw in `window.__result`.
// Bundled by browser.test.mjs (esbuild) and served from another origin
// than the node's, so the browser applies CORS to every call.
import { createPublicClient, createWalletClient, http, webSocket } from "viem";
import { privateKeyToAccount } from "viem/accounts";

const params = new URLSearchParams(location.search);
const rpc = params.get("rpc");
const ws = rpc.replace(/^http/, "ws");
const chain = {
  id: Number(params.get("chain")),
  name: "sluice",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpc], webSocket: [ws] } },
};

async function main() {
  const client = createPublicClient({ chain, transport: http(rpc) });
  const live = createPublicClient({ chain, transport: webSocket(ws) });
  const wallet = createWalletClient({ account: privateKeyToAccount(params.get("key")), chain, transport: http(rpc) });
  const result = { origin: location.origin };
  result.chainId = await client.getChainId();
  result.blockOverWs = Number(await live.getBlockNumber());
  const to = params.get("to");
  // The wallet's preview: what the transfer would do, nothing sent.
  const preview = await client.simulateCalls({ account: wallet.account.address, calls: [{ to, value: 1234n }] });
  result.preview = preview.results.map((r) => ({ status: r.status, gasUsed: String(r.gasUsed) }));
  result.balanceAfterPreview = String(await client.getBalance({ address: to }));
  const hash = await wallet.sendTransaction({ to, value: 1234n });
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 100 });
  result.status = receipt.status;
  result.gasUsed = String(receipt.gasUsed);
  result.balance = String(await live.getBalance({ address: to }));
  result.nextHead = await new Promise((resolve) => {
    const stop = live.watchBlockNumber({
      emitOnBegin: false,
      onBlockNumber: (n) => {
        stop();
        resolve(Number(n));
      },
    });
  });
  result.receiptBlock = Number(receipt.blockNumber);
  return result;
}

main().then(
  (r) => (window.__result = r),
  (e) => (window.__result = { error: String(e?.shortMessage ?? e) }),
);
