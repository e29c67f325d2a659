//! The broker's fdatasync histogram (`spool_log_fdatasync_seconds`, Kafka's
//! `LogFlushRateAndTimeMs`): acknowledged writes under the default durability `fsync` each
//! waited for an fdatasync, and `/metrics` counts them in cumulative buckets that agree with the
//! count of fdatasyncs issued.

use spool_protocol::client::producer::Acks;
use spool_protocol::client::ProducerRecord;
use spool_tests::client::{create_topic, producer};
use spool_tests::{http, Broker};

const TOPIC: &str = "synced";

#[test]
fn acknowledged_fsync_writes_show_in_the_fdatasync_histogram() {
    let broker = Broker::start();
    create_topic(&broker, TOPIC, 2);
    let before = http::sum(&broker.metrics(), "spool_log_fdatasync_seconds_count", "");
    let p = producer(&broker, Acks::All);
    // One at a time: each acknowledgement waits for its own fdatasync.
    for i in 0..20 {
        let record = ProducerRecord::new(TOPIC, format!("v{i}")).with_partition(i % 2);
        let delivered = p.send(record).expect("send").wait();
        delivered.unwrap_or_else(|e| panic!("record {i}: {e}\n{}", broker.log_tail()));
    }
    p.close(30_000).expect("close");

    let m = broker.metrics();
    let count = http::sum(&m, "spool_log_fdatasync_seconds_count", "");
    assert!(
        count >= before + 20.0,
        "20 acknowledged writes, {} fdatasyncs counted:\n{m}",
        count - before
    );
    let issued = http::sum(&m, "spool_log_fdatasyncs", "");
    assert!(issued >= count, "finished {count} > issued {issued}:\n{m}");
    let inf = http::sum(&m, "spool_log_fdatasync_seconds_bucket", "le=\"+Inf\"");
    assert_eq!(inf, count, "the +Inf bucket holds every finished one:\n{m}");
    // Cumulative: each bucket holds at least the ones below it.
    let mut below = 0.0;
    let mut buckets = 0;
    for line in m
        .lines()
        .filter(|l| l.starts_with("spool_log_fdatasync_seconds_bucket{core=\"0\""))
    {
        let n: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(n >= below, "buckets are cumulative: {line} after {below}");
        below = n;
        buckets += 1;
    }
    assert_eq!(buckets, 12, "11 bounds and +Inf on core 0:\n{m}");
    let sum_s = http::sum(&m, "spool_log_fdatasync_seconds_sum", "");
    assert!(sum_s > 0.0, "fdatasyncs take some time:\n{m}");
}
