"""web3.py + eth-account against sluice.

Run by run.sh with SUITE_RPC_URL set to a fresh node; tests run in file order
and share the token deployed by test_erc20_deploy_transfer_balance_of.
"""

import asyncio
import json
import os
from pathlib import Path

import pytest
from eth_account import Account
from web3 import AsyncWeb3, HTTPProvider, Web3, WebSocketProvider
from web3.exceptions import ContractLogicError, MethodUnavailable, TransactionNotFound, Web3RPCError

RPC_URL = os.environ.get("SUITE_RPC_URL", "http://127.0.0.1:8545")
WS_URL = "ws" + RPC_URL[len("http") :]
CHAIN_ID = 31337
BASE_FEE = 10**9
DEV_BALANCE = 10_000 * 10**18
KEYS = [
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
]
ACCOUNTS = [Account.from_key(k) for k in KEYS]
TOKEN = json.loads((Path(__file__).parent / "contracts" / "SluiceToken.json").read_text())
SUPPLY = 1_000_000 * 10**18

w3 = Web3(HTTPProvider(RPC_URL))
state = {}  # shared between tests: the token address


def fresh_address(i: int) -> str:
    return Web3.to_checksum_address(f"0x{0xBEEF00000000 + i:040x}")


def sign_and_send(account, tx: dict) -> bytes:
    """Signs locally with eth-account and sends the raw bytes."""
    tx = {"chainId": CHAIN_ID, "type": 2, "maxFeePerGas": 2 * BASE_FEE, "maxPriorityFeePerGas": BASE_FEE, **tx}
    signed = account.sign_transaction(tx)
    tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
    assert tx_hash == signed.hash, "the node returns the keccak of the raw bytes"
    return tx_hash


def wait(tx_hash):
    return w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30, poll_latency=0.1)


def token():
    return w3.eth.contract(address=state["token"], abi=TOKEN["abi"])


def test_connects_chain_id_block_balances():
    assert w3.is_connected()
    assert w3.eth.chain_id == CHAIN_ID
    assert w3.client_version.startswith("sluice/")
    assert w3.eth.get_balance(ACCOUNTS[1].address) == DEV_BALANCE
    # The node seals an empty block when idle: the head may move between
    # two reads, never backwards.
    before = w3.eth.block_number
    latest = w3.eth.get_block("latest")
    assert latest["baseFeePerGas"] == BASE_FEE
    assert before <= latest["number"] <= w3.eth.block_number
    with pytest.raises(TransactionNotFound):
        w3.eth.get_transaction_receipt("0x" + "ab" * 32)


def test_50_transfers_from_5_senders_pending_nonces_and_receipts():
    senders = ACCOUNTS[1:6]
    start_nonce = {a.address: w3.eth.get_transaction_count(a.address, "pending") for a in senders}
    start_balance = {a.address: w3.eth.get_balance(a.address) for a in senders}
    sent = []  # (sender, recipient, value, hash)
    for round_ in range(10):
        for s, account in enumerate(senders):
            nonce = start_nonce[account.address] + round_
            to = fresh_address(s * 10 + round_)
            value = (s * 10 + round_ + 1) * 10**12
            tx_hash = sign_and_send(account, {"nonce": nonce, "to": to, "value": value, "gas": 21000})
            sent.append((account.address, to, value, tx_hash))
            # "pending" counts every admitted, in-flight transaction.
            assert w3.eth.get_transaction_count(account.address, "pending") == nonce + 1
    receipts = [wait(h) for (_, _, _, h) in sent]
    spent = {a.address: 0 for a in senders}
    for (sender, to, value, tx_hash), r in zip(sent, receipts):
        assert r["status"] == 1
        assert r["gasUsed"] == 21000
        assert r["transactionHash"] == tx_hash
        assert r["from"] == sender
        assert r["effectiveGasPrice"] == 2 * BASE_FEE
        assert w3.eth.get_balance(to) == value
        spent[sender] += value + r["gasUsed"] * r["effectiveGasPrice"]
    for a in senders:
        assert w3.eth.get_transaction_count(a.address, "latest") == start_nonce[a.address] + 10
        assert w3.eth.get_transaction_count(a.address, "pending") == start_nonce[a.address] + 10
        assert w3.eth.get_balance(a.address) == start_balance[a.address] - spent[a.address]
    blocks = sorted({r["blockNumber"] for r in receipts})
    assert sum(len(w3.eth.get_block(n)["transactions"]) for n in blocks) >= 50


def test_estimate_gas():
    transfer = {"from": ACCOUNTS[0].address, "to": fresh_address(100), "value": 1}
    assert w3.eth.estimate_gas(transfer) == 21000
    # Prague and later (Osaka is sluice's default): EIP-7623's calldata floor, 10 gas per
    # token (4 tokens per non-zero byte), is above the 16 gas per byte.
    with_data = {"from": ACCOUNTS[0].address, "to": fresh_address(100), "data": "0x0102"}
    assert w3.eth.estimate_gas(with_data) == 21000 + 10 * 4 * 2
    # A sender that cannot pay the value: geth's message, even with no fee.
    broke = {"from": Account.create().address, "to": fresh_address(100), "value": 1}
    with pytest.raises(Web3RPCError, match="insufficient funds for gas \\* price \\+ value"):
        w3.eth.estimate_gas(broke)


def test_erc20_deploy_transfer_balance_of():
    owner = ACCOUNTS[0]
    factory = w3.eth.contract(abi=TOKEN["abi"], bytecode=TOKEN["bytecode"])
    nonce = w3.eth.get_transaction_count(owner.address, "pending")
    deploy = factory.constructor(SUPPLY).build_transaction({"from": owner.address, "nonce": nonce})
    receipt = wait(sign_and_send(owner, deploy))
    assert receipt["status"] == 1
    state["token"] = receipt["contractAddress"]
    assert w3.eth.get_code(state["token"]).to_0x_hex() == TOKEN["deployedBytecode"]
    t = token()
    assert t.functions.name().call() == "Sluice Test Token"
    assert t.functions.totalSupply().call() == SUPPLY
    assert t.functions.balanceOf(owner.address).call() == SUPPLY

    call = t.functions.transfer(ACCOUNTS[1].address, 4200)
    estimate = call.estimate_gas({"from": owner.address})
    tx = call.build_transaction({"from": owner.address, "nonce": nonce + 1, "gas": estimate})
    receipt = wait(sign_and_send(owner, tx))
    assert receipt["status"] == 1
    assert 21000 < receipt["gasUsed"] <= estimate
    (event,) = t.events.Transfer().process_receipt(receipt)
    assert (event["args"]["from"], event["args"]["to"], event["args"]["value"]) == (owner.address, ACCOUNTS[1].address, 4200)
    assert t.functions.balanceOf(ACCOUNTS[1].address).call() == 4200
    assert t.functions.balanceOf(owner.address).call() == SUPPLY - 4200


def test_get_logs():
    owner, t = ACCOUNTS[0], token()
    nonce = w3.eth.get_transaction_count(owner.address, "pending")
    for i, value in enumerate([31, 32, 33]):
        tx = t.functions.transfer(ACCOUNTS[2].address, value).build_transaction({"from": owner.address, "nonce": nonce + i, "gas": 80000})
        last = sign_and_send(owner, tx)
    wait(last)
    topic = Web3.keccak(text="Transfer(address,address,uint256)")
    to_two = "0x" + "00" * 12 + ACCOUNTS[2].address[2:].lower()
    logs = w3.eth.get_logs({"address": state["token"], "fromBlock": 0, "toBlock": "latest", "topics": [topic, None, to_two]})
    assert [int.from_bytes(log["data"], "big") for log in logs] == [31, 32, 33]
    assert all(log["address"] == state["token"] for log in logs)
    everything = w3.eth.get_logs({"address": state["token"], "fromBlock": 0})
    assert len(everything) == 5, "mint, one transfer, three more"
    assert [(log["blockNumber"], log["logIndex"]) for log in everything] == sorted((log["blockNumber"], log["logIndex"]) for log in everything)
    decoded = t.events.Transfer().get_logs(from_block=0, argument_filters={"to": ACCOUNTS[2].address})
    assert [e["args"]["value"] for e in decoded] == [31, 32, 33]


def test_revert_reason():
    poor, t = ACCOUNTS[3], token()
    call = t.functions.transfer(ACCOUNTS[1].address, 1)
    with pytest.raises(ContractLogicError, match="SluiceToken: insufficient balance"):
        call.call({"from": poor.address})
    with pytest.raises(ContractLogicError, match="SluiceToken: insufficient balance"):
        call.estimate_gas({"from": poor.address})
    nonce = w3.eth.get_transaction_count(poor.address, "pending")
    tx = call.build_transaction({"from": poor.address, "nonce": nonce, "gas": 100000})
    receipt = wait(sign_and_send(poor, tx))
    assert receipt["status"] == 0
    assert 21000 < receipt["gasUsed"] < 100000
    assert w3.eth.get_transaction_count(poor.address) == nonce + 1


def test_errors_as_geth_reports_them():
    owner = ACCOUNTS[0]
    with pytest.raises(Web3RPCError, match="nonce too low") as e:
        sign_and_send(owner, {"nonce": 0, "to": fresh_address(200), "value": 1, "gas": 21000})
    assert e.value.rpc_response["error"]["code"] == -32000
    broke = Account.create()
    with pytest.raises(Web3RPCError, match="insufficient funds for gas \\* price \\+ value"):
        sign_and_send(broke, {"nonce": 0, "to": fresh_address(200), "value": 10**18, "gas": 21000})
    with pytest.raises(Web3RPCError, match="insufficient funds"):
        w3.eth.estimate_gas({"from": broke.address, "to": fresh_address(200), "value": 10**18})
    with pytest.raises(MethodUnavailable) as e:
        w3.manager.request_blocking("eth_noSuchMethod", [])
    assert isinstance(e.value, Web3RPCError)
    assert e.value.rpc_response["error"]["code"] == -32601
    assert w3.eth.chain_id == CHAIN_ID


def test_websocket_subscriptions_newheads_and_logs():
    """AsyncWeb3 over WebSocket: every block and every Transfer log, in order."""

    async def run():
        owner = ACCOUNTS[0]
        async with AsyncWeb3(WebSocketProvider(WS_URL)) as ws:
            assert await ws.eth.chain_id == CHAIN_ID
            heads_id = await ws.eth.subscribe("newHeads")
            logs_id = await ws.eth.subscribe("logs", {"address": state["token"]})
            start = await ws.eth.block_number
            nonce = await ws.eth.get_transaction_count(owner.address, "pending")
            t = token()
            hashes = []
            for i in range(6):
                tx = t.functions.transfer(ACCOUNTS[4].address, 500 + i).build_transaction({"from": owner.address, "nonce": nonce + i, "gas": 80000})
                signed = owner.sign_transaction({"chainId": CHAIN_ID, "type": 2, "maxFeePerGas": 2 * BASE_FEE, "maxPriorityFeePerGas": BASE_FEE, **tx})
                hashes.append(await ws.eth.send_raw_transaction(signed.raw_transaction))
                if i % 2 == 1:
                    await asyncio.sleep(0.25)  # spread over blocks
            heads, logs = [], []
            end = None
            async for msg in ws.socket.process_subscriptions():
                if msg["subscription"] == heads_id:
                    heads.append(msg["result"]["number"])
                elif msg["subscription"] == logs_id:
                    logs.append(msg["result"])
                if len(logs) == len(hashes):
                    end = logs[-1]["blockNumber"]
                    if heads and heads[-1] >= end:
                        break
            assert [h for h in heads if h > start] == list(range(start + 1, end + 1)), "every block, in order"
            assert [log["transactionHash"] for log in logs] == hashes, "every event, in order"
            assert [int.from_bytes(log["data"], "big") for log in logs] == [500 + i for i in range(6)]
            assert await ws.eth.unsubscribe(heads_id)
            assert await ws.eth.unsubscribe(logs_id)

    asyncio.run(asyncio.wait_for(run(), timeout=60))
