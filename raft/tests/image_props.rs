//! Properties of the metadata state machine:
//! - applying any sequence of records never panics, and a refused record changes nothing;
//! - image → snapshot → restore gives an equal image, at every step of such a sequence;
//! - a record that validation produced always applies to the image it was validated against
//!   (CreatePartitions, AlterConfigs and operator elections included), and every partition it
//!   leaves keeps the partition invariants.

use proptest::prelude::*;
use spool_protocol::metadata_records::MetadataRecordT;
use spool_raft::image::BrokerListener;
use spool_raft::image_snapshot::{restore_image, snapshot_image};
use spool_raft::records;
use spool_raft::topic_admin;
use spool_raft::validate::{
    validate_allocate_producer_ids, validate_create_topic, validate_delete_topic,
    validate_heartbeat, validate_register_broker, HeartbeatRequest, RegisterBrokerRequest,
};
use spool_raft::{CreateTopicPolicy, CreateTopicRequest, MetadataImage, Uuid128};

/// Small universes so that records often refer to things that exist.
fn broker_id() -> impl Strategy<Value = i32> {
    -1..4i32
}
fn epoch() -> impl Strategy<Value = i64> {
    0..4i64
}
fn topic_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("c.d".to_string()),
        Just(String::new()),
        "[a-z]{1,3}",
    ]
}
fn topic_id() -> impl Strategy<Value = Uuid128> {
    (0..3u64, 0..3u64).prop_map(|(high, low)| Uuid128 { high, low })
}
fn int_list() -> impl Strategy<Value = Vec<i32>> {
    prop::collection::vec(-1..4i32, 0..4)
}

fn any_record() -> impl Strategy<Value = MetadataRecordT> {
    prop_oneof![
        (
            broker_id(),
            prop::option::of(topic_id()),
            epoch(),
            prop::option::of("[a-z]{0,3}")
        )
            .prop_map(|(id, inc, ep, rack)| records::register_broker(
                id,
                inc,
                ep,
                vec![records::listener("native", "127.0.0.1", 9093)],
                rack
            )),
        (broker_id(), epoch(), -1..5i64, any::<bool>(), any::<bool>()).prop_map(
            |(id, ep, off, fence, shut)| records::broker_heartbeat(id, ep, off, fence, shut)
        ),
        (broker_id(), epoch()).prop_map(|(id, ep)| records::fence_broker(id, ep)),
        (broker_id(), epoch()).prop_map(|(id, ep)| records::unfence_broker(id, ep)),
        (
            topic_name(),
            topic_id(),
            prop::collection::vec(
                (
                    prop_oneof![Just("retention.ms"), Just("cleanup.policy"), Just("x")],
                    prop::option::of("[0-9a-z]{0,3}")
                ),
                0..3
            ),
            prop::collection::vec(
                (-1..4i32, int_list(), int_list(), -2..4i32, 0..3i32, 0..3i32),
                0..4
            )
        )
            .prop_map(|(name, id, configs, parts)| {
                let configs = configs
                    .iter()
                    .map(|(k, v)| records::topic_config(k, v.as_deref()))
                    .collect();
                let parts = parts
                    .into_iter()
                    .map(|(i, r, isr, l, le, pe)| {
                        records::partition_assignment(i, r, isr, l, le, pe)
                    })
                    .collect();
                records::create_topic(&name, id, configs, parts)
            }),
        (topic_name(), topic_id()).prop_map(|(n, id)| records::delete_topic(&n, id)),
        (
            topic_id(),
            -1..4i32,
            -2..4i32,
            prop::option::of(int_list()),
            prop::option::of(int_list()),
            prop::option::of(int_list()),
            0..5i32,
            0..5i32
        )
            .prop_map(
                |(
                    id,
                    p,
                    leader,
                    isr,
                    replicas,
                    eligible_leaders,
                    leader_epoch,
                    partition_epoch,
                )| {
                    records::partition_change(
                        id,
                        p,
                        records::PartitionFields {
                            leader,
                            isr,
                            replicas,
                            eligible_leaders,
                            leader_epoch,
                            partition_epoch,
                        },
                    )
                }
            ),
        (broker_id(), epoch(), -5..3000i64, -1..1000i32)
            .prop_map(|(b, e, first, size)| records::producer_id_block(b, e, first, size)),
        (
            topic_id(),
            prop::collection::vec(
                (-1..6i32, int_list(), int_list(), -2..4i32, 0..3i32, 0..3i32),
                0..3
            )
        )
            .prop_map(|(id, parts)| {
                let parts = parts
                    .into_iter()
                    .map(|(i, r, isr, l, le, pe)| {
                        records::partition_assignment(i, r, isr, l, le, pe)
                    })
                    .collect();
                records::add_partitions(id, parts)
            }),
        (
            topic_id(),
            prop::collection::vec(
                (
                    prop_oneof![Just("retention.ms"), Just("cleanup.policy"), Just("x")],
                    prop::option::of("[0-9a-z]{0,3}")
                ),
                0..3
            )
        )
            .prop_map(|(id, configs)| {
                let configs = configs
                    .iter()
                    .map(|(k, v)| records::topic_config(k, v.as_deref()))
                    .collect();
                records::set_topic_configs(id, configs)
            }),
        Just(MetadataRecordT::default()),
    ]
}

fn assert_snapshot_round_trips(image: &MetadataImage) {
    let bytes = snapshot_image(image).expect("snapshot");
    let restored = restore_image(&bytes).expect("restore");
    assert_eq!(&restored, image);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_record_sequence_applies_without_panic_and_snapshots_round_trip(
        recs in prop::collection::vec(any_record(), 0..40)
    ) {
        let mut image = MetadataImage::new();
        for (i, r) in recs.iter().enumerate() {
            let before = image.clone();
            if image.apply(r).is_err() {
                prop_assert_eq!(&image, &before, "a refused record changed the image");
            }
            if i % 8 == 7 {
                assert_snapshot_round_trips(&image);
            }
        }
        assert_snapshot_round_trips(&image);
    }

    #[test]
    fn restore_never_panics_on_damaged_snapshots(
        recs in prop::collection::vec(any_record(), 0..12),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut image = MetadataImage::new();
        for r in &recs {
            let _ = image.apply(r);
        }
        let mut bytes = snapshot_image(&image).expect("snapshot");
        for (at, mask) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
        }
        let cut = cut.index(bytes.len() + 1);
        let _ = restore_image(&bytes[..cut]);
        let _ = restore_image(&bytes);
    }
}

#[derive(Debug, Clone)]
enum Request {
    Register(i32),
    Heartbeat {
        broker: i32,
        fence: bool,
        shutdown: bool,
    },
    Create {
        name: String,
        partitions: i32,
        rf: i16,
        configs: Vec<(String, Option<String>)>,
        id: Uuid128,
    },
    Delete(String),
    ProducerIds(i32, i32),
    AddPartitions {
        name: String,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
    },
    AlterConfigs {
        name: String,
        incremental: bool,
        ops: Vec<(String, u8, String)>,
    },
    Elect {
        name: String,
        partition: i32,
        unclean: bool,
    },
}

fn any_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (-1..4i32).prop_map(Request::Register),
        (0..4i32, any::<bool>(), any::<bool>()).prop_map(|(broker, fence, shutdown)| {
            Request::Heartbeat {
                broker,
                fence,
                shutdown,
            }
        }),
        (
            topic_name(),
            -2..6i32,
            -1..4i16,
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("retention.ms".to_string()),
                        Just("segment.bytes".to_string()),
                        Just("cleanup.policy".to_string()),
                        Just("bogus".to_string())
                    ],
                    prop::option::of(prop_oneof![
                        Just("1".to_string()),
                        Just("-1".to_string()),
                        Just("compact".to_string()),
                        Just("1048576".to_string())
                    ])
                ),
                0..3
            ),
            topic_id(),
        )
            .prop_map(|(name, partitions, rf, configs, id)| Request::Create {
                name,
                partitions,
                rf,
                configs,
                id,
            }),
        topic_name().prop_map(Request::Delete),
        (0..4i32, -1..100i32).prop_map(|(b, n)| Request::ProducerIds(b, n)),
        (
            topic_name(),
            -1..9i32,
            prop::option::of(prop::collection::vec(int_list(), 0..4))
        )
            .prop_map(|(name, count, assignments)| Request::AddPartitions {
                name,
                count,
                assignments,
            }),
        (
            topic_name(),
            any::<bool>(),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("retention.ms".to_string()),
                        Just("cleanup.policy".to_string()),
                        Just("min.insync.replicas".to_string()),
                        Just("bogus".to_string())
                    ],
                    0..4u8,
                    prop_oneof![
                        Just("1".to_string()),
                        Just("compact".to_string()),
                        Just("delete".to_string()),
                        Just("x".to_string())
                    ]
                ),
                0..4
            )
        )
            .prop_map(|(name, incremental, ops)| Request::AlterConfigs {
                name,
                incremental,
                ops,
            }),
        (topic_name(), -1..4i32, any::<bool>()).prop_map(|(name, partition, unclean)| {
            Request::Elect {
                name,
                partition,
                unclean,
            }
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn validated_records_always_apply(reqs in prop::collection::vec(any_request(), 0..40)) {
        let mut image = MetadataImage::new();
        let policy = CreateTopicPolicy::default();
        for req in reqs {
            let record = match &req {
                Request::Register(id) => validate_register_broker(
                    &image,
                    &RegisterBrokerRequest {
                        broker_id: *id,
                        incarnation_id: Uuid128 { high: 0, low: 1 },
                        listeners: vec![BrokerListener {
                            name: "native".into(),
                            host: "h".into(),
                            port: 1,
                        }],
                        rack: None,
                        cluster_id: None,
                        registered_session_live: false,
                        previous_broker_epoch: -1,
                    },
                )
                .ok(),
                Request::Heartbeat { broker, fence, shutdown } => {
                    let epoch = image.broker(*broker).map_or(0, |b| b.broker_epoch);
                    validate_heartbeat(
                        &image,
                        &HeartbeatRequest {
                            broker_id: *broker,
                            broker_epoch: epoch,
                            current_metadata_offset: 10,
                            want_fence: *fence,
                            want_shutdown: *shutdown,
                        },
                        5,
                    )
                    .ok()
                    .flatten()
                }
                Request::Create { name, partitions, rf, configs, id } => validate_create_topic(
                    &image,
                    &CreateTopicRequest {
                        name: name.clone(),
                        num_partitions: *partitions,
                        replication_factor: *rf,
                        configs: configs.clone(),
                    },
                    *id,
                    &policy,
                )
                .ok(),
                Request::Delete(name) => validate_delete_topic(&image, name).ok(),
                Request::ProducerIds(b, n) => {
                    let epoch = image.broker(*b).map_or(0, |x| x.broker_epoch);
                    validate_allocate_producer_ids(&image, *b, epoch, *n).ok()
                }
                Request::AddPartitions { name, count, assignments } => {
                    topic_admin::validate_create_partitions(
                        &image,
                        &topic_admin::NewPartitions {
                            name: name.clone(),
                            count: *count,
                            assignments: assignments.clone(),
                        },
                        &policy,
                    )
                    .ok()
                }
                Request::AlterConfigs { name, incremental, ops } => {
                    let ops = ops
                        .iter()
                        .map(|(key, kind, value)| topic_admin::ConfigOp {
                            key: key.clone(),
                            kind: match kind {
                                0 => topic_admin::ConfigOpKind::Set(value.clone()),
                                1 => topic_admin::ConfigOpKind::Delete,
                                2 => topic_admin::ConfigOpKind::Append(value.clone()),
                                _ => topic_admin::ConfigOpKind::Subtract(value.clone()),
                            },
                        })
                        .collect();
                    topic_admin::validate_alter_configs(
                        &image,
                        &topic_admin::ConfigAlteration {
                            topic: name.clone(),
                            incremental: *incremental,
                            ops,
                        },
                    )
                    .ok()
                }
                Request::Elect { name, partition, unclean } => {
                    topic_admin::elect_leader(&image, name, *partition, *unclean).ok()
                }
            };
            if let Some(record) = record {
                prop_assert_eq!(image.apply(&record), Ok(()), "{:?}", req);
                for t in image.topics() {
                    for p in &t.partitions {
                        prop_assert_eq!(p.view().check(), Ok(()), "{:?} after {:?}", t, req);
                    }
                }
            }
        }
        assert_snapshot_round_trips(&image);
    }
}

/// Topic admin on a cluster that has topics (the sequences above rarely get that far): three
/// registered brokers, some fenced, topic "t" with 1-4 partitions of replication factor 1-3,
/// then any mix of CreatePartitions, AlterConfigs, operator elections and fence / unfence.
fn admin_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (
            Just("t".to_string()),
            0..12i32,
            prop::option::of(prop::collection::vec(
                prop::collection::vec(0..5i32, 0..4),
                0..4
            ))
        )
            .prop_map(|(name, count, assignments)| Request::AddPartitions {
                name,
                count,
                assignments,
            }),
        (
            Just("t".to_string()),
            any::<bool>(),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("retention.ms".to_string()),
                        Just("cleanup.policy".to_string()),
                        Just("min.insync.replicas".to_string()),
                    ],
                    0..4u8,
                    prop_oneof![
                        Just("1".to_string()),
                        Just("compact".to_string()),
                        Just("delete".to_string()),
                    ]
                ),
                0..4
            )
        )
            .prop_map(|(name, incremental, ops)| Request::AlterConfigs {
                name,
                incremental,
                ops,
            }),
        (0..6i32, any::<bool>()).prop_map(|(partition, unclean)| Request::Elect {
            name: "t".into(),
            partition,
            unclean,
        }),
        (1..4i32, any::<bool>()).prop_map(|(broker, fence)| Request::Heartbeat {
            broker,
            fence,
            shutdown: false,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn topic_admin_records_always_apply_and_keep_the_partition_invariants(
        partitions in 1..5i32,
        replication_factor in 1..4i16,
        reqs in prop::collection::vec(admin_request(), 0..30),
    ) {
        let mut image = MetadataImage::new();
        for id in 1..=3 {
            let epoch = i64::from(id);
            prop_assert_eq!(
                image.apply(&records::register_broker(id, None, epoch, vec![], None)),
                Ok(())
            );
            prop_assert_eq!(image.apply(&records::unfence_broker(id, epoch)), Ok(()));
        }
        let policy = CreateTopicPolicy::default();
        let create = validate_create_topic(
            &image,
            &CreateTopicRequest {
                name: "t".into(),
                num_partitions: partitions,
                replication_factor,
                configs: vec![],
            },
            Uuid128 { high: 5, low: 5 },
            &policy,
        )
        .expect("three live brokers take any replication factor up to 3");
        prop_assert_eq!(image.apply(&create), Ok(()));
        for req in reqs {
            let records: Vec<MetadataRecordT> = match &req {
                Request::AddPartitions { name, count, assignments } => {
                    topic_admin::validate_create_partitions(
                        &image,
                        &topic_admin::NewPartitions {
                            name: name.clone(),
                            count: *count,
                            assignments: assignments.clone(),
                        },
                        &policy,
                    )
                    .into_iter()
                    .collect()
                }
                Request::AlterConfigs { name, incremental, ops } => {
                    let ops = ops
                        .iter()
                        .map(|(key, kind, value)| topic_admin::ConfigOp {
                            key: key.clone(),
                            kind: match kind {
                                0 => topic_admin::ConfigOpKind::Set(value.clone()),
                                1 => topic_admin::ConfigOpKind::Delete,
                                2 => topic_admin::ConfigOpKind::Append(value.clone()),
                                _ => topic_admin::ConfigOpKind::Subtract(value.clone()),
                            },
                        })
                        .collect();
                    topic_admin::validate_alter_configs(
                        &image,
                        &topic_admin::ConfigAlteration {
                            topic: name.clone(),
                            incremental: *incremental,
                            ops,
                        },
                    )
                    .into_iter()
                    .collect()
                }
                Request::Elect { name, partition, unclean } => {
                    topic_admin::elect_leader(&image, name, *partition, *unclean)
                        .into_iter()
                        .collect()
                }
                Request::Heartbeat { broker, fence, .. } => {
                    let epoch = image.broker(*broker).map_or(0, |b| b.broker_epoch);
                    let defaults = spool_core::topic_config::TopicDefaults::default();
                    let out = if *fence {
                        spool_raft::failover::fence_brokers_records(&image, &[*broker], &defaults)
                    } else {
                        spool_raft::failover::unfence_broker_records(
                            &image, *broker, epoch, &defaults,
                        )
                    };
                    out.map(|o| o.records).unwrap_or_default()
                }
                _ => Vec::new(),
            };
            for record in records {
                prop_assert_eq!(image.apply(&record), Ok(()), "{:?}", req);
                for t in image.topics() {
                    for p in &t.partitions {
                        prop_assert_eq!(p.view().check(), Ok(()), "{:?} after {:?}", t, req);
                    }
                }
            }
        }
        assert_snapshot_round_trips(&image);
    }
}
