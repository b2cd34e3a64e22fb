// SPDX-License-Identifier: MIT
// The ERC-20 the client compatibility suite deploys and drives.
// Compiled by compile.mjs (npm solc, pinned in package-lock.json) into
// SluiceToken.json; a test recompiles it and fails if the artifact is stale.
pragma solidity 0.8.37;

/// @title A minimal ERC-20 whose failures revert with reason strings, so
/// clients' revert decoding is exercised.
contract SluiceToken {
    string public constant name = "Sluice Test Token";
    string public constant symbol = "SLT";
    uint8 public constant decimals = 18;

    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    /// @param supply Every token, minted to the deployer.
    constructor(uint256 supply) {
        totalSupply = supply;
        balanceOf[msg.sender] = supply;
        emit Transfer(address(0), msg.sender, supply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= value, "SluiceToken: insufficient allowance");
        allowance[from][msg.sender] = allowed - value;
        _transfer(from, to, value);
        return true;
    }

    function _transfer(address from, address to, uint256 value) internal {
        require(to != address(0), "SluiceToken: transfer to the zero address");
        uint256 balance = balanceOf[from];
        require(balance >= value, "SluiceToken: insufficient balance");
        unchecked {
            balanceOf[from] = balance - value;
        }
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
