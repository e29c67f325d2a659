//! Who may register under a broker id (DESIGN §7, KIP-631): a second incarnation takes an id over
//! only once the first one's session is gone, and a broker whose data directory belongs to
//! another cluster is refused — both as pure decisions of `validate_register_broker` over an
//! image, with the error codes Kafka uses. Also the cluster id's own rules: set once, never
//! changed, carried by the image's snapshot records.

use spool_protocol::ErrorCode;
use spool_raft::image::BrokerListener;
use spool_raft::image_snapshot::image_records;
use spool_raft::validate::validate_register_broker;
use spool_raft::{records, MetadataImage, RegisterBrokerRequest, Uuid128};

const CLUSTER: Uuid128 = Uuid128 { high: 7, low: 7 };

fn request(broker_id: i32, incarnation: u64) -> RegisterBrokerRequest {
    RegisterBrokerRequest {
        broker_id,
        incarnation_id: Uuid128 {
            high: 1,
            low: incarnation,
        },
        listeners: vec![BrokerListener {
            name: "internal".into(),
            host: "127.0.0.4".into(),
            port: 9094,
        }],
        rack: None,
        cluster_id: None,
        registered_session_live: false,
        previous_broker_epoch: -1,
    }
}

/// An image of cluster [`CLUSTER`] with broker 4 registered under incarnation 1.
fn image_with_broker(unfenced: bool) -> MetadataImage {
    let mut image = MetadataImage::new();
    image
        .apply(&records::cluster_id(CLUSTER))
        .expect("cluster id");
    let record = validate_register_broker(&image, &request(4, 1)).expect("first registration");
    image.apply(&record).expect("applies");
    if unfenced {
        let epoch = image.broker(4).expect("registered").broker_epoch;
        image
            .apply(&records::unfence_broker(4, epoch))
            .expect("unfence");
    }
    image
}

#[test]
fn a_second_incarnation_is_refused_while_the_first_lives() {
    // Unfenced: the first incarnation is serving.
    let image = image_with_broker(true);
    let refused = validate_register_broker(&image, &request(4, 2)).expect_err("duplicate");
    assert_eq!(refused.code, ErrorCode::DuplicateBrokerRegistration);
    assert!(
        refused.message.contains("127.0.0.4:9094"),
        "{}",
        refused.message
    );

    // Fenced but still heartbeating (its session is live at the controller).
    let image = image_with_broker(false);
    let live = RegisterBrokerRequest {
        registered_session_live: true,
        previous_broker_epoch: -1,
        ..request(4, 2)
    };
    let refused = validate_register_broker(&image, &live).expect_err("duplicate");
    assert_eq!(refused.code, ErrorCode::DuplicateBrokerRegistration);
}

#[test]
fn a_restart_takes_the_id_over_once_the_old_session_is_gone() {
    // Fenced and silent: a restart after kill -9, once the session timed out.
    let image = image_with_broker(false);
    let record = validate_register_broker(&image, &request(4, 2)).expect("takes over");
    let mut next = image.clone();
    next.apply(&record).expect("applies");
    let b = next.broker(4).expect("registered");
    assert_eq!(b.incarnation_id, Some(Uuid128 { high: 1, low: 2 }));
    assert!(b.broker_epoch > image.broker(4).expect("old").broker_epoch);

    // The same incarnation registering again (its answer was lost) is not a duplicate.
    let image = image_with_broker(true);
    assert!(validate_register_broker(&image, &request(4, 1)).is_ok());
    // Another id is free.
    assert!(validate_register_broker(&image, &request(5, 9)).is_ok());
}

#[test]
fn another_clusters_data_directory_is_refused() {
    let image = image_with_broker(true);
    let stranger = RegisterBrokerRequest {
        cluster_id: Some(Uuid128 { high: 8, low: 8 }),
        ..request(5, 1)
    };
    let refused = validate_register_broker(&image, &stranger).expect_err("other cluster");
    assert_eq!(refused.code, ErrorCode::InconsistentClusterId);
    assert!(
        refused
            .message
            .contains(&Uuid128 { high: 8, low: 8 }.to_hex())
            && refused.message.contains(&CLUSTER.to_hex()),
        "{}",
        refused.message
    );
    // Its own cluster, or a fresh directory (no id yet), is welcome.
    for cluster_id in [Some(CLUSTER), None] {
        let ok = RegisterBrokerRequest {
            cluster_id,
            ..request(5, 1)
        };
        assert!(validate_register_broker(&image, &ok).is_ok());
    }
}

#[test]
fn the_cluster_id_is_set_once_and_travels_in_snapshots() {
    let mut image = MetadataImage::new();
    assert_eq!(image.cluster_id(), None);
    image.apply(&records::cluster_id(CLUSTER)).expect("first");
    assert_eq!(
        image.apply(&records::cluster_id(CLUSTER)),
        Ok(()),
        "same id: no-op"
    );
    let before = image.clone();
    assert_eq!(
        image.apply(&records::cluster_id(Uuid128 { high: 1, low: 1 })),
        Err(ErrorCode::InconsistentClusterId)
    );
    assert_eq!(image, before, "a refused record changes nothing");
    assert_eq!(
        image.apply(&records::cluster_id(Uuid128::ZERO)),
        Err(ErrorCode::InvalidRequest)
    );
    let mut rebuilt = MetadataImage::new();
    for r in image_records(&image) {
        rebuilt.apply(&r).expect("snapshot record applies");
    }
    assert_eq!(rebuilt.cluster_id(), Some(CLUSTER));
}

/// Brokers 1 and 2 registered and unfenced, and a topic with RF 2 whose partition 0 broker 1
/// leads.
fn image_with_a_led_partition() -> MetadataImage {
    use spool_raft::validate::validate_create_topic;
    use spool_raft::{CreateTopicPolicy, CreateTopicRequest};
    let mut image = MetadataImage::new();
    image
        .apply(&records::cluster_id(CLUSTER))
        .expect("cluster id");
    for id in [1, 2] {
        let record = validate_register_broker(&image, &request(id, 1)).expect("register");
        image.apply(&record).expect("applies");
        let epoch = image.broker(id).expect("registered").broker_epoch;
        image
            .apply(&records::unfence_broker(id, epoch))
            .expect("unfence");
    }
    let create = validate_create_topic(
        &image,
        &CreateTopicRequest {
            replication_factor: 2,
            ..CreateTopicRequest::new("t", 2)
        },
        Uuid128 { high: 5, low: 5 },
        &CreateTopicPolicy::default(),
    )
    .expect("create");
    image.apply(&create).expect("applies");
    image
}

fn leaders(image: &MetadataImage) -> Vec<i32> {
    image
        .topic("t")
        .expect("topic")
        .partitions
        .iter()
        .map(|p| p.leader)
        .collect()
}

/// Found by the simulator: a broker registering again while unfenced (its answer was lost) was
/// fenced by the new registration but kept leading. Its registration now moves its leaderships
/// first, and no record sequence leaves a fenced broker leading.
#[test]
fn registering_again_while_unfenced_moves_leadership_off_first() {
    use spool_core::topic_config::TopicDefaults;
    use spool_raft::failover::register_broker_records;
    let mut image = image_with_a_led_partition();
    assert!(leaders(&image).contains(&1), "{:?}", leaders(&image));
    let out = register_broker_records(&image, &request(1, 1), &TopicDefaults::default())
        .expect("the same incarnation may register again");
    assert!(
        out.records.len() >= 3,
        "changes, the fence, then the registration"
    );
    for r in &out.records {
        image.apply(r).expect("every record applies in order");
        let b = image.broker(1).expect("registered");
        for p in &image.topic("t").expect("topic").partitions {
            assert!(
                !(b.fenced && p.leader == 1),
                "a fenced broker leads after {r:?}"
            );
        }
    }
    assert!(image.broker(1).expect("registered").fenced);
    assert!(!leaders(&image).contains(&1), "{:?}", leaders(&image));
    // A fenced broker registering again needs no fence first.
    let again = register_broker_records(&image, &request(1, 1), &TopicDefaults::default())
        .expect("registers");
    assert_eq!(again.records.len(), 1);
}

/// Found by the simulator: an election lost with a leadership was never tried again. The
/// active controller's reconcile proposes it from the image alone, and nothing once it holds.
#[test]
fn reconcile_elects_where_the_image_needs_it_and_is_a_fixpoint() {
    use spool_core::topic_config::TopicDefaults;
    use spool_raft::failover::{fence_brokers_records, reconcile_records};
    let defaults = TopicDefaults::default();
    let mut image = image_with_a_led_partition();
    assert!(
        reconcile_records(&image, &defaults).records.is_empty(),
        "nothing to do"
    );
    // Fence both brokers (the ISR keeps its last member, leaderless), then unfence broker 2
    // *without* the elections an unfence brings — as when they were lost with the controller's
    // leadership.
    for id in [1, 2] {
        for r in fence_brokers_records(&image, &[id], &defaults)
            .expect("fence")
            .records
        {
            image.apply(&r).expect("applies");
        }
    }
    assert!(
        leaders(&image).iter().all(|l| *l < 0),
        "{:?}",
        leaders(&image)
    );
    let epoch = image.broker(2).expect("b").broker_epoch;
    image
        .apply(&records::unfence_broker(2, epoch))
        .expect("unfence");
    let needed = reconcile_records(&image, &defaults);
    assert_eq!(
        needed.records.len(),
        2,
        "both partitions need their leader back"
    );
    for r in &needed.records {
        image.apply(r).expect("applies");
    }
    assert_eq!(leaders(&image), vec![2, 2]);
    assert!(
        reconcile_records(&image, &defaults).records.is_empty(),
        "a fixpoint: nothing more once applied"
    );
}

/// KIP-966's input: a broker that registered before and comes back without the epoch its clean
/// shutdown recorded is marked as having shut down uncleanly; one that brings it back is not; a
/// first registration is clean. The mark survives a snapshot.
#[test]
fn a_registration_without_the_previous_epoch_is_marked_unclean() {
    let image = image_with_broker(false);
    let epoch = image.broker(4).expect("registered").broker_epoch;
    assert!(
        !image.broker(4).expect("registered").unclean_shutdown,
        "first: clean"
    );
    let unclean = |previous: i64| {
        let r = RegisterBrokerRequest {
            previous_broker_epoch: previous,
            ..request(4, 2)
        };
        let mut next = image.clone();
        next.apply(&validate_register_broker(&image, &r).expect("registers"))
            .expect("applies");
        let mut rebuilt = MetadataImage::new();
        for record in image_records(&next) {
            rebuilt.apply(&record).expect("snapshot record");
        }
        let b = rebuilt.broker(4).expect("registered");
        assert_eq!(Some(b), next.broker(4), "the snapshot keeps the mark");
        b.unclean_shutdown
    };
    assert!(
        !unclean(epoch),
        "it brought back its epoch: a clean shutdown"
    );
    assert!(unclean(-1), "no mark: it crashed");
    assert!(unclean(epoch - 1), "an older epoch: it crashed since");
}
