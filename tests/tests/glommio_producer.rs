//! The glommio producer against a real broker (issue 19 item 4): records sent with
//! `send_with` (a callback per record, no task or channel) and with `send` (a future) interleave
//! on one producer; every callback runs once with the offset the record really got, a callback
//! may send again from inside itself, and the driver — woken once per batch, not per record —
//! still sends every batch, the last one by its linger alone.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{glommio_io, ClientError, ProducerRecord, RecordMetadata};
use spool_tests::client::{assert_reads_back, create_topic};
use spool_tests::Broker;

const TOPIC: &str = "callbacks";
const PARTITIONS: i32 = 3;
/// Records sent with a callback; every tenth of them also gets a future-sent sibling.
const RECORDS: usize = 3000;

type Outcome = Result<RecordMetadata, ClientError>;

#[test]
fn callbacks_and_futures_each_get_the_offset_their_record_got() {
    let broker = Broker::start();
    create_topic(&broker, TOPIC, PARTITIONS);
    let bootstrap = broker.native_addr().to_string();
    let outcomes = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { produce(&bootstrap).await })
        .expect("an executor")
        .join()
        .expect("the producer's executor");

    // Every value once, each acknowledged with a distinct (partition, offset).
    assert_eq!(
        outcomes.len(),
        RECORDS + RECORDS / 10 + 1,
        "one outcome per record"
    );
    let mut at = BTreeMap::new();
    for (value, outcome) in &outcomes {
        let md = outcome.as_ref().unwrap_or_else(|e| panic!("{value}: {e}"));
        assert!(md.offset >= 0, "{value}: offset {}", md.offset);
        let previous = at.insert((md.partition, md.offset), value.clone());
        assert!(previous.is_none(), "{value} and {previous:?} at one offset");
    }
    // What the broker holds is exactly what the callbacks and futures were told.
    assert_reads_back(&broker, TOPIC, PARTITIONS, &at);
}

async fn produce(bootstrap: &str) -> Vec<(String, Outcome)> {
    let config = ProducerConfig {
        acks: Acks::All,
        // Small batches, so a run has many: each needs its own wake of the driver.
        batch_bytes: 4096,
        linger_ms: 20,
        ..ProducerConfig::default()
    };
    let producer = Rc::new(glommio_io::Producer::new(&[bootstrap], config).expect("a producer"));
    let outcomes: Rc<RefCell<Vec<(String, Outcome)>>> = Rc::default();
    let mut futures = Vec::new();
    for i in 0..RECORDS {
        let value = format!("cb-{i:05}");
        let sink = Rc::clone(&outcomes);
        let record = ProducerRecord::new(TOPIC, value.clone()).with_partition((i % 3) as i32);
        if i == RECORDS - 1 {
            // The last callback sends one more record from inside itself: it runs in the
            // producer's driver, with no borrow of the producer held.
            let again = Rc::clone(&producer);
            producer
                .send_with(record, move |outcome| {
                    sink.borrow_mut().push((value, outcome));
                    let sink = Rc::clone(&sink);
                    glommio::spawn_local(async move {
                        let record = ProducerRecord::new(TOPIC, "from-callback").with_partition(0);
                        let sink2 = Rc::clone(&sink);
                        again
                            .send_with(record, move |o| {
                                sink2.borrow_mut().push(("from-callback".into(), o));
                            })
                            .await
                            .expect("send from a callback");
                    })
                    .detach();
                })
                .await
                .expect("send_with");
        } else {
            producer
                .send_with(record, move |outcome| {
                    sink.borrow_mut().push((value, outcome));
                })
                .await
                .expect("send_with");
        }
        if i % 10 == 0 {
            let value = format!("fut-{i:05}");
            let record = ProducerRecord::new(TOPIC, value.clone()).with_partition(1);
            futures.push((value, producer.send(record).await.expect("send")));
        }
    }
    for (value, delivery) in futures {
        let outcome = delivery.await;
        outcomes.borrow_mut().push((value, outcome));
    }
    // The record sent from the last callback: wait for its own outcome (no flush: its batch
    // goes by linger alone, which only the driver's own wake-up can send).
    for _ in 0..600 {
        if outcomes.borrow().len() == RECORDS + RECORDS / 10 + 1 {
            break;
        }
        glommio::timer::sleep(Duration::from_millis(50)).await;
    }
    let producer = Rc::try_unwrap(producer)
        .ok()
        .expect("the producer is no longer shared");
    producer.close(30_000).await.expect("close");
    Rc::try_unwrap(outcomes)
        .unwrap_or_else(|_| panic!("a callback still holds the outcomes"))
        .into_inner()
}
