//! The UNSUPPORTED_VERSION answer to a request the crate decoded but spool does not implement
//! (an API it does not list, or a version outside its range): every item the request names —
//! topic, partition, resource, group, ACL — comes back with the error code.
//!
//! Why: many responses have no top-level error code (Produce, Metadata, CreatePartitions, …). An
//! empty one is a valid answer to a client that does not check ApiVersions (sarama), which then
//! fails with "response did not contain all the expected blocks" or, worse, reads "nothing to
//! do" as success. With each item echoed, it reads the error it would get from Kafka.
//!
//! What it promises: only fields the request carried at its own version are copied (a name, a
//! topic id), so the answer encodes at that version; the caller sets the top-level error code,
//! where the response has one, on top ([`super::unsupported::set_error_code`]). APIs whose
//! response has a top-level error code answer through it alone and are not listed here.

use kafka_protocol::messages::*;

/// The response to `request` naming each of its items with `code`, when its shape has items the
/// client matches against what it asked for; `None` otherwise.
pub fn echo(request: &RequestKind, code: i16) -> Option<ResponseKind> {
    use RequestKind as R;
    Some(match request {
        R::Produce(r) => produce(r, code).into(),
        R::Fetch(r) => fetch(r, code).into(),
        R::ListOffsets(r) => list_offsets(r, code).into(),
        R::Metadata(r) => metadata(r, code).into(),
        R::OffsetCommit(r) => offset_commit(r, code).into(),
        R::OffsetFetch(r) => offset_fetch(r, code).into(),
        R::FindCoordinator(r) => find_coordinator(r, code).into(),
        R::DescribeGroups(r) => describe_groups(r, code).into(),
        R::CreateTopics(r) => create_topics(r, code).into(),
        R::DeleteTopics(r) => delete_topics(r, code).into(),
        R::DeleteRecords(r) => delete_records(r, code).into(),
        R::OffsetForLeaderEpoch(r) => offset_for_leader_epoch(r, code).into(),
        R::AddPartitionsToTxn(r) => add_partitions_to_txn(r, code).into(),
        R::WriteTxnMarkers(r) => write_txn_markers(r, code).into(),
        R::TxnOffsetCommit(r) => txn_offset_commit(r, code).into(),
        R::CreateAcls(r) => create_acls(r, code).into(),
        R::DeleteAcls(r) => delete_acls(r, code).into(),
        R::DescribeConfigs(r) => describe_configs(r, code).into(),
        R::AlterConfigs(r) => alter_configs(r, code).into(),
        R::AlterReplicaLogDirs(r) => alter_replica_log_dirs(r, code).into(),
        R::DescribeLogDirs(_) => describe_log_dirs(code).into(),
        R::CreatePartitions(r) => create_partitions(r, code).into(),
        R::DeleteGroups(r) => delete_groups(r, code).into(),
        R::ElectLeaders(r) => elect_leaders(r, code).into(),
        R::IncrementalAlterConfigs(r) => incremental_alter_configs(r, code).into(),
        R::AlterClientQuotas(r) => alter_client_quotas(r, code).into(),
        R::AlterUserScramCredentials(r) => alter_user_scram_credentials(r, code).into(),
        R::DescribeProducers(r) => describe_producers(r, code).into(),
        R::DescribeTransactions(r) => describe_transactions(r, code).into(),
        R::ConsumerGroupDescribe(r) => consumer_group_describe(r, code).into(),
        R::DescribeTopicPartitions(r) => describe_topic_partitions(r, code).into(),
        _ => return None,
    })
}

fn produce(r: &ProduceRequest, code: i16) -> ProduceResponse {
    use produce_response::*;
    ProduceResponse::default().with_responses(
        r.topic_data
            .iter()
            .map(|t| {
                TopicProduceResponse::default()
                    .with_name(t.name.clone())
                    .with_topic_id(t.topic_id)
                    .with_partition_responses(
                        t.partition_data
                            .iter()
                            .map(|p| {
                                PartitionProduceResponse::default()
                                    .with_index(p.index)
                                    .with_error_code(code)
                                    .with_base_offset(-1)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn fetch(r: &FetchRequest, code: i16) -> FetchResponse {
    use fetch_response::*;
    FetchResponse::default().with_responses(
        r.topics
            .iter()
            .map(|t| {
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                PartitionData::default()
                                    .with_partition_index(p.partition)
                                    .with_error_code(code)
                                    .with_high_watermark(-1)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn list_offsets(r: &ListOffsetsRequest, code: i16) -> ListOffsetsResponse {
    use list_offsets_response::*;
    ListOffsetsResponse::default().with_topics(
        r.topics
            .iter()
            .map(|t| {
                ListOffsetsTopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                ListOffsetsPartitionResponse::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn metadata(r: &MetadataRequest, code: i16) -> MetadataResponse {
    use metadata_response::*;
    let topics = r.topics.iter().flatten().map(|t| {
        MetadataResponseTopic::default()
            .with_error_code(code)
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id)
    });
    MetadataResponse::default().with_topics(topics.collect())
}

fn offset_commit(r: &OffsetCommitRequest, code: i16) -> OffsetCommitResponse {
    use offset_commit_response::*;
    OffsetCommitResponse::default().with_topics(
        r.topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn offset_fetch(r: &OffsetFetchRequest, code: i16) -> OffsetFetchResponse {
    use offset_fetch_response::*;
    // v0–7 name one group's topics (v2+ also carry a top-level error); v8+ several groups.
    let topics = r.topics.iter().flatten().map(|t| {
        OffsetFetchResponseTopic::default()
            .with_name(t.name.clone())
            .with_partitions(
                t.partition_indexes
                    .iter()
                    .map(|&p| {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(-1)
                            .with_error_code(code)
                    })
                    .collect(),
            )
    });
    let groups = r.groups.iter().map(|g| {
        OffsetFetchResponseGroup::default()
            .with_group_id(g.group_id.clone())
            .with_error_code(code)
    });
    OffsetFetchResponse::default()
        .with_topics(topics.collect())
        .with_groups(groups.collect())
}

fn find_coordinator(r: &FindCoordinatorRequest, code: i16) -> FindCoordinatorResponse {
    use find_coordinator_response::*;
    // v4+ batch keys and answer per key; v0–3 answer with the top-level error.
    let coordinators = r.coordinator_keys.iter().map(|k| {
        Coordinator::default()
            .with_key(k.clone())
            .with_node_id(BrokerId(-1))
            .with_port(-1)
            .with_error_code(code)
    });
    FindCoordinatorResponse::default().with_coordinators(coordinators.collect())
}

fn describe_groups(r: &DescribeGroupsRequest, code: i16) -> DescribeGroupsResponse {
    use describe_groups_response::*;
    let groups = r.groups.iter().map(|g| {
        DescribedGroup::default()
            .with_group_id(g.clone())
            .with_error_code(code)
    });
    DescribeGroupsResponse::default().with_groups(groups.collect())
}

fn create_topics(r: &CreateTopicsRequest, code: i16) -> CreateTopicsResponse {
    use create_topics_response::*;
    let topics = r.topics.iter().map(|t| {
        CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_error_code(code)
    });
    CreateTopicsResponse::default().with_topics(topics.collect())
}

fn delete_topics(r: &DeleteTopicsRequest, code: i16) -> DeleteTopicsResponse {
    use delete_topics_response::*;
    // v0–5 name topics in `topic_names`; v6+ in `topics`, by name or id.
    let by_name = r.topic_names.iter().map(|n| {
        DeletableTopicResult::default()
            .with_name(Some(n.clone()))
            .with_error_code(code)
    });
    let by_state = r.topics.iter().map(|t| {
        DeletableTopicResult::default()
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id)
            .with_error_code(code)
    });
    DeleteTopicsResponse::default().with_responses(by_name.chain(by_state).collect())
}

fn delete_records(r: &DeleteRecordsRequest, code: i16) -> DeleteRecordsResponse {
    use delete_records_response::*;
    DeleteRecordsResponse::default().with_topics(
        r.topics
            .iter()
            .map(|t| {
                DeleteRecordsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                DeleteRecordsPartitionResult::default()
                                    .with_partition_index(p.partition_index)
                                    .with_low_watermark(-1)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn offset_for_leader_epoch(
    r: &OffsetForLeaderEpochRequest,
    code: i16,
) -> OffsetForLeaderEpochResponse {
    use offset_for_leader_epoch_response::*;
    OffsetForLeaderEpochResponse::default().with_topics(
        r.topics
            .iter()
            .map(|t| {
                OffsetForLeaderTopicResult::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                EpochEndOffset::default()
                                    .with_partition(p.partition)
                                    .with_error_code(code)
                                    .with_leader_epoch(-1)
                                    .with_end_offset(-1)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// AddPartitionsToTxn topic results for `topics`.
fn txn_topic_results(
    topics: &[add_partitions_to_txn_request::AddPartitionsToTxnTopic],
    code: i16,
) -> Vec<add_partitions_to_txn_response::AddPartitionsToTxnTopicResult> {
    use add_partitions_to_txn_response::*;
    topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

fn add_partitions_to_txn(r: &AddPartitionsToTxnRequest, code: i16) -> AddPartitionsToTxnResponse {
    use add_partitions_to_txn_response::*;
    // v0–3 name one transaction's topics; v4+ several transactions (and a top-level error).
    let by_transaction = r.transactions.iter().map(|t| {
        AddPartitionsToTxnResult::default()
            .with_transactional_id(t.transactional_id.clone())
            .with_topic_results(txn_topic_results(&t.topics, code))
    });
    AddPartitionsToTxnResponse::default()
        .with_results_by_topic_v3_and_below(txn_topic_results(&r.v3_and_below_topics, code))
        .with_results_by_transaction(by_transaction.collect())
}

fn write_txn_markers(r: &WriteTxnMarkersRequest, code: i16) -> WriteTxnMarkersResponse {
    use write_txn_markers_response::*;
    let markers = r.markers.iter().map(|m| {
        WritableTxnMarkerResult::default()
            .with_producer_id(m.producer_id)
            .with_topics(
                m.topics
                    .iter()
                    .map(|t| {
                        WritableTxnMarkerTopicResult::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partition_indexes
                                    .iter()
                                    .map(|&p| {
                                        WritableTxnMarkerPartitionResult::default()
                                            .with_partition_index(p)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    });
    WriteTxnMarkersResponse::default().with_markers(markers.collect())
}

fn txn_offset_commit(r: &TxnOffsetCommitRequest, code: i16) -> TxnOffsetCommitResponse {
    use txn_offset_commit_response::*;
    TxnOffsetCommitResponse::default().with_topics(
        r.topics
            .iter()
            .map(|t| {
                TxnOffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                TxnOffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn create_acls(r: &CreateAclsRequest, code: i16) -> CreateAclsResponse {
    use create_acls_response::*;
    let results = r
        .creations
        .iter()
        .map(|_| AclCreationResult::default().with_error_code(code));
    CreateAclsResponse::default().with_results(results.collect())
}

fn delete_acls(r: &DeleteAclsRequest, code: i16) -> DeleteAclsResponse {
    use delete_acls_response::*;
    let results = r
        .filters
        .iter()
        .map(|_| DeleteAclsFilterResult::default().with_error_code(code));
    DeleteAclsResponse::default().with_filter_results(results.collect())
}

fn describe_configs(r: &DescribeConfigsRequest, code: i16) -> DescribeConfigsResponse {
    use describe_configs_response::*;
    let results = r.resources.iter().map(|res| {
        DescribeConfigsResult::default()
            .with_error_code(code)
            .with_resource_type(res.resource_type)
            .with_resource_name(res.resource_name.clone())
    });
    DescribeConfigsResponse::default().with_results(results.collect())
}

fn alter_configs(r: &AlterConfigsRequest, code: i16) -> AlterConfigsResponse {
    use alter_configs_response::*;
    let responses = r.resources.iter().map(|res| {
        AlterConfigsResourceResponse::default()
            .with_error_code(code)
            .with_resource_type(res.resource_type)
            .with_resource_name(res.resource_name.clone())
    });
    AlterConfigsResponse::default().with_responses(responses.collect())
}

fn incremental_alter_configs(
    r: &IncrementalAlterConfigsRequest,
    code: i16,
) -> IncrementalAlterConfigsResponse {
    use incremental_alter_configs_response::*;
    let responses = r.resources.iter().map(|res| {
        AlterConfigsResourceResponse::default()
            .with_error_code(code)
            .with_resource_type(res.resource_type)
            .with_resource_name(res.resource_name.clone())
    });
    IncrementalAlterConfigsResponse::default().with_responses(responses.collect())
}

fn alter_replica_log_dirs(
    r: &AlterReplicaLogDirsRequest,
    code: i16,
) -> AlterReplicaLogDirsResponse {
    use alter_replica_log_dirs_response::*;
    let results = r.dirs.iter().flat_map(|d| &d.topics).map(|t| {
        AlterReplicaLogDirTopicResult::default()
            .with_topic_name(t.name.clone())
            .with_partitions(
                t.partitions
                    .iter()
                    .map(|&p| {
                        AlterReplicaLogDirPartitionResult::default()
                            .with_partition_index(p)
                            .with_error_code(code)
                    })
                    .collect(),
            )
    });
    AlterReplicaLogDirsResponse::default().with_results(results.collect())
}

/// DescribeLogDirs answers per log directory, not per requested topic (and before v3 has no
/// top-level error): one nameless directory carries the error.
fn describe_log_dirs(code: i16) -> DescribeLogDirsResponse {
    use describe_log_dirs_response::*;
    DescribeLogDirsResponse::default()
        .with_results(vec![DescribeLogDirsResult::default().with_error_code(code)])
}

fn create_partitions(r: &CreatePartitionsRequest, code: i16) -> CreatePartitionsResponse {
    use create_partitions_response::*;
    let results = r.topics.iter().map(|t| {
        CreatePartitionsTopicResult::default()
            .with_name(t.name.clone())
            .with_error_code(code)
    });
    CreatePartitionsResponse::default().with_results(results.collect())
}

fn delete_groups(r: &DeleteGroupsRequest, code: i16) -> DeleteGroupsResponse {
    use delete_groups_response::*;
    let results = r.groups_names.iter().map(|g| {
        DeletableGroupResult::default()
            .with_group_id(g.clone())
            .with_error_code(code)
    });
    DeleteGroupsResponse::default().with_results(results.collect())
}

fn elect_leaders(r: &ElectLeadersRequest, code: i16) -> ElectLeadersResponse {
    use elect_leaders_response::*;
    let results = r.topic_partitions.iter().flatten().map(|t| {
        ReplicaElectionResult::default()
            .with_topic(t.topic.clone())
            .with_partition_result(
                t.partitions
                    .iter()
                    .map(|&p| {
                        PartitionResult::default()
                            .with_partition_id(p)
                            .with_error_code(code)
                    })
                    .collect(),
            )
    });
    ElectLeadersResponse::default().with_replica_election_results(results.collect())
}

fn alter_client_quotas(r: &AlterClientQuotasRequest, code: i16) -> AlterClientQuotasResponse {
    use alter_client_quotas_response::*;
    let entries = r.entries.iter().map(|e| {
        EntryData::default().with_error_code(code).with_entity(
            e.entity
                .iter()
                .map(|x| {
                    EntityData::default()
                        .with_entity_type(x.entity_type.clone())
                        .with_entity_name(x.entity_name.clone())
                })
                .collect(),
        )
    });
    AlterClientQuotasResponse::default().with_entries(entries.collect())
}

fn alter_user_scram_credentials(
    r: &AlterUserScramCredentialsRequest,
    code: i16,
) -> AlterUserScramCredentialsResponse {
    use alter_user_scram_credentials_response::*;
    let users = r
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(r.upsertions.iter().map(|u| &u.name));
    let results = users.map(|u| {
        AlterUserScramCredentialsResult::default()
            .with_user(u.clone())
            .with_error_code(code)
    });
    AlterUserScramCredentialsResponse::default().with_results(results.collect())
}

fn describe_producers(r: &DescribeProducersRequest, code: i16) -> DescribeProducersResponse {
    use describe_producers_response::*;
    let topics = r.topics.iter().map(|t| {
        TopicResponse::default()
            .with_name(t.name.clone())
            .with_partitions(
                t.partition_indexes
                    .iter()
                    .map(|&p| {
                        PartitionResponse::default()
                            .with_partition_index(p)
                            .with_error_code(code)
                    })
                    .collect(),
            )
    });
    DescribeProducersResponse::default().with_topics(topics.collect())
}

fn describe_transactions(
    r: &DescribeTransactionsRequest,
    code: i16,
) -> DescribeTransactionsResponse {
    use describe_transactions_response::*;
    let states = r.transactional_ids.iter().map(|id| {
        TransactionState::default()
            .with_transactional_id(id.clone())
            .with_error_code(code)
    });
    DescribeTransactionsResponse::default().with_transaction_states(states.collect())
}

fn consumer_group_describe(
    r: &ConsumerGroupDescribeRequest,
    code: i16,
) -> ConsumerGroupDescribeResponse {
    use consumer_group_describe_response::*;
    let groups = r.group_ids.iter().map(|g| {
        DescribedGroup::default()
            .with_group_id(g.clone())
            .with_error_code(code)
    });
    ConsumerGroupDescribeResponse::default().with_groups(groups.collect())
}

fn describe_topic_partitions(
    r: &DescribeTopicPartitionsRequest,
    code: i16,
) -> DescribeTopicPartitionsResponse {
    use describe_topic_partitions_response::*;
    let topics = r.topics.iter().map(|t| {
        DescribeTopicPartitionsResponseTopic::default()
            .with_name(Some(t.name.clone()))
            .with_error_code(code)
    });
    DescribeTopicPartitionsResponse::default().with_topics(topics.collect())
}
