//! spool-error-code: Kafka's error numbers as one Rust enum, [`ErrorCode`], shared by spool's
//! native and Kafka fronts, its client, and the decision core (`spool-core`, which may depend on
//! nothing with a runtime in it — hence a crate of its own, with no dependencies).
//!
//! Every variant has Kafka's explicit number (`org.apache.kafka.common.protocol.Errors`), so a client
//! can switch protocols without relearning errors. The numbers are stable on the wire and mirror
//! the `ErrorCode` enum in `schemas/common.fbs`; `spool-protocol` converts to and from the
//! flatbuffers type and checks the two agree value by value.
//! [`ErrorCode::is_retriable`] follows Kafka's `RetriableException` hierarchy.

/// A protocol error code. `None` (0) is success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i16)]
pub enum ErrorCode {
    UnknownServerError = -1,
    None = 0,
    OffsetOutOfRange = 1,
    CorruptMessage = 2,
    UnknownTopicOrPartition = 3,
    InvalidFetchSize = 4,
    LeaderNotAvailable = 5,
    NotLeaderOrFollower = 6,
    RequestTimedOut = 7,
    BrokerNotAvailable = 8,
    ReplicaNotAvailable = 9,
    MessageTooLarge = 10,
    StaleControllerEpoch = 11,
    OffsetMetadataTooLarge = 12,
    NetworkException = 13,
    CoordinatorLoadInProgress = 14,
    CoordinatorNotAvailable = 15,
    NotCoordinator = 16,
    InvalidTopicException = 17,
    RecordListTooLarge = 18,
    NotEnoughReplicas = 19,
    NotEnoughReplicasAfterAppend = 20,
    InvalidRequiredAcks = 21,
    IllegalGeneration = 22,
    InconsistentGroupProtocol = 23,
    InvalidGroupId = 24,
    UnknownMemberId = 25,
    InvalidSessionTimeout = 26,
    RebalanceInProgress = 27,
    InvalidCommitOffsetSize = 28,
    TopicAuthorizationFailed = 29,
    GroupAuthorizationFailed = 30,
    ClusterAuthorizationFailed = 31,
    InvalidTimestamp = 32,
    UnsupportedSaslMechanism = 33,
    IllegalSaslState = 34,
    UnsupportedVersion = 35,
    TopicAlreadyExists = 36,
    InvalidPartitions = 37,
    InvalidReplicationFactor = 38,
    InvalidReplicaAssignment = 39,
    InvalidConfig = 40,
    NotController = 41,
    InvalidRequest = 42,
    UnsupportedForMessageFormat = 43,
    PolicyViolation = 44,
    OutOfOrderSequenceNumber = 45,
    DuplicateSequenceNumber = 46,
    InvalidProducerEpoch = 47,
    InvalidTxnState = 48,
    InvalidProducerIdMapping = 49,
    InvalidTransactionTimeout = 50,
    ConcurrentTransactions = 51,
    TransactionCoordinatorFenced = 52,
    TransactionalIdAuthorizationFailed = 53,
    SecurityDisabled = 54,
    OperationNotAttempted = 55,
    KafkaStorageError = 56,
    LogDirNotFound = 57,
    SaslAuthenticationFailed = 58,
    UnknownProducerId = 59,
    ReassignmentInProgress = 60,
    DelegationTokenAuthDisabled = 61,
    DelegationTokenNotFound = 62,
    DelegationTokenOwnerMismatch = 63,
    DelegationTokenRequestNotAllowed = 64,
    DelegationTokenAuthorizationFailed = 65,
    DelegationTokenExpired = 66,
    InvalidPrincipalType = 67,
    NonEmptyGroup = 68,
    GroupIdNotFound = 69,
    FetchSessionIdNotFound = 70,
    InvalidFetchSessionEpoch = 71,
    ListenerNotFound = 72,
    TopicDeletionDisabled = 73,
    FencedLeaderEpoch = 74,
    UnknownLeaderEpoch = 75,
    UnsupportedCompressionType = 76,
    StaleBrokerEpoch = 77,
    OffsetNotAvailable = 78,
    MemberIdRequired = 79,
    PreferredLeaderNotAvailable = 80,
    GroupMaxSizeReached = 81,
    FencedInstanceId = 82,
    EligibleLeadersNotAvailable = 83,
    ElectionNotNeeded = 84,
    NoReassignmentInProgress = 85,
    GroupSubscribedToTopic = 86,
    InvalidRecord = 87,
    UnstableOffsetCommit = 88,
    ThrottlingQuotaExceeded = 89,
    ProducerFenced = 90,
    ResourceNotFound = 91,
    DuplicateResource = 92,
    UnacceptableCredential = 93,
    InconsistentVoterSet = 94,
    InvalidUpdateVersion = 95,
    FeatureUpdateFailed = 96,
    PrincipalDeserializationFailure = 97,
    SnapshotNotFound = 98,
    PositionOutOfRange = 99,
    UnknownTopicId = 100,
    DuplicateBrokerRegistration = 101,
    BrokerIdNotRegistered = 102,
    InconsistentTopicId = 103,
    InconsistentClusterId = 104,
    TransactionalIdNotFound = 105,
    FetchSessionTopicIdError = 106,
    IneligibleReplica = 107,
    NewLeaderElected = 108,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 110] = [
        ErrorCode::UnknownServerError,
        ErrorCode::None,
        ErrorCode::OffsetOutOfRange,
        ErrorCode::CorruptMessage,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::InvalidFetchSize,
        ErrorCode::LeaderNotAvailable,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::RequestTimedOut,
        ErrorCode::BrokerNotAvailable,
        ErrorCode::ReplicaNotAvailable,
        ErrorCode::MessageTooLarge,
        ErrorCode::StaleControllerEpoch,
        ErrorCode::OffsetMetadataTooLarge,
        ErrorCode::NetworkException,
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotCoordinator,
        ErrorCode::InvalidTopicException,
        ErrorCode::RecordListTooLarge,
        ErrorCode::NotEnoughReplicas,
        ErrorCode::NotEnoughReplicasAfterAppend,
        ErrorCode::InvalidRequiredAcks,
        ErrorCode::IllegalGeneration,
        ErrorCode::InconsistentGroupProtocol,
        ErrorCode::InvalidGroupId,
        ErrorCode::UnknownMemberId,
        ErrorCode::InvalidSessionTimeout,
        ErrorCode::RebalanceInProgress,
        ErrorCode::InvalidCommitOffsetSize,
        ErrorCode::TopicAuthorizationFailed,
        ErrorCode::GroupAuthorizationFailed,
        ErrorCode::ClusterAuthorizationFailed,
        ErrorCode::InvalidTimestamp,
        ErrorCode::UnsupportedSaslMechanism,
        ErrorCode::IllegalSaslState,
        ErrorCode::UnsupportedVersion,
        ErrorCode::TopicAlreadyExists,
        ErrorCode::InvalidPartitions,
        ErrorCode::InvalidReplicationFactor,
        ErrorCode::InvalidReplicaAssignment,
        ErrorCode::InvalidConfig,
        ErrorCode::NotController,
        ErrorCode::InvalidRequest,
        ErrorCode::UnsupportedForMessageFormat,
        ErrorCode::PolicyViolation,
        ErrorCode::OutOfOrderSequenceNumber,
        ErrorCode::DuplicateSequenceNumber,
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::InvalidTxnState,
        ErrorCode::InvalidProducerIdMapping,
        ErrorCode::InvalidTransactionTimeout,
        ErrorCode::ConcurrentTransactions,
        ErrorCode::TransactionCoordinatorFenced,
        ErrorCode::TransactionalIdAuthorizationFailed,
        ErrorCode::SecurityDisabled,
        ErrorCode::OperationNotAttempted,
        ErrorCode::KafkaStorageError,
        ErrorCode::LogDirNotFound,
        ErrorCode::SaslAuthenticationFailed,
        ErrorCode::UnknownProducerId,
        ErrorCode::ReassignmentInProgress,
        ErrorCode::DelegationTokenAuthDisabled,
        ErrorCode::DelegationTokenNotFound,
        ErrorCode::DelegationTokenOwnerMismatch,
        ErrorCode::DelegationTokenRequestNotAllowed,
        ErrorCode::DelegationTokenAuthorizationFailed,
        ErrorCode::DelegationTokenExpired,
        ErrorCode::InvalidPrincipalType,
        ErrorCode::NonEmptyGroup,
        ErrorCode::GroupIdNotFound,
        ErrorCode::FetchSessionIdNotFound,
        ErrorCode::InvalidFetchSessionEpoch,
        ErrorCode::ListenerNotFound,
        ErrorCode::TopicDeletionDisabled,
        ErrorCode::FencedLeaderEpoch,
        ErrorCode::UnknownLeaderEpoch,
        ErrorCode::UnsupportedCompressionType,
        ErrorCode::StaleBrokerEpoch,
        ErrorCode::OffsetNotAvailable,
        ErrorCode::MemberIdRequired,
        ErrorCode::PreferredLeaderNotAvailable,
        ErrorCode::GroupMaxSizeReached,
        ErrorCode::FencedInstanceId,
        ErrorCode::EligibleLeadersNotAvailable,
        ErrorCode::ElectionNotNeeded,
        ErrorCode::NoReassignmentInProgress,
        ErrorCode::GroupSubscribedToTopic,
        ErrorCode::InvalidRecord,
        ErrorCode::UnstableOffsetCommit,
        ErrorCode::ThrottlingQuotaExceeded,
        ErrorCode::ProducerFenced,
        ErrorCode::ResourceNotFound,
        ErrorCode::DuplicateResource,
        ErrorCode::UnacceptableCredential,
        ErrorCode::InconsistentVoterSet,
        ErrorCode::InvalidUpdateVersion,
        ErrorCode::FeatureUpdateFailed,
        ErrorCode::PrincipalDeserializationFailure,
        ErrorCode::SnapshotNotFound,
        ErrorCode::PositionOutOfRange,
        ErrorCode::UnknownTopicId,
        ErrorCode::DuplicateBrokerRegistration,
        ErrorCode::BrokerIdNotRegistered,
        ErrorCode::InconsistentTopicId,
        ErrorCode::InconsistentClusterId,
        ErrorCode::TransactionalIdNotFound,
        ErrorCode::FetchSessionTopicIdError,
        ErrorCode::IneligibleReplica,
        ErrorCode::NewLeaderElected,
    ];

    /// The code for a wire number, or `None` for a number this build does not know.
    pub fn from_i16(code: i16) -> Option<Self> {
        match code {
            -1 => Some(Self::UnknownServerError),
            0 => Some(Self::None),
            1 => Some(Self::OffsetOutOfRange),
            2 => Some(Self::CorruptMessage),
            3 => Some(Self::UnknownTopicOrPartition),
            4 => Some(Self::InvalidFetchSize),
            5 => Some(Self::LeaderNotAvailable),
            6 => Some(Self::NotLeaderOrFollower),
            7 => Some(Self::RequestTimedOut),
            8 => Some(Self::BrokerNotAvailable),
            9 => Some(Self::ReplicaNotAvailable),
            10 => Some(Self::MessageTooLarge),
            11 => Some(Self::StaleControllerEpoch),
            12 => Some(Self::OffsetMetadataTooLarge),
            13 => Some(Self::NetworkException),
            14 => Some(Self::CoordinatorLoadInProgress),
            15 => Some(Self::CoordinatorNotAvailable),
            16 => Some(Self::NotCoordinator),
            17 => Some(Self::InvalidTopicException),
            18 => Some(Self::RecordListTooLarge),
            19 => Some(Self::NotEnoughReplicas),
            20 => Some(Self::NotEnoughReplicasAfterAppend),
            21 => Some(Self::InvalidRequiredAcks),
            22 => Some(Self::IllegalGeneration),
            23 => Some(Self::InconsistentGroupProtocol),
            24 => Some(Self::InvalidGroupId),
            25 => Some(Self::UnknownMemberId),
            26 => Some(Self::InvalidSessionTimeout),
            27 => Some(Self::RebalanceInProgress),
            28 => Some(Self::InvalidCommitOffsetSize),
            29 => Some(Self::TopicAuthorizationFailed),
            30 => Some(Self::GroupAuthorizationFailed),
            31 => Some(Self::ClusterAuthorizationFailed),
            32 => Some(Self::InvalidTimestamp),
            33 => Some(Self::UnsupportedSaslMechanism),
            34 => Some(Self::IllegalSaslState),
            35 => Some(Self::UnsupportedVersion),
            36 => Some(Self::TopicAlreadyExists),
            37 => Some(Self::InvalidPartitions),
            38 => Some(Self::InvalidReplicationFactor),
            39 => Some(Self::InvalidReplicaAssignment),
            40 => Some(Self::InvalidConfig),
            41 => Some(Self::NotController),
            42 => Some(Self::InvalidRequest),
            43 => Some(Self::UnsupportedForMessageFormat),
            44 => Some(Self::PolicyViolation),
            45 => Some(Self::OutOfOrderSequenceNumber),
            46 => Some(Self::DuplicateSequenceNumber),
            47 => Some(Self::InvalidProducerEpoch),
            48 => Some(Self::InvalidTxnState),
            49 => Some(Self::InvalidProducerIdMapping),
            50 => Some(Self::InvalidTransactionTimeout),
            51 => Some(Self::ConcurrentTransactions),
            52 => Some(Self::TransactionCoordinatorFenced),
            53 => Some(Self::TransactionalIdAuthorizationFailed),
            54 => Some(Self::SecurityDisabled),
            55 => Some(Self::OperationNotAttempted),
            56 => Some(Self::KafkaStorageError),
            57 => Some(Self::LogDirNotFound),
            58 => Some(Self::SaslAuthenticationFailed),
            59 => Some(Self::UnknownProducerId),
            60 => Some(Self::ReassignmentInProgress),
            61 => Some(Self::DelegationTokenAuthDisabled),
            62 => Some(Self::DelegationTokenNotFound),
            63 => Some(Self::DelegationTokenOwnerMismatch),
            64 => Some(Self::DelegationTokenRequestNotAllowed),
            65 => Some(Self::DelegationTokenAuthorizationFailed),
            66 => Some(Self::DelegationTokenExpired),
            67 => Some(Self::InvalidPrincipalType),
            68 => Some(Self::NonEmptyGroup),
            69 => Some(Self::GroupIdNotFound),
            70 => Some(Self::FetchSessionIdNotFound),
            71 => Some(Self::InvalidFetchSessionEpoch),
            72 => Some(Self::ListenerNotFound),
            73 => Some(Self::TopicDeletionDisabled),
            74 => Some(Self::FencedLeaderEpoch),
            75 => Some(Self::UnknownLeaderEpoch),
            76 => Some(Self::UnsupportedCompressionType),
            77 => Some(Self::StaleBrokerEpoch),
            78 => Some(Self::OffsetNotAvailable),
            79 => Some(Self::MemberIdRequired),
            80 => Some(Self::PreferredLeaderNotAvailable),
            81 => Some(Self::GroupMaxSizeReached),
            82 => Some(Self::FencedInstanceId),
            83 => Some(Self::EligibleLeadersNotAvailable),
            84 => Some(Self::ElectionNotNeeded),
            85 => Some(Self::NoReassignmentInProgress),
            86 => Some(Self::GroupSubscribedToTopic),
            87 => Some(Self::InvalidRecord),
            88 => Some(Self::UnstableOffsetCommit),
            89 => Some(Self::ThrottlingQuotaExceeded),
            90 => Some(Self::ProducerFenced),
            91 => Some(Self::ResourceNotFound),
            92 => Some(Self::DuplicateResource),
            93 => Some(Self::UnacceptableCredential),
            94 => Some(Self::InconsistentVoterSet),
            95 => Some(Self::InvalidUpdateVersion),
            96 => Some(Self::FeatureUpdateFailed),
            97 => Some(Self::PrincipalDeserializationFailure),
            98 => Some(Self::SnapshotNotFound),
            99 => Some(Self::PositionOutOfRange),
            100 => Some(Self::UnknownTopicId),
            101 => Some(Self::DuplicateBrokerRegistration),
            102 => Some(Self::BrokerIdNotRegistered),
            103 => Some(Self::InconsistentTopicId),
            104 => Some(Self::InconsistentClusterId),
            105 => Some(Self::TransactionalIdNotFound),
            106 => Some(Self::FetchSessionTopicIdError),
            107 => Some(Self::IneligibleReplica),
            108 => Some(Self::NewLeaderElected),
            _ => None,
        }
    }

    /// The code for a wire number; unknown numbers read as `UnknownServerError`, as Kafka clients
    /// treat codes newer than themselves.
    pub fn from_wire(code: i16) -> Self {
        Self::from_i16(code).unwrap_or(Self::UnknownServerError)
    }

    /// The wire number.
    pub fn code(self) -> i16 {
        self as i16
    }

    pub fn is_ok(self) -> bool {
        self == Self::None
    }

    /// Kafka's name, e.g. `NOT_LEADER_OR_FOLLOWER`.
    pub fn name(self) -> &'static str {
        match self {
            Self::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            Self::None => "NONE",
            Self::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            Self::CorruptMessage => "CORRUPT_MESSAGE",
            Self::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            Self::InvalidFetchSize => "INVALID_FETCH_SIZE",
            Self::LeaderNotAvailable => "LEADER_NOT_AVAILABLE",
            Self::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            Self::RequestTimedOut => "REQUEST_TIMED_OUT",
            Self::BrokerNotAvailable => "BROKER_NOT_AVAILABLE",
            Self::ReplicaNotAvailable => "REPLICA_NOT_AVAILABLE",
            Self::MessageTooLarge => "MESSAGE_TOO_LARGE",
            Self::StaleControllerEpoch => "STALE_CONTROLLER_EPOCH",
            Self::OffsetMetadataTooLarge => "OFFSET_METADATA_TOO_LARGE",
            Self::NetworkException => "NETWORK_EXCEPTION",
            Self::CoordinatorLoadInProgress => "COORDINATOR_LOAD_IN_PROGRESS",
            Self::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
            Self::NotCoordinator => "NOT_COORDINATOR",
            Self::InvalidTopicException => "INVALID_TOPIC_EXCEPTION",
            Self::RecordListTooLarge => "RECORD_LIST_TOO_LARGE",
            Self::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            Self::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            Self::InvalidRequiredAcks => "INVALID_REQUIRED_ACKS",
            Self::IllegalGeneration => "ILLEGAL_GENERATION",
            Self::InconsistentGroupProtocol => "INCONSISTENT_GROUP_PROTOCOL",
            Self::InvalidGroupId => "INVALID_GROUP_ID",
            Self::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            Self::InvalidSessionTimeout => "INVALID_SESSION_TIMEOUT",
            Self::RebalanceInProgress => "REBALANCE_IN_PROGRESS",
            Self::InvalidCommitOffsetSize => "INVALID_COMMIT_OFFSET_SIZE",
            Self::TopicAuthorizationFailed => "TOPIC_AUTHORIZATION_FAILED",
            Self::GroupAuthorizationFailed => "GROUP_AUTHORIZATION_FAILED",
            Self::ClusterAuthorizationFailed => "CLUSTER_AUTHORIZATION_FAILED",
            Self::InvalidTimestamp => "INVALID_TIMESTAMP",
            Self::UnsupportedSaslMechanism => "UNSUPPORTED_SASL_MECHANISM",
            Self::IllegalSaslState => "ILLEGAL_SASL_STATE",
            Self::UnsupportedVersion => "UNSUPPORTED_VERSION",
            Self::TopicAlreadyExists => "TOPIC_ALREADY_EXISTS",
            Self::InvalidPartitions => "INVALID_PARTITIONS",
            Self::InvalidReplicationFactor => "INVALID_REPLICATION_FACTOR",
            Self::InvalidReplicaAssignment => "INVALID_REPLICA_ASSIGNMENT",
            Self::InvalidConfig => "INVALID_CONFIG",
            Self::NotController => "NOT_CONTROLLER",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::UnsupportedForMessageFormat => "UNSUPPORTED_FOR_MESSAGE_FORMAT",
            Self::PolicyViolation => "POLICY_VIOLATION",
            Self::OutOfOrderSequenceNumber => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            Self::DuplicateSequenceNumber => "DUPLICATE_SEQUENCE_NUMBER",
            Self::InvalidProducerEpoch => "INVALID_PRODUCER_EPOCH",
            Self::InvalidTxnState => "INVALID_TXN_STATE",
            Self::InvalidProducerIdMapping => "INVALID_PRODUCER_ID_MAPPING",
            Self::InvalidTransactionTimeout => "INVALID_TRANSACTION_TIMEOUT",
            Self::ConcurrentTransactions => "CONCURRENT_TRANSACTIONS",
            Self::TransactionCoordinatorFenced => "TRANSACTION_COORDINATOR_FENCED",
            Self::TransactionalIdAuthorizationFailed => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
            Self::SecurityDisabled => "SECURITY_DISABLED",
            Self::OperationNotAttempted => "OPERATION_NOT_ATTEMPTED",
            Self::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            Self::LogDirNotFound => "LOG_DIR_NOT_FOUND",
            Self::SaslAuthenticationFailed => "SASL_AUTHENTICATION_FAILED",
            Self::UnknownProducerId => "UNKNOWN_PRODUCER_ID",
            Self::ReassignmentInProgress => "REASSIGNMENT_IN_PROGRESS",
            Self::DelegationTokenAuthDisabled => "DELEGATION_TOKEN_AUTH_DISABLED",
            Self::DelegationTokenNotFound => "DELEGATION_TOKEN_NOT_FOUND",
            Self::DelegationTokenOwnerMismatch => "DELEGATION_TOKEN_OWNER_MISMATCH",
            Self::DelegationTokenRequestNotAllowed => "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
            Self::DelegationTokenAuthorizationFailed => "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
            Self::DelegationTokenExpired => "DELEGATION_TOKEN_EXPIRED",
            Self::InvalidPrincipalType => "INVALID_PRINCIPAL_TYPE",
            Self::NonEmptyGroup => "NON_EMPTY_GROUP",
            Self::GroupIdNotFound => "GROUP_ID_NOT_FOUND",
            Self::FetchSessionIdNotFound => "FETCH_SESSION_ID_NOT_FOUND",
            Self::InvalidFetchSessionEpoch => "INVALID_FETCH_SESSION_EPOCH",
            Self::ListenerNotFound => "LISTENER_NOT_FOUND",
            Self::TopicDeletionDisabled => "TOPIC_DELETION_DISABLED",
            Self::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            Self::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            Self::UnsupportedCompressionType => "UNSUPPORTED_COMPRESSION_TYPE",
            Self::StaleBrokerEpoch => "STALE_BROKER_EPOCH",
            Self::OffsetNotAvailable => "OFFSET_NOT_AVAILABLE",
            Self::MemberIdRequired => "MEMBER_ID_REQUIRED",
            Self::PreferredLeaderNotAvailable => "PREFERRED_LEADER_NOT_AVAILABLE",
            Self::GroupMaxSizeReached => "GROUP_MAX_SIZE_REACHED",
            Self::FencedInstanceId => "FENCED_INSTANCE_ID",
            Self::EligibleLeadersNotAvailable => "ELIGIBLE_LEADERS_NOT_AVAILABLE",
            Self::ElectionNotNeeded => "ELECTION_NOT_NEEDED",
            Self::NoReassignmentInProgress => "NO_REASSIGNMENT_IN_PROGRESS",
            Self::GroupSubscribedToTopic => "GROUP_SUBSCRIBED_TO_TOPIC",
            Self::InvalidRecord => "INVALID_RECORD",
            Self::UnstableOffsetCommit => "UNSTABLE_OFFSET_COMMIT",
            Self::ThrottlingQuotaExceeded => "THROTTLING_QUOTA_EXCEEDED",
            Self::ProducerFenced => "PRODUCER_FENCED",
            Self::ResourceNotFound => "RESOURCE_NOT_FOUND",
            Self::DuplicateResource => "DUPLICATE_RESOURCE",
            Self::UnacceptableCredential => "UNACCEPTABLE_CREDENTIAL",
            Self::InconsistentVoterSet => "INCONSISTENT_VOTER_SET",
            Self::InvalidUpdateVersion => "INVALID_UPDATE_VERSION",
            Self::FeatureUpdateFailed => "FEATURE_UPDATE_FAILED",
            Self::PrincipalDeserializationFailure => "PRINCIPAL_DESERIALIZATION_FAILURE",
            Self::SnapshotNotFound => "SNAPSHOT_NOT_FOUND",
            Self::PositionOutOfRange => "POSITION_OUT_OF_RANGE",
            Self::UnknownTopicId => "UNKNOWN_TOPIC_ID",
            Self::DuplicateBrokerRegistration => "DUPLICATE_BROKER_REGISTRATION",
            Self::BrokerIdNotRegistered => "BROKER_ID_NOT_REGISTERED",
            Self::InconsistentTopicId => "INCONSISTENT_TOPIC_ID",
            Self::InconsistentClusterId => "INCONSISTENT_CLUSTER_ID",
            Self::TransactionalIdNotFound => "TRANSACTIONAL_ID_NOT_FOUND",
            Self::FetchSessionTopicIdError => "FETCH_SESSION_TOPIC_ID_ERROR",
            Self::IneligibleReplica => "INELIGIBLE_REPLICA",
            Self::NewLeaderElected => "NEW_LEADER_ELECTED",
        }
    }

    /// Whether a client may retry the same request (after refreshing metadata where the error
    /// says the cluster moved): Kafka's `RetriableException` subclasses.
    pub fn is_retriable(self) -> bool {
        matches!(
            self,
            Self::CorruptMessage
                | Self::UnknownTopicOrPartition
                | Self::LeaderNotAvailable
                | Self::NotLeaderOrFollower
                | Self::RequestTimedOut
                | Self::ReplicaNotAvailable
                | Self::NetworkException
                | Self::CoordinatorLoadInProgress
                | Self::CoordinatorNotAvailable
                | Self::NotCoordinator
                | Self::NotController
                | Self::NotEnoughReplicas
                | Self::NotEnoughReplicasAfterAppend
                | Self::ConcurrentTransactions
                | Self::KafkaStorageError
                | Self::FetchSessionIdNotFound
                | Self::InvalidFetchSessionEpoch
                | Self::ListenerNotFound
                | Self::FencedLeaderEpoch
                | Self::UnknownLeaderEpoch
                | Self::OffsetNotAvailable
                | Self::PreferredLeaderNotAvailable
                | Self::EligibleLeadersNotAvailable
                | Self::ElectionNotNeeded
                | Self::UnstableOffsetCommit
                | Self::ThrottlingQuotaExceeded
                | Self::UnknownTopicId
                | Self::InconsistentTopicId
                | Self::FetchSessionTopicIdError
        )
    }

    /// Whether the error means the client's metadata is stale (leader moved, topic unknown), so
    /// it should refresh before retrying.
    pub fn invalidates_metadata(self) -> bool {
        matches!(
            self,
            Self::UnknownTopicOrPartition
                | Self::LeaderNotAvailable
                | Self::NotLeaderOrFollower
                | Self::ReplicaNotAvailable
                | Self::BrokerNotAvailable
                | Self::NetworkException
                | Self::FencedLeaderEpoch
                | Self::UnknownLeaderEpoch
                | Self::ListenerNotFound
                | Self::KafkaStorageError
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_numbers_named_in_the_issue() {
        assert_eq!(ErrorCode::None.code(), 0);
        assert_eq!(ErrorCode::OffsetOutOfRange.code(), 1);
        assert_eq!(ErrorCode::CorruptMessage.code(), 2);
        assert_eq!(ErrorCode::UnknownTopicOrPartition.code(), 3);
        assert_eq!(ErrorCode::NotLeaderOrFollower.code(), 6);
        assert_eq!(ErrorCode::RequestTimedOut.code(), 7);
        assert_eq!(ErrorCode::MessageTooLarge.code(), 10);
        assert_eq!(ErrorCode::NotEnoughReplicas.code(), 19);
        assert_eq!(ErrorCode::OutOfOrderSequenceNumber.code(), 45);
        assert_eq!(ErrorCode::ProducerFenced.code(), 90);
        assert_eq!(ErrorCode::UnknownServerError.code(), -1);
    }

    #[test]
    fn retriable_follows_kafka() {
        assert!(ErrorCode::NotLeaderOrFollower.is_retriable());
        assert!(ErrorCode::NotEnoughReplicas.is_retriable());
        assert!(ErrorCode::RequestTimedOut.is_retriable());
        assert!(ErrorCode::NotController.is_retriable());
        assert!(!ErrorCode::MessageTooLarge.is_retriable());
        assert!(!ErrorCode::OutOfOrderSequenceNumber.is_retriable());
        assert!(!ErrorCode::ProducerFenced.is_retriable());
        assert!(!ErrorCode::None.is_retriable());
    }

    #[test]
    fn unknown_numbers_are_unknown_server_error() {
        assert_eq!(ErrorCode::from_i16(109), None);
        assert_eq!(ErrorCode::from_wire(1234), ErrorCode::UnknownServerError);
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_i16(code.code()), Some(code));
        }
    }
}
