// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {Registry} from "../src/Registry.sol";

/// The cheatcodes this script uses (forge-std's Vm, reduced: no network
/// here to fetch forge-std).
interface Vm {
    function envUint(string calldata name) external view returns (uint256);
    function startBroadcast(uint256 privateKey) external;
    function stopBroadcast() external;
}

/// Deploys a chain of 8 registries and registers in 4 of them: 12
/// transactions from one sender, broadcast with several in flight.
contract Deploy {
    Vm constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    function run() external {
        vm.startBroadcast(vm.envUint("DEPLOYER_KEY"));
        Registry last = Registry(address(0));
        Registry[] memory all = new Registry[](8);
        for (uint256 i = 0; i < 8; i++) {
            last = new Registry(address(last), i);
            all[i] = last;
        }
        for (uint256 i = 0; i < 4; i++) {
            all[i * 2].register(i + 1);
        }
        vm.stopBroadcast();
    }
}
