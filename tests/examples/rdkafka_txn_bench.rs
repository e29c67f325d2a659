//! Transactional produce against plain idempotent produce, with librdkafka, in one run (issue
//! 18 item 8): the same messages sent both ways, alternating rounds, to a running broker.
//!
//! ```sh
//! spool serve &                                        # or spool cluster local
//! spool topic create txbench --partitions 8
//! cargo run --release -p spool-tests --example rdkafka_txn_bench -- \
//!     [--bootstrap 127.0.0.1:9092] [--topic txbench] [--messages 200000] [--per-txn 100] \
//!     [--bytes 1024] [--rounds 3] [--linger-ms 5]
//! ```
//!
//! Each round sends `--messages` messages of `--bytes` bytes round-robin over the topic's
//! partitions: first with an idempotent producer (acks=all), then with a transactional one
//! committing every `--per-txn` messages. Prints per round and mode the MB/s, and for the
//! transactional mode the commit latency (p50, p99, max: from the last send to
//! `commit_transaction`'s return, delivery reports served by [`drain`] first), then
//! `RESULT txn_produce_mbps=… idempotent_produce_mbps=… txn_ratio=… commit_p50_ms=…
//! commit_p99_ms=…` (medians over the rounds).

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientContext;

/// librdkafka's log lines (those `RDKAFKA_DEBUG` asks for) on stderr, with wall-clock ms.
struct Logs;

impl ClientContext for Logs {
    fn log(&self, _level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        eprintln!("{ms} {fac} {log_message}");
    }
}

impl rdkafka::producer::ProducerContext for Logs {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::producer::DeliveryResult<'_>, _: Self::DeliveryOpaque) {}
}

type Prod = BaseProducer<Logs>;

struct Args {
    bootstrap: String,
    topic: String,
    messages: usize,
    per_txn: usize,
    bytes: usize,
    rounds: usize,
    partitions: i32,
    linger_ms: usize,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        bootstrap: "127.0.0.1:9092".into(),
        topic: "txbench".into(),
        messages: 200_000,
        per_txn: 100,
        bytes: 1024,
        rounds: 3,
        partitions: 8,
        linger_ms: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = || value.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--bootstrap" => a.bootstrap = value.clone(),
            "--topic" => a.topic = value.clone(),
            "--messages" => a.messages = num()?.max(1),
            "--per-txn" => a.per_txn = num()?.max(1),
            "--bytes" => a.bytes = num()?,
            "--rounds" => a.rounds = num()?.max(1),
            "--partitions" => a.partitions = num()?.max(1) as i32,
            "--linger-ms" => a.linger_ms = num()?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

fn producer(a: &Args, transactional_id: Option<&str>) -> Prod {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &a.bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", a.linger_ms.to_string())
        .set("queue.buffering.max.messages", "1000000");
    if let Ok(ms) = std::env::var("RDKAFKA_RETRY_BACKOFF_MS") {
        c.set("retry.backoff.ms", ms);
    }
    if let Some(id) = transactional_id {
        c.set("transactional.id", id);
    }
    // librdkafka's own trace (say `eos,protocol`), to see where a commit's time goes.
    if let Ok(contexts) = std::env::var("RDKAFKA_DEBUG") {
        c.set("debug", contexts)
            .set_log_level(RDKafkaLogLevel::Debug);
    }
    c.create_with_context(Logs).expect("a producer")
}

fn send(p: &Prod, a: &Args, i: usize, payload: &[u8]) {
    let mut record = BaseRecord::<(), [u8]>::to(&a.topic)
        .payload(payload)
        .partition((i % a.partitions as usize) as i32);
    loop {
        match p.send(record) {
            Ok(()) => {
                // Delivery reports are served here, by this thread (a BaseProducer): a
                // ThreadedProducer's poller wakes every 100 ms, and librdkafka's commit waits
                // for the reports, so every commit would take 100 ms.
                p.poll(Duration::ZERO);
                return;
            }
            Err((_, r)) => {
                // The local queue is full: serve delivery reports to drain it.
                record = r;
                p.poll(Duration::from_millis(1));
            }
        }
    }
}

/// Serves delivery reports until none is outstanding. The `rdkafka` crate's
/// `commit_transaction` flushes first, and its flush polls in steps of 100 ms
/// (`BaseProducer::poll` runs to its deadline even after an event), so a commit with a report
/// still to come would take 100 ms in the wrapper alone; draining here leaves librdkafka's
/// own commit (its flush, then EndTxn) to be measured.
fn drain(p: &Prod) {
    while p.in_flight_count() > 0 {
        p.poll(Duration::from_micros(200));
    }
}

/// MB/s of an idempotent run.
fn idempotent(a: &Args, payload: &[u8]) -> f64 {
    let p = producer(a, None);
    let start = Instant::now();
    for i in 0..a.messages {
        send(&p, a, i, payload);
    }
    p.flush(Duration::from_secs(120)).expect("flush");
    mbps(a, start.elapsed())
}

/// MB/s of a transactional run, and its commit latencies in ms, sorted.
fn transactional(a: &Args, payload: &[u8], round: usize) -> (f64, Vec<f64>) {
    let p = producer(a, Some(&format!("txbench-{round}")));
    let t = Duration::from_secs(60);
    p.init_transactions(t).expect("init_transactions");
    let mut commits = Vec::new();
    let start = Instant::now();
    let mut i = 0;
    while i < a.messages {
        p.begin_transaction().expect("begin");
        let end = (i + a.per_txn).min(a.messages);
        while i < end {
            send(&p, a, i, payload);
            i += 1;
        }
        let c = Instant::now();
        drain(&p);
        p.commit_transaction(t).expect("commit");
        commits.push(c.elapsed().as_secs_f64() * 1e3);
    }
    let elapsed = start.elapsed();
    commits.sort_by(f64::total_cmp);
    (mbps(a, elapsed), commits)
}

fn mbps(a: &Args, d: Duration) -> f64 {
    (a.messages * a.bytes) as f64 / 1e6 / d.as_secs_f64()
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), String> {
    let a = args()?;
    let payload = vec![b'x'; a.bytes];
    let (mut idem, mut txn, mut p50, mut p99) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..a.rounds {
        let i = idempotent(&a, &payload);
        let (t, commits) = transactional(&a, &payload, round);
        println!(
            "round {round}: idempotent {i:.1} MB/s; transactional {t:.1} MB/s ({} per txn), \
             commit p50 {:.2} ms p99 {:.2} ms max {:.2} ms over {} commits",
            a.per_txn,
            pct(&commits, 0.5),
            pct(&commits, 0.99),
            pct(&commits, 1.0),
            commits.len()
        );
        idem.push(i);
        txn.push(t);
        p50.push(pct(&commits, 0.5));
        p99.push(pct(&commits, 0.99));
    }
    let (i, t) = (median(idem), median(txn));
    println!(
        "RESULT txn_produce_mbps={t:.1} idempotent_produce_mbps={i:.1} txn_ratio={:.3} \
         commit_p50_ms={:.2} commit_p99_ms={:.2}",
        t / i,
        median(p50),
        median(p99)
    );
    Ok(())
}
