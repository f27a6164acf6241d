// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title ReputationReporter
/// @notice On-chain attestations of wallet financial reports. The publish function, event, views,
///         id format and uniqueness rules are byte-compatible with the reporter already live on Celo
///         (indexers decode both with one ABI); revocation, expiry and superseding are additions.
contract ReputationReporter {
    struct FinancialAttestation {
        address wallet;
        address buyer;
        uint8 reputationScore;
        uint8 financialHealthScore;
        string loanCapacity;
        string reportHash;
        uint256 publishedAt;
    }

    struct WalletProfile {
        uint256 reportCount;
        string latestReportId;
        uint8 latestReputationScore;
        uint8 latestFinancialHealthScore;
        uint256 lastPublishedAt;
    }

    /// @dev Lifecycle of a report, kept apart from the attestation so the legacy views stay unchanged.
    struct ReportMeta {
        uint64 expiresAt;
        bool revoked;
        string supersededBy;
        string revocationReason;
    }

    /// @dev Bundles publish arguments: nine of them (four strings) do not fit the EVM stack otherwise.
    struct PublishInput {
        address wallet;
        address buyer;
        uint8 reputationScore;
        uint8 financialHealthScore;
        string loanCapacity;
        string reportId;
        string reportHash;
        uint64 expiresAt;
        string supersedesReportId;
    }

    address public admin;
    uint256 public reportCount;

    mapping(address => bool) private _reporters;
    // Keyed by keccak256(reportId), the same value as the event's indexed reportIdHash.
    mapping(bytes32 => FinancialAttestation) private _reports;
    mapping(bytes32 => ReportMeta) private _meta;
    mapping(bytes32 => string) private _reportIdByHash; // keccak256(reportHash) => reportId
    mapping(address => string[]) private _walletReportIds;

    event FinancialReportPublished(
        bytes32 indexed reportIdHash,
        string reportId,
        address indexed wallet,
        address indexed buyer,
        uint8 reputationScore,
        uint8 financialHealthScore,
        string loanCapacity,
        string reportHash,
        uint256 timestamp
    );
    event ReportExpirySet(bytes32 indexed reportIdHash, string reportId, uint64 expiresAt);
    event ReportSuperseded(
        bytes32 indexed oldReportIdHash, bytes32 indexed newReportIdHash, string oldReportId, string newReportId
    );
    event ReportRevoked(
        bytes32 indexed reportIdHash, string reportId, address indexed wallet, string reason, uint256 timestamp
    );
    event ReporterUpdated(address indexed account, bool allowed);
    event AdminTransferred(address indexed previousAdmin, address indexed newAdmin);

    modifier onlyAdmin() {
        require(msg.sender == admin, "not admin");
        _;
    }

    modifier onlyReporter() {
        require(_reporters[msg.sender], "not reporter");
        _;
    }

    /// @param initialReporter the publishing key; may equal the deployer, zero grants nobody.
    constructor(address initialReporter) {
        admin = msg.sender;
        emit AdminTransferred(address(0), msg.sender);
        if (initialReporter != address(0)) {
            _reporters[initialReporter] = true;
            emit ReporterUpdated(initialReporter, true);
        }
    }

    // ----------------------------------------------------------------- roles

    function setReporter(address account, bool allowed) external onlyAdmin {
        _reporters[account] = allowed;
        emit ReporterUpdated(account, allowed);
    }

    function isReporter(address account) external view returns (bool) {
        return _reporters[account];
    }

    function transferAdmin(address newAdmin) external onlyAdmin {
        require(newAdmin != address(0), "zero admin");
        emit AdminTransferred(admin, newAdmin);
        admin = newAdmin;
    }

    // --------------------------------------------------------------- publish

    function publishFinancialReport(
        address wallet,
        address buyer,
        uint8 reputationScore,
        uint8 financialHealthScore,
        string memory loanCapacity,
        string memory reportId,
        string memory reportHash
    ) external onlyReporter {
        _publish(
            PublishInput(wallet, buyer, reputationScore, financialHealthScore, loanCapacity, reportId, reportHash, 0, "")
        );
    }

    /// @param expiresAt unix seconds after which the report should no longer be relied on; 0 = never.
    /// @param supersedesReportId an earlier report of the same wallet this one replaces; "" = none.
    function publishFinancialReportV2(
        address wallet,
        address buyer,
        uint8 reputationScore,
        uint8 financialHealthScore,
        string memory loanCapacity,
        string memory reportId,
        string memory reportHash,
        uint64 expiresAt,
        string memory supersedesReportId
    ) external onlyReporter {
        _publish(
            PublishInput(
                wallet,
                buyer,
                reputationScore,
                financialHealthScore,
                loanCapacity,
                reportId,
                reportHash,
                expiresAt,
                supersedesReportId
            )
        );
    }

    function revokeReport(string calldata reportId, string calldata reason) external onlyReporter {
        bytes32 idHash = keccak256(bytes(reportId));
        FinancialAttestation storage report = _reports[idHash];
        require(report.publishedAt != 0, "report unknown");
        ReportMeta storage meta = _meta[idHash];
        require(!meta.revoked, "report already revoked");
        require(bytes(reason).length != 0, "empty reason");
        meta.revoked = true;
        meta.revocationReason = reason;
        emit ReportRevoked(idHash, reportId, report.wallet, reason, block.timestamp);
    }

    function _publish(PublishInput memory p) private {
        require(p.wallet != address(0), "zero wallet");
        require(p.reputationScore <= 100 && p.financialHealthScore <= 100, "score out of range");
        require(_isValidReportId(bytes(p.reportId)), "invalid report id");
        require(bytes(p.reportHash).length != 0, "empty report hash");
        require(p.expiresAt == 0 || p.expiresAt > block.timestamp, "expiry in past");

        bytes32 idHash = keccak256(bytes(p.reportId));
        require(_reports[idHash].publishedAt == 0, "report id exists");
        bytes32 contentHash = keccak256(bytes(p.reportHash));
        require(bytes(_reportIdByHash[contentHash]).length == 0, "report hash exists");
        // Checked before the new report is stored, so a report can never supersede itself.
        bytes32 oldIdHash;
        bool supersedes = bytes(p.supersedesReportId).length != 0;
        if (supersedes) oldIdHash = _requireSupersedable(p.supersedesReportId, p.wallet);

        _reports[idHash] = FinancialAttestation(
            p.wallet, p.buyer, p.reputationScore, p.financialHealthScore, p.loanCapacity, p.reportHash, block.timestamp
        );
        _reportIdByHash[contentHash] = p.reportId;
        _walletReportIds[p.wallet].push(p.reportId);
        unchecked {
            ++reportCount;
        }
        emit FinancialReportPublished(
            idHash,
            p.reportId,
            p.wallet,
            p.buyer,
            p.reputationScore,
            p.financialHealthScore,
            p.loanCapacity,
            p.reportHash,
            block.timestamp
        );

        if (p.expiresAt != 0) {
            _meta[idHash].expiresAt = p.expiresAt;
            emit ReportExpirySet(idHash, p.reportId, p.expiresAt);
        }
        if (supersedes) {
            _meta[oldIdHash].supersededBy = p.reportId;
            emit ReportSuperseded(oldIdHash, idHash, p.supersedesReportId, p.reportId);
        }
    }

    function _requireSupersedable(string memory oldId, address wallet) private view returns (bytes32 oldIdHash) {
        oldIdHash = keccak256(bytes(oldId));
        FinancialAttestation storage old = _reports[oldIdHash];
        require(old.publishedAt != 0, "superseded report unknown");
        require(old.wallet == wallet, "superseded report of another wallet");
        require(bytes(_meta[oldIdHash].supersededBy).length == 0, "report already superseded");
    }

    /// @dev "REP-" then exactly 10 of [A-Z0-9].
    function _isValidReportId(bytes memory id) private pure returns (bool) {
        if (id.length != 14 || id[0] != "R" || id[1] != "E" || id[2] != "P" || id[3] != "-") return false;
        for (uint256 i = 4; i < 14; ++i) {
            bytes1 c = id[i];
            if (!((c >= "A" && c <= "Z") || (c >= "0" && c <= "9"))) return false;
        }
        return true;
    }

    // ----------------------------------------------------------------- views

    function verifyReport(string calldata reportId)
        external
        view
        returns (bool exists, FinancialAttestation memory attestation)
    {
        attestation = _reports[keccak256(bytes(reportId))];
        exists = attestation.publishedAt != 0;
    }

    function verifyReportByHash(string calldata reportHash)
        external
        view
        returns (bool exists, string memory reportId, FinancialAttestation memory attestation)
    {
        reportId = _reportIdByHash[keccak256(bytes(reportHash))];
        exists = bytes(reportId).length != 0;
        if (exists) attestation = _reports[keccak256(bytes(reportId))];
    }

    /// @notice Latest publication for a wallet; revocation and expiry are read via reportStatus.
    function getProfile(address wallet) external view returns (WalletProfile memory profile) {
        string[] storage ids = _walletReportIds[wallet];
        profile.reportCount = ids.length;
        if (ids.length == 0) return profile;
        profile.latestReportId = ids[ids.length - 1];
        FinancialAttestation storage latest = _reports[keccak256(bytes(profile.latestReportId))];
        profile.latestReputationScore = latest.reputationScore;
        profile.latestFinancialHealthScore = latest.financialHealthScore;
        profile.lastPublishedAt = latest.publishedAt;
    }

    function getWalletReportIds(address wallet) external view returns (string[] memory) {
        return _walletReportIds[wallet];
    }

    function reportStatus(string calldata reportId)
        external
        view
        returns (
            bool exists,
            bool revoked,
            uint64 expiresAt,
            string memory supersededBy,
            string memory revocationReason
        )
    {
        bytes32 idHash = keccak256(bytes(reportId));
        exists = _reports[idHash].publishedAt != 0;
        ReportMeta storage meta = _meta[idHash];
        return (exists, meta.revoked, meta.expiresAt, meta.supersededBy, meta.revocationReason);
    }
}
