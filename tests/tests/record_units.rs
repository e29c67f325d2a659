//! Units of records (`ProducerRecords`) against a real broker, through the blocking producer
//! (`send_records`) and the glommio one (`send_records_with`), interleaved with single records:
//! each unit is reported once with its first record's offset, its records hold that offset and
//! the ones after it in order, and what a consumer reads back is exactly what the reports said.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use spool_protocol::client::producer::Acks;
use spool_protocol::client::{
    glommio_io, ClientError, ProducerRecord, ProducerRecords, RecordMetadata,
};
use spool_tests::client::{assert_reads_back, create_topic, producer, producer_config};
use spool_tests::Broker;

const TOPIC: &str = "units";
const PARTITIONS: i32 = 3;
/// Units per producer; unit `u` holds `u % 7 + 1` records.
const UNITS: usize = 200;

type Outcome = Result<RecordMetadata, ClientError>;
/// (values, outcome) per unit or single record.
type Reported = Vec<(Vec<String>, Outcome)>;

/// Unit `u` of producer `who`: its records' values, and the single record sent after it.
fn unit(who: &str, u: usize) -> (ProducerRecords, Vec<String>, ProducerRecord) {
    let values: Vec<String> = (0..u % 7 + 1)
        .map(|i| format!("{who}-{u:04}-{i}"))
        .collect();
    let mut records = ProducerRecords::new(TOPIC);
    if u % 2 == 0 {
        // Every other unit names its partition; the rest go where the sticky partitioner says.
        records = records.with_partition((u % 3) as i32);
    }
    for v in &values {
        records.push(Bytes::from(v.clone()));
    }
    let single = ProducerRecord::new(TOPIC, format!("{who}-{u:04}-single"));
    (records, values, single)
}

#[test]
fn units_land_whole_in_order_at_the_offset_their_report_names() {
    let broker = Broker::start();
    create_topic(&broker, TOPIC, PARTITIONS);
    let mut reported: Reported = Vec::new();

    let blocking = producer(&broker, Acks::All);
    let mut deliveries = Vec::new();
    for u in 0..UNITS {
        let (records, values, single) = unit("blocking", u);
        deliveries.push((
            values,
            blocking.send_records(records).expect("send_records"),
        ));
        let value = String::from_utf8_lossy(single.value.as_deref().unwrap_or_default());
        let value = value.into_owned();
        deliveries.push((vec![value], blocking.send(single).expect("send")));
    }
    for (values, delivery) in deliveries {
        reported.push((values, delivery.wait()));
    }
    blocking.close(30_000).expect("close the blocking producer");

    let bootstrap = broker.native_addr().to_string();
    let from_glommio = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { produce_glommio(&bootstrap).await })
        .expect("an executor")
        .join()
        .expect("the glommio producer's executor");
    reported.extend(from_glommio);

    // Every record of a unit at the unit's offset plus its place, each offset once.
    let mut at = BTreeMap::new();
    let mut records = 0;
    for (values, outcome) in &reported {
        let md = outcome
            .as_ref()
            .unwrap_or_else(|e| panic!("{values:?}: {e}"));
        assert!(md.offset >= 0, "{values:?}: offset {}", md.offset);
        for (i, v) in values.iter().enumerate() {
            let previous = at.insert((md.partition, md.offset + i as i64), v.clone());
            assert!(previous.is_none(), "{v} and {previous:?} at one offset");
            records += 1;
        }
    }
    assert_eq!(
        records,
        2 * (UNITS + (0..UNITS).map(|u| u % 7 + 1).sum::<usize>())
    );
    assert_reads_back(&broker, TOPIC, PARTITIONS, &at);
}

async fn produce_glommio(bootstrap: &str) -> Reported {
    let p = glommio_io::Producer::new(&[bootstrap], producer_config(Acks::All))
        .expect("a glommio producer");
    let outcomes: Rc<RefCell<Reported>> = Rc::default();
    for u in 0..UNITS {
        let (records, values, single) = unit("glommio", u);
        let sink = Rc::clone(&outcomes);
        p.send_records_with(records, move |o| sink.borrow_mut().push((values, o)))
            .await
            .expect("send_records_with");
        let value = String::from_utf8_lossy(single.value.as_deref().unwrap_or_default());
        let value = vec![value.into_owned()];
        let sink = Rc::clone(&outcomes);
        p.send_with(single, move |o| sink.borrow_mut().push((value, o)))
            .await
            .expect("send_with");
    }
    p.close(30_000).await.expect("close the glommio producer");
    Rc::try_unwrap(outcomes)
        .unwrap_or_else(|_| panic!("a callback still holds the outcomes"))
        .into_inner()
}
