//! Replication (DESIGN §1, §7; the replication issue's item 10): real three-broker clusters,
//! acks=all producers, a broker killed or cut off, and afterwards every acknowledged record is
//! read back once, in order, at its acknowledged offset — from brokers that survived.
//!
//! Each test waits for conditions (leaders moved, acknowledgements past a count), never for
//! time; every wait is bounded.

use spool_protocol::client::blocking::Producer;
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ClientError, ProducerRecord};
use spool_protocol::ErrorCode;
use spool_tests::checker::{assert_none, missing_acked, Acked};
use spool_tests::cluster::Cluster;
use spool_tests::netfilter::{Cut, Endpoint};
use spool_tests::paced::PacedProducer;
use spool_tests::replicated::{self, cluster_with_topic_on, wait_re_led, READ_TIMEOUT};
use spool_tests::Broker;

const PARTITIONS: i32 = 3;

/// A healthy three-node cluster with `topic` (RF 3, [`PARTITIONS`], `extra` topic configs), the
/// controller, a victim (a non-controller broker leading a partition) and what it leads.
fn cluster_with_topic(topic: &str, extra: &[&str]) -> (Cluster, i32, i32, Vec<i32>) {
    cluster_with_topic_on(Cluster::start(3), topic, PARTITIONS, extra)
}

fn check_everything_acknowledged_is_there(
    cluster: &Cluster,
    reader: i32,
    topic: &str,
    acked: &[Acked],
) -> usize {
    replicated::check_everything_acknowledged_is_there(cluster, reader, topic, PARTITIONS, acked)
}

#[test]
fn acks_all_records_survive_kill_9_of_their_leader() {
    let (mut cluster, controller, victim, led) = cluster_with_topic("durable", &[]);
    // Bootstrapped from the controller, which stays up; a round sends one record to every
    // partition and waits for all of them (acks=all).
    let producer = PacedProducer::start(cluster.node(controller), "durable", PARTITIONS, 0);
    let before = producer.wait_past(10 * PARTITIONS as usize);
    cluster.node_mut(victim).kill9();
    wait_re_led(&cluster, controller, "durable", victim, &led);
    let at_re_lead = producer.acked_count();
    producer.wait_past(at_re_lead + 10 * PARTITIONS as usize);
    let acked = producer.stop();
    assert!(
        acked.len() > before,
        "acknowledged after the kill too: {} then {}",
        before,
        acked.len()
    );
    // Every record acknowledged before the kill — on the victim's partitions too — is on the
    // new leaders, at its offset.
    let read = check_everything_acknowledged_is_there(&cluster, controller, "durable", &acked);
    assert!(read >= acked.len(), "read {read} of {}", acked.len());
}

/// Sends `g-<seq>` for each `seq` to `partition` of `topic` through `broker`, one at a time
/// with `acks`; returns their acknowledgements (a failure fails the test).
fn produce_to(
    broker: &Broker,
    topic: &str,
    partition: i32,
    seqs: std::ops::Range<u64>,
    acks: Acks,
) -> Vec<Acked> {
    let producer = spool_tests::client::producer(broker, acks);
    let acked = seqs
        .map(|seq| {
            let record = ProducerRecord::new(topic, spool_tests::paced::value(seq))
                .with_partition(partition);
            let md = producer
                .send(record)
                .and_then(|d| d.wait())
                .unwrap_or_else(|e| {
                    panic!("record {seq} not acknowledged: {e}\n{}", broker.log_tail())
                });
            Acked {
                partition: md.partition,
                offset: md.offset,
                value: spool_tests::paced::value(seq),
            }
        })
        .collect();
    let _ = producer.close(spool_tests::client::OPERATION_TIMEOUT_MS);
    acked
}

fn endpoint(cluster: &Cluster, id: i32) -> Endpoint {
    Endpoint {
        ip: cluster.node(id).ip(),
        internal_port: cluster.internal_port(id),
    }
}

/// Each node's segment bytes of `topic`-`partition` below `offset`.
fn replica_bytes(cluster: &Cluster, topic: &str, partition: i32, offset: i64) -> Vec<Vec<u8>> {
    (1..=3)
        .map(|i| {
            let dir = cluster
                .node(i)
                .data_dir()
                .join(format!("{topic}-{partition}"));
            spool_tests::log_files::batches_below(&dir, offset)
        })
        .collect()
}

#[test]
fn a_leader_cut_off_from_the_others_loses_only_its_unreplicated_tail() {
    if let Err(why) = Cut::available() {
        eprintln!("skipping: this test cuts links with iptables, which needs root: {why}");
        return;
    }
    let (cluster, controller, victim, led) = cluster_with_topic("cut", &[]);
    let p = led[0];
    let others: Vec<i32> = (1..=3).filter(|&i| i != victim).collect();
    let replicated = produce_to(cluster.node(controller), "cut", p, 0..20, Acks::All);
    let cut = Cut::isolate(
        endpoint(&cluster, victim),
        &others
            .iter()
            .map(|&o| endpoint(&cluster, o))
            .collect::<Vec<_>>(),
    )
    .expect("cutting the victim off");
    // The isolated leader still believes it leads (nothing tells it otherwise): acks=1 writes
    // land on it alone.
    let stranded = produce_to(cluster.node(victim), "cut", p, 100..110, Acks::Leader);
    // A consumer on the isolated leader reads what it has below its high watermark, which
    // cannot move past what the followers had (they no longer fetch).
    let seen_during_cut = spool_tests::client::consume_until(
        cluster.node(victim),
        "cut",
        PARTITIONS,
        READ_TIMEOUT,
        |r| r.iter().filter(|r| r.partition == p).count() >= replicated.len(),
    );
    // The others elect a new leader from the ISR and take acks=all writes at the same offsets
    // the stranded records have on the victim.
    wait_re_led(&cluster, controller, "cut", victim, &[p]);
    let after = produce_to(cluster.node(controller), "cut", p, 200..220, Acks::All);
    cut.heal();
    // Healed, the victim follows the new leader: its stranded tail is truncated (the leader's
    // epochs say where its epoch ended), and it fetches what it missed.
    let hw = cluster.wait_until("the replicas agree below the high watermark", |c| {
        let hw =
            spool_tests::client::end_offsets(c.node(controller), "cut", PARTITIONS)[p as usize];
        let bytes = replica_bytes(c, "cut", p, hw);
        let expected = (replicated.len() + after.len()) as i64;
        (hw >= expected && bytes.iter().all(|b| !b.is_empty() && *b == bytes[0])).then_some(hw)
    });
    let mut acked = replicated.clone();
    acked.extend(after.iter().cloned());
    check_everything_acknowledged_is_there(&cluster, controller, "cut", &acked);
    // Nothing a consumer read is gone, and the stranded acks=1 records are (their offsets hold
    // the new leader's records now): the cost of acks=1, and only of acks=1.
    let read_back = spool_tests::client::consume_until(
        cluster.node(controller),
        "cut",
        PARTITIONS,
        READ_TIMEOUT,
        |r| r.iter().filter(|r| r.partition == p).count() as i64 >= hw,
    );
    let seen: Vec<_> = seen_during_cut
        .iter()
        .filter(|r| r.partition == p)
        .cloned()
        .collect();
    let still: Vec<Acked> = seen
        .iter()
        .filter_map(|r| {
            Some(Acked {
                partition: r.partition,
                offset: r.offset,
                value: r.value.clone()?,
            })
        })
        .collect();
    assert_none(
        "records read during the cut, read again",
        &missing_acked(&still, &read_back),
    );
    let stranded_values: Vec<_> = stranded.iter().map(|a| a.value.clone()).collect();
    assert!(
        !read_back.iter().any(|r| r
            .value
            .as_ref()
            .is_some_and(|v| stranded_values.contains(v))),
        "the stranded acks=1 records were truncated"
    );
    assert!(
        !seen.iter().any(|r| r
            .value
            .as_ref()
            .is_some_and(|v| stranded_values.contains(v))),
        "a consumer on the isolated leader never saw its unreplicated records"
    );
}

/// Sum of a counter over node `id`'s cores.
fn counter_sum(cluster: &Cluster, id: i32, name: &str) -> i64 {
    let text =
        spool_tests::http::get(cluster.node(id).admin_addr(), "/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| l.rsplit_once(' ')?.1.trim().parse::<i64>().ok())
        .sum()
}

#[test]
fn a_paused_follower_leaves_the_isr_the_producer_carries_on_and_it_rejoins() {
    // A long broker session, so the paused follower stays registered: it is the leaders' lag
    // rule (replica.lag.time.max.ms, 3 s here) that takes it out of the ISR.
    let cluster = Cluster::start_with_args(3, &["--broker-session-timeout-ms", "60000"]);
    let (mut cluster, controller, _, _) = cluster_with_topic_on(
        cluster,
        "paused",
        PARTITIONS,
        &["--config", "replica.lag.time.max.ms=3000"],
    );
    let rows = cluster.describe(controller, "paused");
    // The producer writes partition 0 only (a paused broker that leads a partition stalls
    // it: nothing fences it during a 60 s session); its follower that is not the controller
    // is paused.
    let partition = 0;
    let leader = rows[0].leader;
    let follower = (1..=3)
        .find(|&i| i != controller && i != leader)
        .expect("a follower that is not the controller");
    let producer = PacedProducer::start(cluster.node(controller), "paused", 1, 0);
    producer.wait_past(5);
    cluster.node_mut(follower).pause();
    cluster.wait_until("the paused follower out of the ISR", |c| {
        let rows = c.describe(controller, "paused");
        (!rows[partition as usize].isr.contains(&follower)).then_some(())
    });
    // Two of three in sync meet min.insync.replicas (2): acks=all goes on.
    let during = producer.acked_count();
    producer.wait_past(during + 5);
    cluster.node_mut(follower).resume();
    cluster.wait_until("the follower back in every ISR", |c| {
        let rows = c.describe(controller, "paused");
        rows.iter().all(|r| r.isr.contains(&follower)).then_some(())
    });
    let after = producer.acked_count();
    producer.wait_past(after + 5);
    let acked = producer.stop();
    assert!(
        counter_sum(&cluster, leader, "spool_isr_shrinks_total") >= 1
            && counter_sum(&cluster, leader, "spool_isr_expands_total") >= 1,
        "the leader counted the shrink and the expansion:\n{}",
        cluster.node(leader).metrics()
    );
    check_everything_acknowledged_is_there(&cluster, controller, "paused", &acked);
}

#[test]
fn with_min_isr_3_and_a_broker_down_acks_all_is_refused_and_acks_1_goes_on() {
    let (mut cluster, controller, victim, _) =
        cluster_with_topic("strict", &["--config", "min.insync.replicas=3"]);
    let before = produce_to(cluster.node(controller), "strict", 0, 0..10, Acks::All);
    cluster.node_mut(victim).kill9();
    // Once the controller fences it, every ISR is two brokers.
    cluster.wait_until("the victim out of every ISR", |c| {
        let rows = c.describe(controller, "strict");
        rows.iter()
            .all(|r| !r.isr.contains(&victim) && r.leader >= 0)
            .then_some(())
    });
    let end_before =
        spool_tests::client::end_offsets(cluster.node(controller), "strict", PARTITIONS);
    // acks=all: NOT_ENOUGH_REPLICAS, nothing appended (the end offsets do not move). The
    // code is retriable; a producer without retries shows it.
    let config = ProducerConfig {
        retries: 0,
        ..spool_tests::client::producer_config(Acks::All)
    };
    let producer =
        Producer::new(&[&cluster.node(controller).bootstrap()], config).expect("a producer");
    for p in 0..PARTITIONS {
        let record = ProducerRecord::new("strict", spool_tests::paced::value(1000 + p as u64))
            .with_partition(p);
        let outcome = producer.send(record).and_then(|d| d.wait());
        assert!(
            matches!(
                outcome,
                Err(ClientError::Broker {
                    code: ErrorCode::NotEnoughReplicas,
                    ..
                })
            ),
            "partition {p}: acks=all with two of three in sync and min ISR 3: {outcome:?}"
        );
    }
    let _ = producer.close(spool_tests::client::OPERATION_TIMEOUT_MS);
    assert_eq!(
        spool_tests::client::end_offsets(cluster.node(controller), "strict", PARTITIONS),
        end_before,
        "a refused acks=all appended nothing"
    );
    // acks=1 is the leader's alone: it still works.
    let acks1 = produce_to(
        cluster.node(controller),
        "strict",
        0,
        100..110,
        Acks::Leader,
    );
    // The victim returns, catches up and rejoins: nothing acknowledged is lost, and acks=all
    // works again.
    cluster.node_mut(victim).restart();
    cluster.wait_until("the victim back in every ISR", |c| {
        let rows = c.describe(controller, "strict");
        rows.iter().all(|r| r.isr.contains(&victim)).then_some(())
    });
    let again = produce_to(cluster.node(controller), "strict", 0, 200..210, Acks::All);
    let mut acked = before;
    acked.extend(acks1);
    acked.extend(again);
    check_everything_acknowledged_is_there(&cluster, controller, "strict", &acked);
}

#[test]
fn acks_all_answers_request_timed_out_when_the_isr_cannot_catch_up_in_time() {
    // Long sessions and lag: the paused followers stay registered and in the ISR, so the high
    // watermark cannot cover the batch, and the request's own timeout_ms answers it.
    let cluster = Cluster::start_with_args(3, &["--broker-session-timeout-ms", "60000"]);
    let (mut cluster, controller, _, _) = cluster_with_topic_on(cluster, "slow", PARTITIONS, &[]);
    let leader = cluster.describe(controller, "slow")[0].leader;
    let followers: Vec<i32> = (1..=3).filter(|&i| i != leader).collect();
    // Acknowledged while every replica runs.
    let before = produce_to(cluster.node(leader), "slow", 0, 0..5, Acks::All);
    for &f in &followers {
        cluster.node_mut(f).pause();
    }
    let mut conn = spool_tests::wire::RawConn::connect(cluster.node(leader).native_addr())
        .expect("connecting to the leader");
    let mut b = spool_storage::records::BatchBuilder::new(1_700_000_000_000);
    // Sequence 7: between what came before and after, for the order check.
    b.push(1_700_000_000_000, None, Some(spool_tests::paced::value(7)));
    let batch = b.build().expect("a batch").freeze();
    let (mut body, payload) = spool_tests::wire::produce_body("slow", 0, -1, batch);
    if let spool_protocol::wire::RequestBodyT::ProduceRequest(r) = &mut body {
        r.timeout_ms = 500;
    }
    let r = conn.request(body, 0, payload).expect("a produce response");
    let (code, _) = spool_tests::wire::produce_outcome(&r).expect("a produce outcome");
    assert_eq!(
        code,
        spool_protocol::wire::ErrorCode::REQUEST_TIMED_OUT,
        "acks=all with both followers paused"
    );
    for &f in &followers {
        cluster.node_mut(f).resume();
    }
    // The batch was written (REQUEST_TIMED_OUT promises nothing either way); once the followers
    // resume, acks=all works again and nothing acknowledged is lost.
    let after = produce_to(cluster.node(leader), "slow", 0, 10..15, Acks::All);
    let mut acked = before;
    acked.extend(after);
    check_everything_acknowledged_is_there(&cluster, controller, "slow", &acked);
}
