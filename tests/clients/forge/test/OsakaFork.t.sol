// SPDX-License-Identifier: MIT
pragma solidity ^0.8.31;

import {Registry} from "../src/Registry.sol";

/// The cheatcodes this test uses (forge-std's Vm, reduced: no network here
/// to fetch forge-std).
interface Vm {
    function envAddress(string calldata name) external view returns (address);
}

/// Run by forge.test.mjs as `forge test --fork-url <sluice>` under the
/// `osaka` profile (evm_version = "osaka"): the state comes from sluice (a
/// registry the deploy script made, a dev account's balance), the EVM is
/// forge's, on Osaka's rules (CLZ, P256VERIFY, MODEXP's bounds).
contract OsakaForkTest {
    Vm constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    function clz(uint256 x) internal pure returns (uint256 r) {
        assembly {
            r := clz(x)
        }
    }

    function test_clz() external pure {
        require(clz(0) == 256, "clz(0)");
        require(clz(1) == 255, "clz(1)");
        require(clz(1 << 100) == 155, "clz(2^100)");
        require(clz(1 << 255) == 0, "clz(2^255)");
        require(clz(type(uint256).max) == 0, "clz(max)");
    }

    /// A P-256 signature made with node's crypto: hash || r || s || x || y.
    bytes constant P256_INPUT =
        hex"a743ef9bcf3fed1f0a6435dc1074fd1e556b2b011dc56cd566c255a615701caf5f6cad746bc136bd431a40a16cdce68e304f22aad8425009e744420ecb6e91b8380a34331d326c300303c2a938809623c65520f3ca31b8a5c0e1e81847a7a98f7e8118e81def94d26522b25c1e2289b08a2b88944615bb66b75c4cb753bca5b2cde6b153269ea1c4fa6291355c5136a86b33b9bae04d909d63f7113f593f7cb6";

    function test_p256verify() external view {
        (bool ok, bytes memory out) = address(0x100).staticcall(P256_INPUT);
        require(ok && out.length == 32 && uint256(bytes32(out)) == 1, "valid signature");
        bytes memory bad = bytes.concat(P256_INPUT);
        bad[0] ^= 0x01;
        (ok, out) = address(0x100).staticcall(bad);
        require(ok && out.length == 0, "another hash: empty");
    }

    function test_modexp_bounds() external view {
        (bool ok, bytes memory out) = address(0x05).staticcall(abi.encodePacked(uint256(1), uint256(1), uint256(1), hex"030303"));
        require(ok && out.length == 1 && out[0] == 0x00, "3^3 mod 3");
        bytes memory big = new bytes(1025);
        (ok,) = address(0x05).staticcall{gas: 1_000_000}(abi.encodePacked(uint256(1025), uint256(1), uint256(1), big, hex"0303"));
        require(!ok, "a 1025-byte base fails (EIP-7823)");
    }

    function test_forked_state() external {
        require(block.chainid == 31337, "sluice's chain id");
        require(address(0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266).balance > 0, "a dev account's balance, from sluice");
        Registry last = Registry(vm.envAddress("LAST_REGISTRY"));
        require(last.index() == 7, "the last registry's index, from sluice");
        require(last.previous() == vm.envAddress("PREVIOUS_REGISTRY"), "its link, from sluice");
        // A write on the fork only.
        last.register(42);
        require(last.entries(address(this)) == 42, "registered on the fork");
    }
}
