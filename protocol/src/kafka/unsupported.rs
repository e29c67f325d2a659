//! The response shape of every API the `kafka-protocol` crate knows, for answering a request spool
//! does not implement (or a version outside its range) with UNSUPPORTED_VERSION in a shape the
//! client can decode, instead of dropping the connection; and the top-level error code of those
//! shapes that have one ([`set_error_code`]). Echoing each item of the request is
//! `super::echo`'s.

use kafka_protocol::messages::*;

/// An empty response of `api_key`'s type, with its top-level error code (where the message has
/// one) set to `error_code`.
pub fn empty_response(api_key: ApiKey, error_code: i16) -> ResponseKind {
    let mut r = default_response(api_key);
    set_error_code(&mut r, error_code);
    r
}

/// Sets the top-level error code of `r`, where its message has one (at some version: the crate
/// refuses to encode it at a version that lacks it, so callers retry with 0 there).
pub fn set_error_code(r: &mut ResponseKind, error_code: i16) {
    match r {
        ResponseKind::Fetch(x) => x.error_code = error_code,
        ResponseKind::OffsetFetch(x) => x.error_code = error_code,
        ResponseKind::FindCoordinator(x) => x.error_code = error_code,
        ResponseKind::JoinGroup(x) => x.error_code = error_code,
        ResponseKind::Heartbeat(x) => x.error_code = error_code,
        ResponseKind::LeaveGroup(x) => x.error_code = error_code,
        ResponseKind::SyncGroup(x) => x.error_code = error_code,
        ResponseKind::ListGroups(x) => x.error_code = error_code,
        ResponseKind::ApiVersions(x) => x.error_code = error_code,
        ResponseKind::InitProducerId(x) => x.error_code = error_code,
        ResponseKind::SaslHandshake(x) => x.error_code = error_code,
        ResponseKind::SaslAuthenticate(x) => x.error_code = error_code,
        ResponseKind::AddOffsetsToTxn(x) => x.error_code = error_code,
        ResponseKind::EndTxn(x) => x.error_code = error_code,
        ResponseKind::DescribeAcls(x) => x.error_code = error_code,
        ResponseKind::DescribeCluster(x) => x.error_code = error_code,
        ResponseKind::ConsumerGroupHeartbeat(x) => x.error_code = error_code,
        ResponseKind::AddPartitionsToTxn(x) => x.error_code = error_code,
        ResponseKind::DescribeLogDirs(x) => x.error_code = error_code,
        ResponseKind::ElectLeaders(x) => x.error_code = error_code,
        ResponseKind::CreateDelegationToken(x) => x.error_code = error_code,
        ResponseKind::RenewDelegationToken(x) => x.error_code = error_code,
        ResponseKind::ExpireDelegationToken(x) => x.error_code = error_code,
        ResponseKind::DescribeDelegationToken(x) => x.error_code = error_code,
        ResponseKind::AlterPartitionReassignments(x) => x.error_code = error_code,
        ResponseKind::ListPartitionReassignments(x) => x.error_code = error_code,
        ResponseKind::OffsetDelete(x) => x.error_code = error_code,
        ResponseKind::DescribeClientQuotas(x) => x.error_code = error_code,
        ResponseKind::DescribeUserScramCredentials(x) => x.error_code = error_code,
        ResponseKind::UpdateFeatures(x) => x.error_code = error_code,
        ResponseKind::ListTransactions(x) => x.error_code = error_code,
        ResponseKind::GetTelemetrySubscriptions(x) => x.error_code = error_code,
        ResponseKind::PushTelemetry(x) => x.error_code = error_code,
        ResponseKind::ShareGroupHeartbeat(x) => x.error_code = error_code,
        ResponseKind::ShareFetch(x) => x.error_code = error_code,
        ResponseKind::ShareAcknowledge(x) => x.error_code = error_code,
        _ => {}
    }
}

fn default_response(api_key: ApiKey) -> ResponseKind {
    match api_key {
        ApiKey::Produce => ResponseKind::Produce(ProduceResponse::default()),
        ApiKey::Fetch => ResponseKind::Fetch(FetchResponse::default()),
        ApiKey::ListOffsets => ResponseKind::ListOffsets(ListOffsetsResponse::default()),
        ApiKey::Metadata => ResponseKind::Metadata(MetadataResponse::default()),
        ApiKey::OffsetCommit => ResponseKind::OffsetCommit(OffsetCommitResponse::default()),
        ApiKey::OffsetFetch => ResponseKind::OffsetFetch(OffsetFetchResponse::default()),
        ApiKey::FindCoordinator => {
            ResponseKind::FindCoordinator(FindCoordinatorResponse::default())
        }
        ApiKey::JoinGroup => ResponseKind::JoinGroup(JoinGroupResponse::default()),
        ApiKey::Heartbeat => ResponseKind::Heartbeat(HeartbeatResponse::default()),
        ApiKey::LeaveGroup => ResponseKind::LeaveGroup(LeaveGroupResponse::default()),
        ApiKey::SyncGroup => ResponseKind::SyncGroup(SyncGroupResponse::default()),
        ApiKey::DescribeGroups => ResponseKind::DescribeGroups(DescribeGroupsResponse::default()),
        ApiKey::ListGroups => ResponseKind::ListGroups(ListGroupsResponse::default()),
        ApiKey::SaslHandshake => ResponseKind::SaslHandshake(SaslHandshakeResponse::default()),
        ApiKey::ApiVersions => ResponseKind::ApiVersions(ApiVersionsResponse::default()),
        ApiKey::CreateTopics => ResponseKind::CreateTopics(CreateTopicsResponse::default()),
        ApiKey::DeleteTopics => ResponseKind::DeleteTopics(DeleteTopicsResponse::default()),
        ApiKey::DeleteRecords => ResponseKind::DeleteRecords(DeleteRecordsResponse::default()),
        ApiKey::InitProducerId => ResponseKind::InitProducerId(InitProducerIdResponse::default()),
        ApiKey::OffsetForLeaderEpoch => {
            ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default())
        }
        ApiKey::AddPartitionsToTxn => {
            ResponseKind::AddPartitionsToTxn(AddPartitionsToTxnResponse::default())
        }
        ApiKey::AddOffsetsToTxn => {
            ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default())
        }
        ApiKey::EndTxn => ResponseKind::EndTxn(EndTxnResponse::default()),
        ApiKey::WriteTxnMarkers => {
            ResponseKind::WriteTxnMarkers(WriteTxnMarkersResponse::default())
        }
        ApiKey::TxnOffsetCommit => {
            ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default())
        }
        ApiKey::DescribeAcls => ResponseKind::DescribeAcls(DescribeAclsResponse::default()),
        ApiKey::CreateAcls => ResponseKind::CreateAcls(CreateAclsResponse::default()),
        ApiKey::DeleteAcls => ResponseKind::DeleteAcls(DeleteAclsResponse::default()),
        ApiKey::DescribeConfigs => {
            ResponseKind::DescribeConfigs(DescribeConfigsResponse::default())
        }
        ApiKey::AlterConfigs => ResponseKind::AlterConfigs(AlterConfigsResponse::default()),
        ApiKey::AlterReplicaLogDirs => {
            ResponseKind::AlterReplicaLogDirs(AlterReplicaLogDirsResponse::default())
        }
        ApiKey::DescribeLogDirs => {
            ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default())
        }
        ApiKey::SaslAuthenticate => {
            ResponseKind::SaslAuthenticate(SaslAuthenticateResponse::default())
        }
        ApiKey::CreatePartitions => {
            ResponseKind::CreatePartitions(CreatePartitionsResponse::default())
        }
        ApiKey::CreateDelegationToken => {
            ResponseKind::CreateDelegationToken(CreateDelegationTokenResponse::default())
        }
        ApiKey::RenewDelegationToken => {
            ResponseKind::RenewDelegationToken(RenewDelegationTokenResponse::default())
        }
        ApiKey::ExpireDelegationToken => {
            ResponseKind::ExpireDelegationToken(ExpireDelegationTokenResponse::default())
        }
        ApiKey::DescribeDelegationToken => {
            ResponseKind::DescribeDelegationToken(DescribeDelegationTokenResponse::default())
        }
        ApiKey::DeleteGroups => ResponseKind::DeleteGroups(DeleteGroupsResponse::default()),
        ApiKey::ElectLeaders => ResponseKind::ElectLeaders(ElectLeadersResponse::default()),
        ApiKey::IncrementalAlterConfigs => {
            ResponseKind::IncrementalAlterConfigs(IncrementalAlterConfigsResponse::default())
        }
        ApiKey::AlterPartitionReassignments => {
            ResponseKind::AlterPartitionReassignments(AlterPartitionReassignmentsResponse::default())
        }
        ApiKey::ListPartitionReassignments => {
            ResponseKind::ListPartitionReassignments(ListPartitionReassignmentsResponse::default())
        }
        ApiKey::OffsetDelete => ResponseKind::OffsetDelete(OffsetDeleteResponse::default()),
        ApiKey::DescribeClientQuotas => {
            ResponseKind::DescribeClientQuotas(DescribeClientQuotasResponse::default())
        }
        ApiKey::AlterClientQuotas => {
            ResponseKind::AlterClientQuotas(AlterClientQuotasResponse::default())
        }
        ApiKey::DescribeUserScramCredentials => ResponseKind::DescribeUserScramCredentials(
            DescribeUserScramCredentialsResponse::default(),
        ),
        ApiKey::AlterUserScramCredentials => {
            ResponseKind::AlterUserScramCredentials(AlterUserScramCredentialsResponse::default())
        }
        ApiKey::Vote => ResponseKind::Vote(VoteResponse::default()),
        ApiKey::BeginQuorumEpoch => {
            ResponseKind::BeginQuorumEpoch(BeginQuorumEpochResponse::default())
        }
        ApiKey::EndQuorumEpoch => ResponseKind::EndQuorumEpoch(EndQuorumEpochResponse::default()),
        ApiKey::DescribeQuorum => ResponseKind::DescribeQuorum(DescribeQuorumResponse::default()),
        ApiKey::AlterPartition => ResponseKind::AlterPartition(AlterPartitionResponse::default()),
        ApiKey::UpdateFeatures => ResponseKind::UpdateFeatures(UpdateFeaturesResponse::default()),
        ApiKey::Envelope => ResponseKind::Envelope(EnvelopeResponse::default()),
        ApiKey::FetchSnapshot => ResponseKind::FetchSnapshot(FetchSnapshotResponse::default()),
        ApiKey::DescribeCluster => {
            ResponseKind::DescribeCluster(DescribeClusterResponse::default())
        }
        ApiKey::DescribeProducers => {
            ResponseKind::DescribeProducers(DescribeProducersResponse::default())
        }
        ApiKey::BrokerRegistration => {
            ResponseKind::BrokerRegistration(BrokerRegistrationResponse::default())
        }
        ApiKey::BrokerHeartbeat => {
            ResponseKind::BrokerHeartbeat(BrokerHeartbeatResponse::default())
        }
        ApiKey::UnregisterBroker => {
            ResponseKind::UnregisterBroker(UnregisterBrokerResponse::default())
        }
        ApiKey::DescribeTransactions => {
            ResponseKind::DescribeTransactions(DescribeTransactionsResponse::default())
        }
        ApiKey::ListTransactions => {
            ResponseKind::ListTransactions(ListTransactionsResponse::default())
        }
        ApiKey::AllocateProducerIds => {
            ResponseKind::AllocateProducerIds(AllocateProducerIdsResponse::default())
        }
        ApiKey::ConsumerGroupHeartbeat => {
            ResponseKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatResponse::default())
        }
        ApiKey::ConsumerGroupDescribe => {
            ResponseKind::ConsumerGroupDescribe(ConsumerGroupDescribeResponse::default())
        }
        ApiKey::ControllerRegistration => {
            ResponseKind::ControllerRegistration(ControllerRegistrationResponse::default())
        }
        ApiKey::GetTelemetrySubscriptions => {
            ResponseKind::GetTelemetrySubscriptions(GetTelemetrySubscriptionsResponse::default())
        }
        ApiKey::PushTelemetry => ResponseKind::PushTelemetry(PushTelemetryResponse::default()),
        ApiKey::AssignReplicasToDirs => {
            ResponseKind::AssignReplicasToDirs(AssignReplicasToDirsResponse::default())
        }
        ApiKey::ListConfigResources => {
            ResponseKind::ListConfigResources(ListConfigResourcesResponse::default())
        }
        ApiKey::DescribeTopicPartitions => {
            ResponseKind::DescribeTopicPartitions(DescribeTopicPartitionsResponse::default())
        }
        ApiKey::ShareGroupHeartbeat => {
            ResponseKind::ShareGroupHeartbeat(ShareGroupHeartbeatResponse::default())
        }
        ApiKey::ShareGroupDescribe => {
            ResponseKind::ShareGroupDescribe(ShareGroupDescribeResponse::default())
        }
        ApiKey::ShareFetch => ResponseKind::ShareFetch(ShareFetchResponse::default()),
        ApiKey::ShareAcknowledge => {
            ResponseKind::ShareAcknowledge(ShareAcknowledgeResponse::default())
        }
        ApiKey::AddRaftVoter => ResponseKind::AddRaftVoter(AddRaftVoterResponse::default()),
        ApiKey::RemoveRaftVoter => {
            ResponseKind::RemoveRaftVoter(RemoveRaftVoterResponse::default())
        }
        ApiKey::UpdateRaftVoter => {
            ResponseKind::UpdateRaftVoter(UpdateRaftVoterResponse::default())
        }
        ApiKey::InitializeShareGroupState => {
            ResponseKind::InitializeShareGroupState(InitializeShareGroupStateResponse::default())
        }
        ApiKey::ReadShareGroupState => {
            ResponseKind::ReadShareGroupState(ReadShareGroupStateResponse::default())
        }
        ApiKey::WriteShareGroupState => {
            ResponseKind::WriteShareGroupState(WriteShareGroupStateResponse::default())
        }
        ApiKey::DeleteShareGroupState => {
            ResponseKind::DeleteShareGroupState(DeleteShareGroupStateResponse::default())
        }
        ApiKey::ReadShareGroupStateSummary => {
            ResponseKind::ReadShareGroupStateSummary(ReadShareGroupStateSummaryResponse::default())
        }
        ApiKey::DescribeShareGroupOffsets => {
            ResponseKind::DescribeShareGroupOffsets(DescribeShareGroupOffsetsResponse::default())
        }
        ApiKey::AlterShareGroupOffsets => {
            ResponseKind::AlterShareGroupOffsets(AlterShareGroupOffsetsResponse::default())
        }
        ApiKey::DeleteShareGroupOffsets => {
            ResponseKind::DeleteShareGroupOffsets(DeleteShareGroupOffsetsResponse::default())
        }
    }
}
