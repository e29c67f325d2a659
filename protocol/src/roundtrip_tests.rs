//! Property tests: every request, response and metadata record survives encode → frame → decode
//! unchanged. Lives inside the crate because the generated object-API types are `#[non_exhaustive]`
//! (struct literals only compile here).

use bytes::Bytes;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

use crate::codec::{decode_request, decode_response, encode_request, encode_response};
use crate::frame::{split_frame, FrameLimits};
use crate::metadata_log;
use crate::metadata_records::*;
use crate::wire::*;

/// Builds a strategy for a struct from one strategy per field.
macro_rules! st {
    ($ty:ident { $($f:ident : $s:expr),* $(,)? }) => {
        ($($s,)*).prop_map(|($($f,)*)| $ty { $($f,)* }).boxed()
    };
}

fn s() -> BoxedStrategy<String> {
    "[a-z0-9._-]{0,12}|\\PC{0,6}".boxed()
}
fn os() -> BoxedStrategy<Option<String>> {
    option::of(s()).boxed()
}
fn ob() -> BoxedStrategy<Option<Vec<u8>>> {
    option::of(vec(any::<u8>(), 0..16)).boxed()
}
fn oints() -> BoxedStrategy<Option<Vec<i32>>> {
    option::of(vec(any::<i32>(), 0..6)).boxed()
}
fn ov<T: std::fmt::Debug + Clone + 'static>(t: BoxedStrategy<T>) -> BoxedStrategy<Option<Vec<T>>> {
    option::of(vec(t, 0..4)).boxed()
}
fn ec() -> BoxedStrategy<ErrorCode> {
    any::<i16>().prop_map(ErrorCode).boxed()
}
fn iso() -> BoxedStrategy<IsolationLevel> {
    (0i8..=1).prop_map(IsolationLevel).boxed()
}
fn slice() -> BoxedStrategy<PayloadSliceT> {
    (any::<u32>(), any::<u32>())
        .prop_map(|(offset, length)| PayloadSliceT { offset, length })
        .boxed()
}
fn config() -> BoxedStrategy<ConfigEntryT> {
    st!(ConfigEntryT {
        name: s(),
        value: os()
    })
}

fn part_ref() -> BoxedStrategy<PartitionRefT> {
    st!(PartitionRefT {
        topic: s(),
        partition: any::<i32>()
    })
}
fn topic_error() -> BoxedStrategy<TopicErrorT> {
    st!(TopicErrorT {
        name: s(),
        error_code: ec(),
        error_message: os()
    })
}
fn partition_error() -> BoxedStrategy<PartitionErrorT> {
    st!(PartitionErrorT {
        topic: s(),
        partition: any::<i32>(),
        error_code: ec(),
        error_message: os()
    })
}

fn request_body() -> BoxedStrategy<RequestBodyT> {
    let api_versions = st!(ApiVersionsRequestT {
        client_software_name: os(),
        client_software_version: os()
    });
    let metadata = st!(MetadataRequestT {
        topics: ov(s()),
        allow_auto_topic_creation: any::<bool>()
    });
    let create_topics = st!(CreateTopicsRequestT {
        topics: ov(st!(CreatableTopicT {
            name: s(),
            num_partitions: any::<i32>(),
            replication_factor: any::<i16>(),
            assignments: ov(st!(CreatableReplicaAssignmentT {
                partition_index: any::<i32>(),
                broker_ids: oints()
            })),
            configs: ov(config()),
        })),
        timeout_ms: any::<i32>(),
        validate_only: any::<bool>(),
    });
    let delete_topics = st!(DeleteTopicsRequestT {
        topic_names: ov(s()),
        timeout_ms: any::<i32>()
    });
    let produce = st!(ProduceRequestT {
        transactional_id: os(),
        acks: any::<i16>(),
        timeout_ms: any::<i32>(),
        topics: ov(st!(TopicProduceDataT {
            name: s(),
            partitions: ov(st!(PartitionProduceDataT {
                index: any::<i32>(),
                records: slice()
            })),
        })),
    });
    let fetch = st!(FetchRequestT {
        replica_id: any::<i32>(),
        max_wait_ms: any::<i32>(),
        min_bytes: any::<i32>(),
        max_bytes: any::<i32>(),
        isolation_level: iso(),
        topics: ov(st!(FetchTopicT {
            topic: s(),
            partitions: ov(st!(FetchPartitionT {
                partition: any::<i32>(),
                current_leader_epoch: any::<i32>(),
                fetch_offset: any::<i64>(),
                log_start_offset: any::<i64>(),
                partition_max_bytes: any::<i32>(),
            })),
        })),
    });
    let list_offsets = st!(ListOffsetsRequestT {
        replica_id: any::<i32>(),
        isolation_level: iso(),
        topics: ov(st!(ListOffsetsTopicT {
            name: s(),
            partitions: ov(st!(ListOffsetsPartitionT {
                partition_index: any::<i32>(),
                current_leader_epoch: any::<i32>(),
                timestamp: any::<i64>(),
            })),
        })),
    });
    let find_coordinator = st!(FindCoordinatorRequestT {
        key: s(),
        key_type: (0i8..=1).prop_map(CoordinatorType)
    });
    let join_group = st!(JoinGroupRequestT {
        group_id: s(),
        session_timeout_ms: any::<i32>(),
        rebalance_timeout_ms: any::<i32>(),
        member_id: os(),
        group_instance_id: os(),
        protocol_type: os(),
        protocols: ov(st!(JoinGroupRequestProtocolT {
            name: s(),
            metadata: ob()
        })),
        reason: os(),
    });
    let sync_group = st!(SyncGroupRequestT {
        group_id: s(),
        generation_id: any::<i32>(),
        member_id: os(),
        group_instance_id: os(),
        protocol_type: os(),
        protocol_name: os(),
        assignments: ov(st!(SyncGroupRequestAssignmentT {
            member_id: s(),
            assignment: ob()
        })),
    });
    let heartbeat = st!(HeartbeatRequestT {
        group_id: s(),
        generation_id: any::<i32>(),
        member_id: os(),
        group_instance_id: os(),
    });
    let leave_group = st!(LeaveGroupRequestT {
        group_id: s(),
        members: ov(st!(MemberIdentityT {
            member_id: os(),
            group_instance_id: os(),
            reason: os()
        })),
    });
    let offset_commit = st!(OffsetCommitRequestT {
        group_id: s(),
        generation_id: any::<i32>(),
        member_id: os(),
        group_instance_id: os(),
        retention_time_ms: any::<i64>(),
        topics: ov(st!(OffsetCommitRequestTopicT {
            name: s(),
            partitions: ov(st!(OffsetCommitRequestPartitionT {
                partition_index: any::<i32>(),
                committed_offset: any::<i64>(),
                committed_leader_epoch: any::<i32>(),
                committed_metadata: os(),
            })),
        })),
    });
    let offset_fetch = st!(OffsetFetchRequestT {
        group_id: s(),
        topics: ov(st!(OffsetFetchRequestTopicT {
            name: s(),
            partition_indexes: oints()
        })),
        require_stable: any::<bool>(),
    });
    let describe_groups = st!(DescribeGroupsRequestT {
        groups: ov(s()),
        include_authorized_operations: any::<bool>()
    });
    let list_groups = st!(ListGroupsRequestT {
        states_filter: ov(s())
    });
    let init_pid = st!(InitProducerIdRequestT {
        transactional_id: os(),
        transaction_timeout_ms: any::<i32>(),
        producer_id: any::<i64>(),
        producer_epoch: any::<i16>(),
    });
    let delete_records = st!(DeleteRecordsRequestT {
        partitions: ov(st!(DeleteRecordsPartitionT {
            topic: s(),
            partition: any::<i32>(),
            offset: any::<i64>()
        })),
        timeout_ms: any::<i32>(),
    });
    let create_partitions = st!(CreatePartitionsRequestT {
        topics: ov(st!(CreatePartitionsTopicT {
            name: s(),
            count: any::<i32>(),
            assignments: ov(st!(NewPartitionReplicasT {
                broker_ids: oints()
            })),
        })),
        timeout_ms: any::<i32>(),
        validate_only: any::<bool>(),
    });
    let delete_groups = st!(DeleteGroupsRequestT { group_ids: ov(s()) });
    let elect_leaders = st!(ElectLeadersRequestT {
        election_type: (0i8..=1).prop_map(ElectionType).boxed(),
        partitions: ov(part_ref()),
        timeout_ms: any::<i32>(),
    });
    let alter_configs = st!(IncrementalAlterConfigsRequestT {
        topics: ov(st!(AlterTopicConfigsT {
            topic: s(),
            configs: ov(st!(AlterableConfigT {
                name: s(),
                operation: (0i8..=3).prop_map(ConfigOperation).boxed(),
                value: os(),
            })),
        })),
        validate_only: any::<bool>(),
    });
    let offset_delete = st!(OffsetDeleteRequestT {
        group_id: s(),
        partitions: ov(part_ref()),
    });
    prop_oneof![
        api_versions.prop_map(|b| RequestBodyT::ApiVersionsRequest(Box::new(b))),
        metadata.prop_map(|b| RequestBodyT::MetadataRequest(Box::new(b))),
        create_topics.prop_map(|b| RequestBodyT::CreateTopicsRequest(Box::new(b))),
        delete_topics.prop_map(|b| RequestBodyT::DeleteTopicsRequest(Box::new(b))),
        produce.prop_map(|b| RequestBodyT::ProduceRequest(Box::new(b))),
        fetch.prop_map(|b| RequestBodyT::FetchRequest(Box::new(b))),
        list_offsets.prop_map(|b| RequestBodyT::ListOffsetsRequest(Box::new(b))),
        find_coordinator.prop_map(|b| RequestBodyT::FindCoordinatorRequest(Box::new(b))),
        join_group.prop_map(|b| RequestBodyT::JoinGroupRequest(Box::new(b))),
        sync_group.prop_map(|b| RequestBodyT::SyncGroupRequest(Box::new(b))),
        heartbeat.prop_map(|b| RequestBodyT::HeartbeatRequest(Box::new(b))),
        leave_group.prop_map(|b| RequestBodyT::LeaveGroupRequest(Box::new(b))),
        offset_commit.prop_map(|b| RequestBodyT::OffsetCommitRequest(Box::new(b))),
        offset_fetch.prop_map(|b| RequestBodyT::OffsetFetchRequest(Box::new(b))),
        describe_groups.prop_map(|b| RequestBodyT::DescribeGroupsRequest(Box::new(b))),
        list_groups.prop_map(|b| RequestBodyT::ListGroupsRequest(Box::new(b))),
        init_pid.prop_map(|b| RequestBodyT::InitProducerIdRequest(Box::new(b))),
        delete_records.prop_map(|b| RequestBodyT::DeleteRecordsRequest(Box::new(b))),
        create_partitions.prop_map(|b| RequestBodyT::CreatePartitionsRequest(Box::new(b))),
        delete_groups.prop_map(|b| RequestBodyT::DeleteGroupsRequest(Box::new(b))),
        elect_leaders.prop_map(|b| RequestBodyT::ElectLeadersRequest(Box::new(b))),
        alter_configs.prop_map(|b| RequestBodyT::IncrementalAlterConfigsRequest(Box::new(b))),
        offset_delete.prop_map(|b| RequestBodyT::OffsetDeleteRequest(Box::new(b))),
        txn_request_body(),
    ]
    .boxed()
}

fn response_body() -> BoxedStrategy<ResponseBodyT> {
    let api_versions = st!(ApiVersionsResponseT {
        error_code: ec(),
        api_keys: ov(st!(ApiVersionRangeT {
            api_key: any::<i16>().prop_map(ApiKey),
            min_version: any::<i16>(),
            max_version: any::<i16>(),
        })),
    });
    let metadata = st!(MetadataResponseT {
        brokers: ov(st!(MetadataBrokerT {
            node_id: any::<i32>(),
            host: s(),
            port: any::<i32>(),
            rack: os(),
            broker_epoch: any::<i64>(),
            fenced: any::<bool>(),
        })),
        cluster_id: os(),
        controller_id: any::<i32>(),
        quorum: option::of(
            st!(MetadataQuorumT {
                node_id: any::<i32>(),
                voters: oints(),
                learners: oints(),
                leader_id: any::<i32>(),
                term: any::<u64>(),
                commit_index: any::<u64>(),
                applied_offset: any::<u64>(),
            })
            .prop_map(Box::new)
        )
        .boxed(),
        topics: ov(st!(MetadataTopicT {
            error_code: ec(),
            name: s(),
            is_internal: any::<bool>(),
            partitions: ov(st!(MetadataPartitionT {
                error_code: ec(),
                partition_index: any::<i32>(),
                leader_id: any::<i32>(),
                leader_epoch: any::<i32>(),
                replica_nodes: oints(),
                isr_nodes: oints(),
                offline_replicas: oints(),
                eligible_leaders: oints(),
            })),
        })),
    });
    let create_topics = st!(CreateTopicsResponseT {
        topics: ov(st!(CreatableTopicResultT {
            name: s(),
            error_code: ec(),
            error_message: os(),
            num_partitions: any::<i32>(),
            replication_factor: any::<i16>(),
        })),
    });
    let delete_topics = st!(DeleteTopicsResponseT {
        responses: ov(st!(DeletableTopicResultT {
            name: s(),
            error_code: ec(),
            error_message: os()
        })),
    });
    let produce = st!(ProduceResponseT {
        responses: ov(st!(TopicProduceResponseT {
            name: s(),
            partitions: ov(st!(PartitionProduceResponseT {
                index: any::<i32>(),
                error_code: ec(),
                base_offset: any::<i64>(),
                log_append_time_ms: any::<i64>(),
                log_start_offset: any::<i64>(),
                record_errors: ov(st!(BatchIndexAndErrorMessageT {
                    batch_index: any::<i32>(),
                    batch_index_error_message: os(),
                })),
                error_message: os(),
            })),
        })),
    });
    let fetch = st!(FetchResponseT {
        error_code: ec(),
        responses: ov(st!(FetchableTopicResponseT {
            topic: s(),
            partitions: ov(st!(FetchPartitionDataT {
                partition_index: any::<i32>(),
                error_code: ec(),
                high_watermark: any::<i64>(),
                last_stable_offset: any::<i64>(),
                log_start_offset: any::<i64>(),
                aborted_transactions: ov(st!(AbortedTransactionT {
                    producer_id: any::<i64>(),
                    first_offset: any::<i64>(),
                })),
                preferred_read_replica: any::<i32>(),
                records: option::of(slice()),
            })),
        })),
    });
    let list_offsets = st!(ListOffsetsResponseT {
        topics: ov(st!(ListOffsetsTopicResponseT {
            name: s(),
            partitions: ov(st!(ListOffsetsPartitionResponseT {
                partition_index: any::<i32>(),
                error_code: ec(),
                timestamp: any::<i64>(),
                offset: any::<i64>(),
                leader_epoch: any::<i32>(),
            })),
        })),
    });
    let find_coordinator = st!(FindCoordinatorResponseT {
        error_code: ec(),
        error_message: os(),
        node_id: any::<i32>(),
        host: os(),
        port: any::<i32>(),
    });
    let join_group = st!(JoinGroupResponseT {
        error_code: ec(),
        generation_id: any::<i32>(),
        protocol_type: os(),
        protocol_name: os(),
        leader: os(),
        skip_assignment: any::<bool>(),
        member_id: os(),
        members: ov(st!(JoinGroupResponseMemberT {
            member_id: s(),
            group_instance_id: os(),
            metadata: ob()
        })),
    });
    let sync_group = st!(SyncGroupResponseT {
        error_code: ec(),
        protocol_type: os(),
        protocol_name: os(),
        assignment: ob(),
    });
    let heartbeat = st!(HeartbeatResponseT { error_code: ec() });
    let leave_group = st!(LeaveGroupResponseT {
        error_code: ec(),
        members: ov(st!(LeaveGroupMemberResponseT {
            member_id: os(),
            group_instance_id: os(),
            error_code: ec()
        })),
    });
    let offset_commit = st!(OffsetCommitResponseT {
        topics: ov(st!(OffsetCommitResponseTopicT {
            name: s(),
            partitions: ov(st!(OffsetCommitResponsePartitionT {
                partition_index: any::<i32>(),
                error_code: ec()
            })),
        })),
    });
    let offset_fetch = st!(OffsetFetchResponseT {
        error_code: ec(),
        topics: ov(st!(OffsetFetchResponseTopicT {
            name: s(),
            partitions: ov(st!(OffsetFetchResponsePartitionT {
                partition_index: any::<i32>(),
                committed_offset: any::<i64>(),
                committed_leader_epoch: any::<i32>(),
                metadata: os(),
                error_code: ec(),
            })),
        })),
    });
    let describe_groups = st!(DescribeGroupsResponseT {
        groups: ov(st!(DescribedGroupT {
            error_code: ec(),
            group_id: s(),
            group_state: os(),
            protocol_type: os(),
            protocol_data: os(),
            members: ov(st!(DescribedGroupMemberT {
                member_id: s(),
                group_instance_id: os(),
                client_id: os(),
                client_host: os(),
                member_metadata: ob(),
                member_assignment: ob(),
            })),
            authorized_operations: any::<i32>(),
            generation_id: any::<i32>(),
        })),
    });
    let list_groups = st!(ListGroupsResponseT {
        error_code: ec(),
        groups: ov(st!(ListedGroupT {
            group_id: s(),
            protocol_type: os(),
            group_state: os()
        })),
    });
    let init_pid = st!(InitProducerIdResponseT {
        error_code: ec(),
        producer_id: any::<i64>(),
        producer_epoch: any::<i16>(),
    });
    let delete_records = st!(DeleteRecordsResponseT {
        partitions: ov(st!(DeleteRecordsPartitionResultT {
            topic: s(),
            partition: any::<i32>(),
            low_watermark: any::<i64>(),
            error_code: ec(),
        })),
    });
    let create_partitions = st!(CreatePartitionsResponseT {
        topics: ov(topic_error())
    });
    let delete_groups = st!(DeleteGroupsResponseT {
        results: ov(st!(DeletableGroupResultT {
            group_id: s(),
            error_code: ec()
        })),
    });
    let elect_leaders = st!(ElectLeadersResponseT {
        partitions: ov(partition_error())
    });
    let alter_configs = st!(IncrementalAlterConfigsResponseT {
        topics: ov(topic_error())
    });
    let offset_delete = st!(OffsetDeleteResponseT {
        error_code: ec(),
        partitions: ov(partition_error()),
    });
    prop_oneof![
        api_versions.prop_map(|b| ResponseBodyT::ApiVersionsResponse(Box::new(b))),
        metadata.prop_map(|b| ResponseBodyT::MetadataResponse(Box::new(b))),
        create_topics.prop_map(|b| ResponseBodyT::CreateTopicsResponse(Box::new(b))),
        delete_topics.prop_map(|b| ResponseBodyT::DeleteTopicsResponse(Box::new(b))),
        produce.prop_map(|b| ResponseBodyT::ProduceResponse(Box::new(b))),
        fetch.prop_map(|b| ResponseBodyT::FetchResponse(Box::new(b))),
        list_offsets.prop_map(|b| ResponseBodyT::ListOffsetsResponse(Box::new(b))),
        find_coordinator.prop_map(|b| ResponseBodyT::FindCoordinatorResponse(Box::new(b))),
        join_group.prop_map(|b| ResponseBodyT::JoinGroupResponse(Box::new(b))),
        sync_group.prop_map(|b| ResponseBodyT::SyncGroupResponse(Box::new(b))),
        heartbeat.prop_map(|b| ResponseBodyT::HeartbeatResponse(Box::new(b))),
        leave_group.prop_map(|b| ResponseBodyT::LeaveGroupResponse(Box::new(b))),
        offset_commit.prop_map(|b| ResponseBodyT::OffsetCommitResponse(Box::new(b))),
        offset_fetch.prop_map(|b| ResponseBodyT::OffsetFetchResponse(Box::new(b))),
        describe_groups.prop_map(|b| ResponseBodyT::DescribeGroupsResponse(Box::new(b))),
        list_groups.prop_map(|b| ResponseBodyT::ListGroupsResponse(Box::new(b))),
        init_pid.prop_map(|b| ResponseBodyT::InitProducerIdResponse(Box::new(b))),
        delete_records.prop_map(|b| ResponseBodyT::DeleteRecordsResponse(Box::new(b))),
        create_partitions.prop_map(|b| ResponseBodyT::CreatePartitionsResponse(Box::new(b))),
        delete_groups.prop_map(|b| ResponseBodyT::DeleteGroupsResponse(Box::new(b))),
        elect_leaders.prop_map(|b| ResponseBodyT::ElectLeadersResponse(Box::new(b))),
        alter_configs.prop_map(|b| ResponseBodyT::IncrementalAlterConfigsResponse(Box::new(b))),
        offset_delete.prop_map(|b| ResponseBodyT::OffsetDeleteResponse(Box::new(b))),
        txn_response_body(),
        Just(ResponseBodyT::NONE),
    ]
    .boxed()
}

fn commit_topic() -> BoxedStrategy<OffsetCommitRequestTopicT> {
    st!(OffsetCommitRequestTopicT {
        name: s(),
        partitions: ov(st!(OffsetCommitRequestPartitionT {
            partition_index: any::<i32>(),
            committed_offset: any::<i64>(),
            committed_leader_epoch: any::<i32>(),
            committed_metadata: os(),
        })),
    })
}
fn commit_result_topic() -> BoxedStrategy<OffsetCommitResponseTopicT> {
    st!(OffsetCommitResponseTopicT {
        name: s(),
        partitions: ov(st!(OffsetCommitResponsePartitionT {
            partition_index: any::<i32>(),
            error_code: ec()
        })),
    })
}

/// The transaction APIs' requests (txn.fbs).
fn txn_request_body() -> BoxedStrategy<RequestBodyT> {
    let add_partitions = st!(AddPartitionsToTxnRequestT {
        transactional_id: s(),
        producer_id: any::<i64>(),
        producer_epoch: any::<i16>(),
        topics: ov(st!(AddPartitionsToTxnTopicT {
            name: s(),
            partitions: oints()
        })),
    });
    let add_offsets = st!(AddOffsetsToTxnRequestT {
        transactional_id: s(),
        producer_id: any::<i64>(),
        producer_epoch: any::<i16>(),
        group_id: s(),
    });
    let end_txn = st!(EndTxnRequestT {
        transactional_id: s(),
        producer_id: any::<i64>(),
        producer_epoch: any::<i16>(),
        committed: any::<bool>(),
    });
    let txn_offset_commit = st!(TxnOffsetCommitRequestT {
        transactional_id: s(),
        group_id: s(),
        producer_id: any::<i64>(),
        producer_epoch: any::<i16>(),
        generation_id: any::<i32>(),
        member_id: os(),
        group_instance_id: os(),
        topics: ov(commit_topic()),
    });
    let describe = st!(DescribeTransactionsRequestT {
        transactional_ids: ov(s())
    });
    let list = st!(ListTransactionsRequestT {
        state_filters: ov(s()),
        producer_id_filters: option::of(vec(any::<i64>(), 0..4)).boxed(),
        duration_filter: any::<i64>(),
    });
    prop_oneof![
        add_partitions.prop_map(|b| RequestBodyT::AddPartitionsToTxnRequest(Box::new(b))),
        add_offsets.prop_map(|b| RequestBodyT::AddOffsetsToTxnRequest(Box::new(b))),
        end_txn.prop_map(|b| RequestBodyT::EndTxnRequest(Box::new(b))),
        txn_offset_commit.prop_map(|b| RequestBodyT::TxnOffsetCommitRequest(Box::new(b))),
        describe.prop_map(|b| RequestBodyT::DescribeTransactionsRequest(Box::new(b))),
        list.prop_map(|b| RequestBodyT::ListTransactionsRequest(Box::new(b))),
    ]
    .boxed()
}

/// The transaction APIs' responses (txn.fbs).
fn txn_response_body() -> BoxedStrategy<ResponseBodyT> {
    let add_partitions = st!(AddPartitionsToTxnResponseT {
        results_by_topic: ov(st!(AddPartitionsToTxnTopicResultT {
            name: s(),
            results_by_partition: ov(st!(AddPartitionsToTxnPartitionResultT {
                partition_index: any::<i32>(),
                partition_error_code: ec()
            })),
        })),
    });
    let add_offsets = st!(AddOffsetsToTxnResponseT { error_code: ec() });
    let end_txn = st!(EndTxnResponseT { error_code: ec() });
    let txn_offset_commit = st!(TxnOffsetCommitResponseT {
        topics: ov(commit_result_topic())
    });
    let describe = st!(DescribeTransactionsResponseT {
        transaction_states: ov(st!(DescribedTransactionT {
            error_code: ec(),
            transactional_id: s(),
            transaction_state: os(),
            transaction_timeout_ms: any::<i32>(),
            transaction_start_time_ms: any::<i64>(),
            producer_id: any::<i64>(),
            producer_epoch: any::<i16>(),
            topics: ov(st!(DescribedTransactionTopicT {
                topic: s(),
                partitions: oints()
            })),
        })),
    });
    let list = st!(ListTransactionsResponseT {
        error_code: ec(),
        unknown_state_filters: ov(s()),
        transaction_states: ov(st!(ListedTransactionT {
            transactional_id: s(),
            producer_id: any::<i64>(),
            transaction_state: os(),
            producer_epoch: any::<i16>(),
        })),
    });
    prop_oneof![
        add_partitions.prop_map(|b| ResponseBodyT::AddPartitionsToTxnResponse(Box::new(b))),
        add_offsets.prop_map(|b| ResponseBodyT::AddOffsetsToTxnResponse(Box::new(b))),
        end_txn.prop_map(|b| ResponseBodyT::EndTxnResponse(Box::new(b))),
        txn_offset_commit.prop_map(|b| ResponseBodyT::TxnOffsetCommitResponse(Box::new(b))),
        describe.prop_map(|b| ResponseBodyT::DescribeTransactionsResponse(Box::new(b))),
        list.prop_map(|b| ResponseBodyT::ListTransactionsResponse(Box::new(b))),
    ]
    .boxed()
}

/// Folds generated slices into the payload so the decoder's bounds check passes.
fn fit(slice: &mut PayloadSliceT, payload_bytes: u32) {
    slice.offset %= payload_bytes + 1;
    slice.length %= payload_bytes - slice.offset + 1;
}

fn fit_request(body: &mut RequestBodyT, payload_bytes: u32) {
    if let RequestBodyT::ProduceRequest(p) = body {
        for t in p.topics.iter_mut().flatten() {
            for part in t.partitions.iter_mut().flatten() {
                fit(&mut part.records, payload_bytes);
            }
        }
    }
}

fn fit_response(body: &mut ResponseBodyT, payload_bytes: u32) {
    if let ResponseBodyT::FetchResponse(f) = body {
        for t in f.responses.iter_mut().flatten() {
            for part in t.partitions.iter_mut().flatten() {
                if let Some(r) = part.records.as_mut() {
                    fit(r, payload_bytes);
                }
            }
        }
    }
}

fn metadata_record() -> BoxedStrategy<MetadataRecordT> {
    let uuid = || {
        st!(UuidT {
            high: any::<u64>(),
            low: any::<u64>()
        })
    };
    let register = st!(RegisterBrokerT {
        broker_id: any::<i32>(),
        incarnation_id: option::of(uuid()),
        broker_epoch: any::<i64>(),
        listeners: ov(st!(ListenerT {
            name: s(),
            host: s(),
            port: any::<u16>()
        })),
        rack: os(),
        unclean_shutdown: any::<bool>(),
    });
    let cluster_id = st!(ClusterIdT {
        id: option::of(uuid())
    });
    let heartbeat = st!(BrokerHeartbeatT {
        broker_id: any::<i32>(),
        broker_epoch: any::<i64>(),
        current_metadata_offset: any::<i64>(),
        want_fence: any::<bool>(),
        want_shutdown: any::<bool>(),
    });
    let fence = st!(FenceBrokerT {
        broker_id: any::<i32>(),
        broker_epoch: any::<i64>()
    });
    let unfence = st!(UnfenceBrokerT {
        broker_id: any::<i32>(),
        broker_epoch: any::<i64>()
    });
    let create = st!(CreateTopicT {
        name: s(),
        topic_id: uuid(),
        configs: ov(st!(TopicConfigT {
            name: s(),
            value: os()
        })),
        partitions: ov(st!(PartitionAssignmentT {
            partition_index: any::<i32>(),
            replicas: oints(),
            isr: oints(),
            leader: any::<i32>(),
            leader_epoch: any::<i32>(),
            partition_epoch: any::<i32>(),
            eligible_leaders: oints(),
        })),
    });
    let delete = st!(DeleteTopicT {
        name: s(),
        topic_id: uuid()
    });
    let change = st!(PartitionChangeT {
        topic_id: uuid(),
        partition_index: any::<i32>(),
        leader: any::<i32>(),
        isr: oints(),
        replicas: oints(),
        leader_epoch: any::<i32>(),
        partition_epoch: any::<i32>(),
        eligible_leaders: oints(),
    });
    let pid_block = st!(ProducerIdBlockT {
        assigned_broker_id: any::<i32>(),
        broker_epoch: any::<i64>(),
        first_producer_id: any::<i64>(),
        block_size: any::<i32>(),
    });
    prop_oneof![
        register.prop_map(|b| MetadataRecordBodyT::RegisterBroker(Box::new(b))),
        heartbeat.prop_map(|b| MetadataRecordBodyT::BrokerHeartbeat(Box::new(b))),
        fence.prop_map(|b| MetadataRecordBodyT::FenceBroker(Box::new(b))),
        unfence.prop_map(|b| MetadataRecordBodyT::UnfenceBroker(Box::new(b))),
        create.prop_map(|b| MetadataRecordBodyT::CreateTopic(Box::new(b))),
        delete.prop_map(|b| MetadataRecordBodyT::DeleteTopic(Box::new(b))),
        change.prop_map(|b| MetadataRecordBodyT::PartitionChange(Box::new(b))),
        pid_block.prop_map(|b| MetadataRecordBodyT::ProducerIdBlock(Box::new(b))),
        cluster_id.prop_map(|b| MetadataRecordBodyT::ClusterId(Box::new(b))),
    ]
    .prop_map(|body| MetadataRecordT { body })
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_request_round_trips(
        mut body in request_body(),
        correlation_id in any::<i32>(),
        api_version in any::<i16>(),
        client_id in os(),
        payload in vec(any::<u8>(), 0..64),
    ) {
        fit_request(&mut body, payload.len() as u32);
        let header = RequestHeaderT {
            api_key: crate::codec::request_body_api_key(body.request_body_type()).unwrap_or_default(),
            api_version,
            correlation_id,
            client_id,
            body,
        };
        let payload = Bytes::from(payload);
        let limits = FrameLimits::default();
        let frame = encode_request(&header, vec![payload.clone()], &limits).unwrap();
        let raw = split_frame(frame.to_bytes(), &limits).unwrap();
        let decoded = decode_request(&raw, &limits).unwrap();
        prop_assert_eq!(decoded.header, header);
        prop_assert_eq!(decoded.payload, payload);
    }

    #[test]
    fn every_response_round_trips(
        mut body in response_body(),
        correlation_id in any::<i32>(),
        throttle_time_ms in any::<i32>(),
        error_code in ec(),
        payload in vec(any::<u8>(), 0..64),
    ) {
        fit_response(&mut body, payload.len() as u32);
        let header = ResponseHeaderT {
            api_key: crate::codec::response_body_api_key(body.response_body_type()).unwrap_or_default(),
            api_version: 0,
            correlation_id,
            throttle_time_ms,
            error_code,
            body,
        };
        let payload = Bytes::from(payload);
        let limits = FrameLimits::default();
        let frame = encode_response(&header, vec![payload.clone()], &limits).unwrap();
        let raw = split_frame(frame.to_bytes(), &limits).unwrap();
        let decoded = decode_response(&raw, &limits).unwrap();
        prop_assert_eq!(decoded.header, header);
        prop_assert_eq!(decoded.payload, payload);
    }

    #[test]
    fn every_metadata_record_round_trips(record in metadata_record()) {
        let bytes = metadata_log::encode(&record).unwrap();
        prop_assert_eq!(metadata_log::decode(&bytes).unwrap(), record);
    }

    /// Arbitrary bytes never panic the decoders (the fuzz target does the same, longer).
    #[test]
    fn arbitrary_bytes_are_an_error_not_a_panic(bytes in vec(any::<u8>(), 0..256)) {
        let limits = FrameLimits { max_frame_bytes: 1 << 20, max_header_bytes: 1 << 16 };
        let mut dec = crate::frame::FrameDecoder::new(limits);
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let Ok(n) = dec.push(rest) else { break };
            rest = &rest[n..];
            match dec.next_frame() {
                Ok(Some(raw)) => {
                    let _ = decode_request(&raw, &limits);
                    let _ = decode_response(&raw, &limits);
                }
                Ok(None) => {}
                Err(_) => break,
            }
        }
        let _ = metadata_log::decode(&bytes);
    }

    /// A real request with one byte flipped decodes or fails cleanly.
    #[test]
    fn corrupted_requests_never_panic(body in request_body(), flip in any::<(usize, u8)>()) {
        let header = crate::codec::request(7, Some("c"), body);
        let limits = FrameLimits::default();
        let Ok(frame) = encode_request(&header, vec![], &limits) else { return Ok(()) };
        let mut bytes = frame.to_bytes().to_vec();
        // Keep the length prefixes so the flip lands in the flatbuffer.
        if bytes.len() > 8 {
            let at = 8 + flip.0 % (bytes.len() - 8);
            bytes[at] ^= flip.1 | 1;
        }
        if let Ok(raw) = split_frame(Bytes::from(bytes), &limits) {
            let _ = decode_request(&raw, &limits);
        }
    }
}

/// Every union member maps to its own API key, and every key has one request and one response
/// member (so a new schema cannot be left out of the codec's mapping).
#[test]
fn every_body_has_its_api_key() {
    let mut requests: Vec<ApiKey> = (1..=RequestBody::ENUM_MAX)
        .map(|t| crate::codec::request_body_api_key(RequestBody(t)).expect("a request member"))
        .collect();
    let mut responses: Vec<ApiKey> = (1..=ResponseBody::ENUM_MAX)
        .map(|t| crate::codec::response_body_api_key(ResponseBody(t)).expect("a response member"))
        .collect();
    requests.sort_by_key(|k| k.0);
    responses.sort_by_key(|k| k.0);
    let mut keys = ApiKey::ENUM_VALUES.to_vec();
    keys.sort_by_key(|k| k.0);
    assert_eq!(requests, keys);
    assert_eq!(responses, keys);
    assert_eq!(
        crate::codec::request_body_api_key(RequestBody::EndTxnRequest),
        Some(ApiKey::EndTxn)
    );
    assert_eq!(ApiKey::ListTransactions.0, 66);
}

#[test]
fn body_must_match_api_key() {
    let mut header = crate::codec::request(1, None, RequestBodyT::HeartbeatRequest(Box::default()));
    let limits = FrameLimits::default();
    // encode_request fixes api_key from the body, so build the mismatch by hand.
    header.api_key = ApiKey::Produce;
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let root = header.pack(&mut fbb);
    fbb.finish_minimal(root);
    let frame = crate::frame::assemble(fbb.finished_data(), vec![], &limits).unwrap();
    let raw = split_frame(frame.to_bytes(), &limits).unwrap();
    let err = decode_request(&raw, &limits).unwrap_err();
    assert!(
        matches!(err, crate::FrameError::BodyMismatch { .. }),
        "{err}"
    );
    assert_eq!(err.error_code(), crate::ErrorCode::InvalidRequest);
}

#[test]
fn produce_slice_outside_payload_is_refused() {
    let mut produce = ProduceRequestT::default();
    produce.topics = Some(vec![TopicProduceDataT {
        name: "t".into(),
        partitions: Some(vec![PartitionProduceDataT {
            index: 0,
            records: PayloadSliceT {
                offset: 2,
                length: 9,
            },
        }]),
    }]);
    let header = crate::codec::request(1, None, RequestBodyT::ProduceRequest(Box::new(produce)));
    let limits = FrameLimits::default();
    let frame = encode_request(&header, vec![Bytes::from_static(b"0123456789")], &limits).unwrap();
    let raw = split_frame(frame.to_bytes(), &limits).unwrap();
    let err = decode_request(&raw, &limits).unwrap_err();
    assert!(
        matches!(
            err,
            crate::FrameError::SliceOutOfBounds { partition: 0, .. }
        ),
        "{err}"
    );
}

#[test]
fn request_without_body_is_refused_at_encode() {
    let header = RequestHeaderT::default();
    assert!(matches!(
        encode_request(&header, vec![], &FrameLimits::default()),
        Err(crate::FrameError::MissingBody)
    ));
}

#[test]
fn garbage_header_fails_verification() {
    let limits = FrameLimits::default();
    let frame = crate::frame::assemble(&[0xff; 32], vec![], &limits).unwrap();
    let raw = split_frame(frame.to_bytes(), &limits).unwrap();
    assert!(matches!(
        decode_request(&raw, &limits),
        Err(crate::FrameError::InvalidHeader(_))
    ));
    assert!(matches!(
        decode_response(&raw, &limits),
        Err(crate::FrameError::InvalidHeader(_))
    ));
}

/// Writes one valid frame per request and response type into `$SPOOL_WRITE_FUZZ_SEEDS` (a seed
/// corpus for `protocol/fuzz`: `cargo fuzz run frame_decoder corpus/frame_decoder seeds`). Does
/// nothing unless the variable is set.
#[test]
fn write_fuzz_seeds() {
    let Some(dir) = std::env::var_os("SPOOL_WRITE_FUZZ_SEEDS") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let limits = FrameLimits::default();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for i in 0..64 {
        let body = request_body().new_tree(&mut runner).unwrap().current();
        let mut body = body;
        fit_request(&mut body, 16);
        let header = crate::codec::request(i, Some("seed"), body);
        let frame = encode_request(&header, vec![Bytes::from_static(&[7; 16])], &limits).unwrap();
        std::fs::write(dir.join(format!("request-{i}")), frame.to_bytes()).unwrap();
        let mut body = response_body().new_tree(&mut runner).unwrap().current();
        fit_response(&mut body, 16);
        let header = crate::codec::response(i, 0, body);
        let frame = encode_response(&header, vec![Bytes::from_static(&[7; 16])], &limits).unwrap();
        std::fs::write(dir.join(format!("response-{i}")), frame.to_bytes()).unwrap();
        let record = metadata_record().new_tree(&mut runner).unwrap().current();
        std::fs::write(
            dir.join(format!("metadata-{i}")),
            metadata_log::encode(&record).unwrap(),
        )
        .unwrap();
    }
}
