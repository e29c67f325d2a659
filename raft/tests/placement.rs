//! Replica placement as the controller applies it: `validate_create_topic` over a metadata image
//! whose brokers have racks, topics applied one after another, so each placement sees the ones
//! before it (spool_core::placement has the properties; this checks the wiring).

use std::collections::BTreeMap;

use spool_protocol::ErrorCode;
use spool_raft::records;
use spool_raft::validate::validate_create_topic;
use spool_raft::{CreateTopicPolicy, CreateTopicRequest, MetadataImage, Uuid128};

/// An image with brokers `(id, rack)` registered and unfenced.
fn image_with(brokers: &[(i32, Option<&str>)]) -> MetadataImage {
    let mut image = MetadataImage::new();
    for (epoch, (id, rack)) in (1..).zip(brokers) {
        let register = records::register_broker(*id, None, epoch, vec![], rack.map(str::to_owned));
        assert_eq!(image.apply(&register), Ok(()));
        assert_eq!(image.apply(&records::unfence_broker(*id, epoch)), Ok(()));
    }
    image
}

fn create(image: &mut MetadataImage, name: &str, partitions: i32, rf: i16, id: u64) {
    let request = CreateTopicRequest {
        replication_factor: rf,
        ..CreateTopicRequest::new(name, partitions)
    };
    let record = validate_create_topic(
        image,
        &request,
        Uuid128 { high: id, low: id },
        &CreateTopicPolicy::default(),
    )
    .expect("valid");
    assert_eq!(image.apply(&record), Ok(()));
}

/// (replicas, preferred leaders) per broker over every topic.
fn counts(image: &MetadataImage) -> BTreeMap<i32, (u32, u32)> {
    let mut counts: BTreeMap<i32, (u32, u32)> =
        image.brokers().map(|b| (b.broker_id, (0, 0))).collect();
    for p in image.topics().flat_map(|t| &t.partitions) {
        for (i, b) in p.replicas.iter().enumerate() {
            let c = counts.entry(*b).or_default();
            c.0 += 1;
            c.1 += u32::from(i == 0);
        }
    }
    counts
}

#[test]
fn three_racks_get_one_replica_each_and_topics_stay_balanced() {
    let mut image = image_with(&[
        (1, Some("a")),
        (2, Some("b")),
        (3, Some("c")),
        (4, Some("a")),
        (5, Some("b")),
        (6, Some("c")),
    ]);
    let rack: BTreeMap<i32, String> = image
        .brokers()
        .map(|b| (b.broker_id, b.rack.clone().unwrap_or_default()))
        .collect();
    for t in 0..10u64 {
        create(&mut image, &format!("t{t}"), 1 + (t as i32 % 4), 3, t + 1);
    }
    for topic in image.topics() {
        for p in &topic.partitions {
            let mut racks: Vec<&str> = p.replicas.iter().map(|b| rack[b].as_str()).collect();
            racks.sort_unstable();
            assert_eq!(racks, ["a", "b", "c"], "{}: {:?}", topic.name, p.replicas);
            assert_eq!(p.isr, p.replicas);
            assert_eq!(p.leader, p.replicas[0]);
        }
    }
    let counts = counts(&image);
    let (replicas, leaders): (Vec<u32>, Vec<u32>) = counts.values().copied().unzip();
    let spread = |v: &[u32]| v.iter().max().unwrap_or(&0) - v.iter().min().unwrap_or(&0);
    assert!(spread(&replicas) <= 1, "{counts:?}");
    assert!(spread(&leaders) <= 1, "{counts:?}");
}

#[test]
fn fenced_brokers_get_no_replicas_and_rf_above_the_live_brokers_is_refused() {
    let mut image = image_with(&[(1, None), (2, None), (3, None)]);
    let epoch = image.broker(2).expect("registered").broker_epoch;
    assert_eq!(image.apply(&records::fence_broker(2, epoch)), Ok(()));
    create(&mut image, "t", 8, 2, 1);
    let topic = image.topic("t").expect("created");
    assert!(topic.partitions.iter().all(|p| !p.replicas.contains(&2)));
    let refused = validate_create_topic(
        &image,
        &CreateTopicRequest {
            replication_factor: 3,
            ..CreateTopicRequest::new("u", 1)
        },
        Uuid128 { high: 2, low: 2 },
        &CreateTopicPolicy::default(),
    )
    .map_err(|r| (r.code, r.message));
    assert_eq!(
        refused,
        Err((
            ErrorCode::InvalidReplicationFactor,
            "replication factor 3 cannot be met: 2 unfenced broker(s) registered".to_owned()
        ))
    );
}
