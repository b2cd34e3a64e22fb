// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// The callee: storage writes, a log, a revert, a self-destruct.
contract Child {
    event Ping(uint256 value);

    uint256 public last;

    function ping(uint256 value) external {
        last = value;
        emit Ping(value);
    }

    function boom() external pure {
        revert("boom");
    }

    function die(address payable to) external payable {
        selfdestruct(to);
    }
}

/// The caller: creates its child when deployed; calls it with a revert in
/// the middle; forwards value to its self-destruct; fails on request.
contract Parent {
    Child public child;
    uint256 public calls;

    constructor() {
        child = new Child();
    }

    function nested(uint256 value) external {
        child.ping(value);
        try child.boom() {} catch {}
        child.ping(value + 1);
        calls += 1;
    }

    function kill() external payable {
        child.die{value: msg.value}(payable(msg.sender));
    }

    function fail() external pure {
        revert("no");
    }
}
