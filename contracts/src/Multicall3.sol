// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Multicall3 (aggregate3 only)
/// @notice The devnet's stand-in for Multicall3 (mds1/multicall), which Celo has at
///         0xcA11bde05977b3631167028862bE2a173976CA11: the devnet installs this code at that
///         address. Same selector and semantics as the original's aggregate3, which is all the
///         service uses (several transferWithAuthorization calls settled in one transaction).
contract Multicall3 {
    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    function aggregate3(Call3[] calldata calls) external payable returns (Result[] memory returnData) {
        uint256 length = calls.length;
        returnData = new Result[](length);
        for (uint256 i = 0; i < length; i++) {
            Call3 calldata call = calls[i];
            (bool success, bytes memory ret) = call.target.call(call.callData);
            require(success || call.allowFailure, "Multicall3: call failed");
            returnData[i] = Result(success, ret);
        }
    }
}
