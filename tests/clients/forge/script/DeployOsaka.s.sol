// SPDX-License-Identifier: MIT
pragma solidity ^0.8.31;

/// The cheatcodes this script uses (forge-std's Vm, reduced: no network
/// here to fetch forge-std).
interface Vm {
    function envUint(string calldata name) external view returns (uint256);
    function startBroadcast(uint256 privateKey) external;
    function stopBroadcast() external;
}

/// Built for Osaka (`clz` needs evm_version = "osaka"): records the count
/// of leading zero bits of what it is given, so the broadcast transaction
/// runs CLZ on the node's EVM, not forge's.
contract LeadingZeros {
    uint256 public last;

    function record(uint256 x) external returns (uint256 r) {
        assembly {
            r := clz(x)
        }
        last = r;
    }
}

/// Run by forge.test.mjs as `forge script --broadcast` under the `osaka`
/// profile: deploys LeadingZeros and records clz(2^100) = 155 on chain.
contract DeployOsaka {
    Vm constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    function run() external {
        vm.startBroadcast(vm.envUint("DEPLOYER_KEY"));
        LeadingZeros lz = new LeadingZeros();
        lz.record(1 << 100);
        vm.stopBroadcast();
    }
}
