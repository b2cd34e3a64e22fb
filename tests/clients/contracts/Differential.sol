// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// What the differential test's blocks call: a counter that logs, storage
/// per caller, a revert with a reason, and a loop of storage writes (out of
/// gas on a small gas limit).
contract Counter {
    event Bumped(address indexed who, uint256 count);

    uint256 public count;
    mapping(address => uint256) public by;

    function bump() external {
        count += 1;
        by[msg.sender] += 1;
        emit Bumped(msg.sender, count);
    }

    function fail() external pure {
        revert("nope");
    }

    function fill(uint256 n) external {
        for (uint256 i = 1; i <= n; i++) {
            by[address(uint160(i))] = i;
        }
    }
}
