// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// A small contract a deploy script creates many of, each linked to the
/// previous one (so every deploy depends on the one before in the script).
contract Registry {
    address public immutable previous;
    uint256 public immutable index;
    mapping(address => uint256) public entries;

    event Registered(address indexed who, uint256 value);

    constructor(address previous_, uint256 index_) {
        previous = previous_;
        index = index_;
    }

    function register(uint256 value) external {
        entries[msg.sender] = value;
        emit Registered(msg.sender, value);
    }
}
