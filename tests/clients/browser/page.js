// A dapp's page: viem over HTTP and WebSocket, from the browser. It reads
// the chain, sends a signed transfer, waits for its receipt and for a new
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
  const hash = await wallet.sendTransaction({ to, value: 1234n });
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 100 });
  result.status = receipt.status;
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
