//! librdkafka producing at acks=all into a running cluster while the leader of partition 0 is
//! killed: the replication issue's closing demonstration, against `spool cluster local`.
//!
//! ```sh
//! spool cluster local --nodes 3 &          # prints each node's PID
//! spool topic create demo --partitions 1 --replication-factor 3
//! cargo run -p spool-tests --example rdkafka_failover -- \
//!     --topic demo --pids 1=PID1,2=PID2,3=PID3 [--rate 2000] [--seconds 12] [--kill-after-s 4]
//! ```
//!
//! Sends `--rate` messages per second (idempotent producer, acks=all) for `--seconds`; after
//! `--kill-after-s` it asks the cluster who leads partition 0 and sends that node's process
//! SIGKILL — only a PID given in `--pids`. Then it reads the topic back through a broker still
//! alive (spool's own consumer, native port) and prints one line: messages sent, acknowledged,
//! read back, missing (acknowledged but not read), duplicated (read more than once), and the
//! failover gap (the longest time between two delivery reports).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use spool_protocol::client::blocking::Consumer;
use spool_protocol::client::consumer::{ConsumerConfig, OffsetReset, SeekTo};
use spool_protocol::client::TopicPartition;

/// One delivery report: sequence number, when it came, partition and offset or the error.
type Report = (u64, Instant, Result<(i32, i64), String>);

#[derive(Default)]
struct Deliveries {
    reports: Mutex<Vec<Report>>,
}

impl ClientContext for Deliveries {
    /// librdkafka's log lines (those `RDKAFKA_DEBUG` asks for among them) on stderr, with the
    /// wall-clock time in ms so they line up with the brokers' logs.
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, line: &str) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        eprintln!("{now_ms} rdkafka {level:?} {fac}: {line}");
    }
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, seq: usize) {
        let outcome = match result {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err(e.to_string()),
        };
        if let Ok(mut r) = self.reports.lock() {
            r.push((seq as u64, Instant::now(), outcome));
        }
    }
}

struct Args {
    host: String,
    topic: String,
    rate: u64,
    seconds: u64,
    kill_after_s: u64,
    pids: HashMap<i32, i32>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        host: "127.0.0.1".into(),
        topic: "demo".into(),
        rate: 2000,
        seconds: 12,
        kill_after_s: 4,
        pids: HashMap::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = || value.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--host" => a.host = value.clone(),
            "--topic" => a.topic = value.clone(),
            "--rate" => a.rate = num()?.max(1),
            "--seconds" => a.seconds = num()?,
            "--kill-after-s" => a.kill_after_s = num()?,
            "--pids" => {
                for pair in value.split(',') {
                    let (id, pid) = pair.split_once('=').ok_or("--pids takes ID=PID,...")?;
                    let id = id.parse().map_err(|e| format!("--pids: {e}"))?;
                    let pid = pid.parse().map_err(|e| format!("--pids: {e}"))?;
                    a.pids.insert(id, pid);
                }
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

/// Who leads partition 0 of `topic`, from librdkafka's metadata.
fn leader_of_partition_0(producer: &BaseProducer<Deliveries>, topic: &str) -> Option<i32> {
    let md = producer
        .client()
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .ok()?;
    let t = md.topics().iter().find(|t| t.name() == topic)?;
    t.partitions()
        .iter()
        .find(|p| p.id() == 0)
        .map(|p| p.leader())
}

fn main() -> Result<(), String> {
    let a = args()?;
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", format!("{}:9092", a.host))
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "1")
        .set("message.timeout.ms", "60000");
    // librdkafka's own trace of where a failover's time goes (say `metadata,topic,eos`).
    if let Ok(contexts) = std::env::var("RDKAFKA_DEBUG") {
        config
            .set("debug", contexts)
            .set_log_level(rdkafka::config::RDKafkaLogLevel::Debug);
    }
    let producer: BaseProducer<Deliveries> = config
        .create_with_context(Deliveries::default())
        .map_err(|e| format!("an rdkafka producer: {e}"))?;
    let total = a.rate * a.seconds;
    let started = Instant::now();
    let mut killed = None;
    for seq in 0..total {
        let due = started + Duration::from_micros(seq * 1_000_000 / a.rate);
        while Instant::now() < due {
            producer.poll(due.saturating_duration_since(Instant::now()));
        }
        if killed.is_none() && started.elapsed() >= Duration::from_secs(a.kill_after_s) {
            let leader =
                leader_of_partition_0(&producer, &a.topic).ok_or("no leader for partition 0")?;
            let pid = *a
                .pids
                .get(&leader)
                .ok_or(format!("no PID given for node {leader}"))?;
            // SAFETY: kill(2) with a PID the operator named; no memory is involved.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            eprintln!(
                "killed node {leader} (pid {pid}) at {:.1} s",
                started.elapsed().as_secs_f64()
            );
            killed = Some(leader);
        }
        let value = format!("m-{seq}");
        let record = BaseRecord::<(), String, usize>::with_opaque_to(&a.topic, seq as usize)
            .partition(0)
            .payload(&value);
        producer
            .send(record)
            .map_err(|(e, _)| format!("queueing {seq}: {e}"))?;
    }
    producer
        .flush(Duration::from_secs(90))
        .map_err(|e| format!("flush: {e}"))?;
    let mut reports =
        std::mem::take(&mut *producer.context().reports.lock().map_err(|_| "reports")?);
    reports.sort_by_key(|r| r.1);
    let gap_ms = reports
        .windows(2)
        .map(|w| w[1].1.duration_since(w[0].1).as_secs_f64() * 1000.0)
        .fold(0.0, f64::max);
    let acked: BTreeMap<i64, u64> = reports
        .iter()
        .filter_map(|(seq, _, r)| r.as_ref().ok().map(|(_, o)| (*o, *seq)))
        .collect();
    let failed = reports.iter().filter(|r| r.2.is_err()).count();
    // Read back through a broker that is alive.
    let survivor = (1..=3).find(|&i| Some(i) != killed).unwrap_or(1);
    let bootstrap = format!("127.0.0.{survivor}:9093");
    let config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        fetch_max_wait_ms: 200,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(&[&bootstrap], config).map_err(|e| e.to_string())?;
    let tp = TopicPartition::new(a.topic.clone(), 0);
    consumer.assign([tp.clone()]);
    consumer
        .seek(&tp, SeekTo::Earliest)
        .map_err(|e| e.to_string())?;
    let last = acked.keys().next_back().copied().unwrap_or(-1);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut at: BTreeMap<i64, String> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while at.keys().next_back().copied().unwrap_or(-1) < last && Instant::now() < deadline {
        for r in consumer.poll(500).map_err(|e| e.to_string())? {
            let v = r
                .value
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default();
            *seen.entry(v.clone()).or_default() += 1;
            at.insert(r.offset, v);
        }
    }
    let missing = acked
        .iter()
        .filter(|(o, seq)| at.get(o) != Some(&format!("m-{seq}")))
        .count();
    let duplicated = seen.values().filter(|&&n| n > 1).count();
    println!(
        "RESULT sent={total} acknowledged={} failed={failed} read_back={} missing={missing} duplicated={duplicated} failover_gap_ms={gap_ms:.0} killed_node={}",
        acked.len(),
        at.len(),
        killed.map_or("none".into(), |k| k.to_string())
    );
    Ok(())
}
