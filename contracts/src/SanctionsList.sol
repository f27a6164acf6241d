// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title SanctionsList (the Chainalysis sanctions oracle)
/// @notice The devnet's stand-in for the Chainalysis sanctions oracle, which Celo (like most EVM
///         chains) has at 0x40C57923924B5c5c5455c48D93317139ADDaC8fb: the devnet installs this code
///         at that address. Same functions, events (so the same topic hashes) and storage layout as
///         the original, an OpenZeppelin 4 Ownable: the owner in slot 0, the list in slot 1. Only
///         the owner adds to and removes from the list; anyone reads it.
contract SanctionsList {
    address private _owner;
    mapping(address => bool) private sanctionedAddresses;

    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event SanctionedAddress(address indexed addr);
    event NonSanctionedAddress(address indexed addr);
    event SanctionedAddressesAdded(address[] addrs);
    event SanctionedAddressesRemoved(address[] addrs);

    constructor() {
        _transferOwnership(msg.sender);
    }

    modifier onlyOwner() {
        require(_owner == msg.sender, "Ownable: caller is not the owner");
        _;
    }

    function owner() public view returns (address) {
        return _owner;
    }

    function renounceOwnership() public onlyOwner {
        _transferOwnership(address(0));
    }

    function transferOwnership(address newOwner) public onlyOwner {
        require(newOwner != address(0), "Ownable: new owner is the zero address");
        _transferOwnership(newOwner);
    }

    function name() external pure returns (string memory) {
        return "Chainalysis sanctions oracle";
    }

    function addToSanctionsList(address[] memory newSanctions) public onlyOwner {
        for (uint256 i = 0; i < newSanctions.length; i++) {
            sanctionedAddresses[newSanctions[i]] = true;
        }
        emit SanctionedAddressesAdded(newSanctions);
    }

    function removeFromSanctionsList(address[] memory removeSanctions) public onlyOwner {
        for (uint256 i = 0; i < removeSanctions.length; i++) {
            sanctionedAddresses[removeSanctions[i]] = false;
        }
        emit SanctionedAddressesRemoved(removeSanctions);
    }

    function isSanctioned(address addr) public view returns (bool) {
        return sanctionedAddresses[addr];
    }

    /// @notice isSanctioned, and a log of the answer (SanctionedAddress or NonSanctionedAddress).
    function isSanctionedVerbose(address addr) public returns (bool) {
        if (isSanctioned(addr)) {
            emit SanctionedAddress(addr);
            return true;
        }
        emit NonSanctionedAddress(addr);
        return false;
    }

    function _transferOwnership(address newOwner) internal {
        address oldOwner = _owner;
        _owner = newOwner;
        emit OwnershipTransferred(oldOwner, newOwner);
    }
}
