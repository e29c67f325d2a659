//! `topic_admin`'s rules: CreatePartitions and config validation, elections, and their records
//! applied to an image and through a snapshot.

use super::*;
use crate::image_snapshot::{restore_image, snapshot_image};
use crate::Uuid128;

/// Brokers 1-3 registered; those in `live` unfenced. Topic `name` with `partitions`
/// (replicas, isr, leader) and `configs`.
fn image(
    live: &[i32],
    name: &str,
    partitions: &[(&[i32], &[i32], i32)],
    configs: &[(&str, &str)],
) -> MetadataImage {
    let mut image = MetadataImage::new();
    for id in 1..=3 {
        let epoch = i64::from(id) * 10;
        assert_eq!(
            image.apply(&records::register_broker(id, None, epoch, vec![], None)),
            Ok(())
        );
        if live.contains(&id) {
            assert_eq!(image.apply(&records::unfence_broker(id, epoch)), Ok(()));
        }
    }
    let assignments = (0..)
        .zip(partitions)
        .map(|(i, (replicas, isr, leader))| {
            records::partition_assignment(i, replicas.to_vec(), isr.to_vec(), *leader, 0, 0)
        })
        .collect();
    let configs = configs
        .iter()
        .map(|(k, v)| records::topic_config(k, Some(v)))
        .collect();
    let create = records::create_topic(name, Uuid128 { high: 1, low: 1 }, configs, assignments);
    assert_eq!(image.apply(&create), Ok(()));
    image
}

fn grow(name: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> NewPartitions {
    NewPartitions {
        name: name.into(),
        count,
        assignments,
    }
}

fn apply_round_trip(image: &mut MetadataImage, record: &MetadataRecordT) {
    assert_eq!(image.apply(record), Ok(()), "{record:?}");
    let restored = restore_image(&snapshot_image(image).expect("snapshot")).expect("restore");
    assert_eq!(&restored, image);
}

fn code<T>(r: Result<T, Refusal>) -> ErrorCode {
    r.err().map_or(ErrorCode::None, |r| r.code)
}

#[test]
fn added_partitions_are_placed_lead_by_their_first_replica_and_survive_a_snapshot() {
    let mut img = image(&[1, 2, 3], "t", &[(&[1, 2], &[1, 2], 1)], &[]);
    let policy = CreateTopicPolicy::default();
    let record = validate_create_partitions(&img, &grow("t", 3, None), &policy).expect("ok");
    apply_round_trip(&mut img, &record);
    let t = img.topic("t").expect("t");
    assert_eq!(t.partitions.len(), 3);
    for p in &t.partitions[1..] {
        assert_eq!(p.replicas.len(), 2);
        assert_eq!(p.isr, p.replicas);
        assert_eq!(p.leader, p.replicas[0]);
        assert_eq!((p.leader_epoch, p.partition_epoch), (0, 0));
    }
    // A manual assignment: broker 3 is fenced, so it is a replica but neither leads nor
    // starts in the ISR.
    let mut img = image(&[1, 2], "t", &[(&[1, 2], &[1, 2], 1)], &[]);
    let record = validate_create_partitions(&img, &grow("t", 2, Some(vec![vec![3, 2]])), &policy)
        .expect("ok");
    apply_round_trip(&mut img, &record);
    let p = &img.topic("t").expect("t").partitions[1];
    assert_eq!(
        (p.replicas.as_slice(), p.isr.as_slice(), p.leader),
        (&[3, 2][..], &[2][..], 2)
    );
}

#[test]
fn the_count_only_grows_within_the_policy_and_internal_topics_keep_theirs() {
    let img = image(&[1], "t", &[(&[1], &[1], 1), (&[1], &[1], 1)], &[]);
    let policy = CreateTopicPolicy::default();
    let same = validate_create_partitions(&img, &grow("t", 2, None), &policy).unwrap_err();
    assert_eq!(same.code, ErrorCode::InvalidPartitions);
    assert!(same.message.contains("already has 2"), "{same}");
    let less = validate_create_partitions(&img, &grow("t", 1, None), &policy).unwrap_err();
    assert_eq!(less.code, ErrorCode::InvalidPartitions);
    assert!(less.message.contains("currently has 2"), "{less}");
    let too_many = grow("t", policy.partitions_per_topic_max + 1, None);
    assert_eq!(
        code(validate_create_partitions(&img, &too_many, &policy)),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(
        code(validate_create_partitions(
            &img,
            &grow("nope", 3, None),
            &policy
        )),
        ErrorCode::UnknownTopicOrPartition
    );
    let internal = image(&[1], "__consumer_offsets", &[(&[1], &[1], 1)], &[]);
    let refused =
        validate_create_partitions(&internal, &grow("__consumer_offsets", 5, None), &policy)
            .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidRequest);
    assert!(refused.message.contains("coordinators"), "{refused}");
}

#[test]
fn manual_assignments_must_fit_the_topic() {
    let img = image(&[1, 2, 3], "t", &[(&[1, 2], &[1, 2], 1)], &[]);
    let policy = CreateTopicPolicy::default();
    for assignments in [
        vec![vec![1, 2]],             // two new partitions, one list
        vec![vec![1, 2], vec![3]],    // replication factor 1, the topic's is 2
        vec![vec![1, 2], vec![3, 3]], // a broker twice
        vec![vec![1, 2], vec![3, 9]], // broker 9 is not registered
    ] {
        let r = grow("t", 3, Some(assignments.clone()));
        assert_eq!(
            code(validate_create_partitions(&img, &r, &policy)),
            ErrorCode::InvalidReplicaAssignment,
            "{assignments:?}"
        );
    }
    let fenced = image(&[1], "t", &[(&[1, 2], &[1], 1)], &[]);
    let r = grow("t", 2, Some(vec![vec![2, 3]]));
    assert_eq!(
        code(validate_create_partitions(&fenced, &r, &policy)),
        ErrorCode::InvalidReplicaAssignment
    );
}

fn alteration(incremental: bool, ops: &[(&str, ConfigOpKind)]) -> ConfigAlteration {
    ConfigAlteration {
        topic: "t".into(),
        incremental,
        ops: ops
            .iter()
            .map(|(k, kind)| ConfigOp {
                key: k.to_string(),
                kind: kind.clone(),
            })
            .collect(),
    }
}

fn configs(img: &MetadataImage) -> Vec<(String, String)> {
    img.topic("t")
        .expect("t")
        .configs
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn alter_configs_replaces_the_set_and_incremental_ops_apply_in_order() {
    use ConfigOpKind::*;
    let mut img = image(&[1], "t", &[(&[1], &[1], 1)], &[("retention.ms", "1000")]);
    let set = alteration(false, &[("segment.bytes", Set("8192".into()))]);
    let record = validate_alter_configs(&img, &set).expect("ok");
    apply_round_trip(&mut img, &record);
    assert_eq!(configs(&img), [("segment.bytes".into(), "8192".into())]);
    assert_eq!(img.topic("t").expect("t").config.segment_bytes, Some(8192));
    let ops = alteration(
        true,
        &[
            ("retention.ms", Set("5".into())),
            ("segment.bytes", Delete),
            ("cleanup.policy", Append("compact".into())),
        ],
    );
    let record = validate_alter_configs(&img, &ops).expect("ok");
    apply_round_trip(&mut img, &record);
    assert_eq!(
        configs(&img),
        [
            ("cleanup.policy".into(), "delete,compact".into()),
            ("retention.ms".into(), "5".into())
        ]
    );
    assert_eq!(img.topic("t").expect("t").config.segment_bytes, None);
    let sub = alteration(true, &[("cleanup.policy", Subtract("delete".into()))]);
    let record = validate_alter_configs(&img, &sub).expect("ok");
    apply_round_trip(&mut img, &record);
    assert_eq!(
        img.topic("t").expect("t").config_value("cleanup.policy"),
        Some("compact")
    );
}

#[test]
fn bad_keys_values_and_list_ops_are_invalid_config() {
    use ConfigOpKind::*;
    let img = image(&[1], "t", &[(&[1], &[1], 1)], &[]);
    for (incremental, op) in [
        (false, ("retention.ms", Set("soon".into()))),
        (true, ("bogus", Set("1".into()))),
        (true, ("bogus", Delete)),
        (true, ("retention.ms", Append("1".into()))),
        (true, ("cleanup.policy", Append("shred".into()))),
        (true, ("cleanup.policy", Subtract("delete".into()))),
    ] {
        let a = alteration(incremental, std::slice::from_ref(&op));
        assert_eq!(
            code(validate_alter_configs(&img, &a)),
            ErrorCode::InvalidConfig,
            "{op:?}"
        );
    }
    let twice = alteration(true, &[("retention.ms", Delete), ("retention.ms", Delete)]);
    assert_eq!(
        code(validate_alter_configs(&img, &twice)),
        ErrorCode::InvalidRequest
    );
    let mut unknown = alteration(true, &[]);
    unknown.topic = "nope".into();
    assert_eq!(
        code(validate_alter_configs(&img, &unknown)),
        ErrorCode::UnknownTopicOrPartition
    );
}

#[test]
fn preferred_elections_move_leadership_back_to_the_first_replica() {
    let mut img = image(
        &[1, 2, 3],
        "t",
        &[(&[1, 2], &[1, 2], 2), (&[3, 1], &[1], 1)],
        &[],
    );
    let record = elect_leader(&img, "t", 0, false).expect("elected");
    apply_round_trip(&mut img, &record);
    let p = &img.topic("t").expect("t").partitions[0];
    assert_eq!((p.leader, p.isr.as_slice()), (1, &[1, 2][..]));
    assert_eq!((p.leader_epoch, p.partition_epoch), (1, 1));
    assert_eq!(
        code(elect_leader(&img, "t", 0, false)),
        ErrorCode::ElectionNotNeeded
    );
    // Broker 3 is live but not in the ISR.
    assert_eq!(
        code(elect_leader(&img, "t", 1, false)),
        ErrorCode::PreferredLeaderNotAvailable
    );
    assert_eq!(
        code(elect_leader(&img, "t", 2, false)),
        ErrorCode::UnknownTopicOrPartition
    );
    assert_eq!(
        code(elect_leader(&img, "x", 0, false)),
        ErrorCode::UnknownTopicOrPartition
    );
}

#[test]
fn unclean_elections_only_fill_a_missing_leader_from_a_live_replica() {
    // Broker 1 (the ISR's last member) is fenced; 2 is live; 3 is fenced.
    let mut img = image(
        &[2],
        "t",
        &[(&[1, 2], &[1], NO_LEADER), (&[1, 3], &[1], NO_LEADER)],
        &[],
    );
    assert_eq!(
        code(elect_leader(&img, "t", 1, true)),
        ErrorCode::EligibleLeadersNotAvailable
    );
    let record = elect_leader(&img, "t", 0, true).expect("elected");
    apply_round_trip(&mut img, &record);
    let p = &img.topic("t").expect("t").partitions[0];
    assert_eq!((p.leader, p.isr.as_slice()), (2, &[2][..]));
    assert_eq!((p.leader_epoch, p.partition_epoch), (1, 1));
    assert_eq!(
        code(elect_leader(&img, "t", 0, true)),
        ErrorCode::ElectionNotNeeded
    );
}

#[test]
fn add_partitions_records_must_continue_the_index_range() {
    let mut img = image(&[1], "t", &[(&[1], &[1], 1)], &[]);
    let before = img.clone();
    let id = img.topic("t").expect("t").topic_id;
    let part = |i| records::partition_assignment(i, vec![1], vec![1], 1, 0, 0);
    for parts in [vec![], vec![part(0)], vec![part(2)], vec![part(1), part(1)]] {
        let r = records::add_partitions(id, parts.clone());
        assert_eq!(
            img.apply(&r),
            Err(ErrorCode::InvalidPartitions),
            "{parts:?}"
        );
        assert_eq!(img, before);
    }
    let empty = records::add_partitions(
        id,
        vec![records::partition_assignment(1, vec![], vec![], -1, 0, 0)],
    );
    assert_eq!(img.apply(&empty), Err(ErrorCode::InvalidReplicaAssignment));
    let elsewhere = records::add_partitions(Uuid128 { high: 9, low: 9 }, vec![part(1)]);
    assert_eq!(
        img.apply(&elsewhere),
        Err(ErrorCode::UnknownTopicOrPartition)
    );
    let configs = records::set_topic_configs(Uuid128 { high: 9, low: 9 }, vec![]);
    assert_eq!(img.apply(&configs), Err(ErrorCode::UnknownTopicOrPartition));
    assert_eq!(img, before);
    apply_round_trip(
        &mut img,
        &records::add_partitions(id, vec![part(2), part(1)]),
    );
    assert_eq!(img.topic("t").expect("t").partitions.len(), 3);
}
