//! The final report of a run: text on stdout (ending in one `LOADGEN key=value …` line that
//! scripts grep; it includes the bytes moved and the process's own CPU seconds, `cpu_s`, so a
//! script can state the load generator's cost per GB), JSON (`--json FILE`) and HdrHistogram percentile distributions (`--hgrm`), the
//! format HdrHistogram's plotter reads. Values in the `.hgrm` files are milliseconds.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::json;

use crate::cli::Settings;
use crate::stats::{pct_ms, rates, Totals};
use crate::verify::VerifyReport;

/// Everything the report needs.
pub struct Outcome<'a> {
    pub settings: &'a Settings,
    pub totals: &'a Totals,
    pub window: Duration,
    pub verify: Option<VerifyReport>,
    pub errors: &'a [String],
    /// This process's CPU seconds (user + system, all threads) over the whole run.
    pub cpu_s: f64,
}

const PERCENTILES: [(&str, f64); 5] = [
    ("p50", 50.0),
    ("p90", 90.0),
    ("p99", 99.0),
    ("p99_9", 99.9),
    ("max", 100.0),
];

fn latency_line(name: &str, h: &Histogram<u64>) -> String {
    let mut s = format!("{name:<8} latency ms ({} samples):", h.len());
    for (label, p) in PERCENTILES {
        let _ = write!(s, " {label} {:.3}", pct_ms(h, p));
    }
    s
}

fn latency_json(h: &Histogram<u64>) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("samples".into(), json!(h.len()));
    m.insert("mean_ms".into(), json!(h.mean() / 1000.0));
    for (label, p) in PERCENTILES {
        m.insert(format!("{label}_ms"), json!(pct_ms(h, p)));
    }
    serde_json::Value::Object(m)
}

impl Outcome<'_> {
    fn produce_rates(&self) -> (f64, f64) {
        rates(self.totals.acked_msgs, self.totals.acked_bytes, self.window)
    }

    fn consume_rates(&self) -> (f64, f64) {
        rates(
            self.totals.consumed_msgs,
            self.totals.consumed_bytes,
            self.window,
        )
    }

    pub fn text(&self) -> String {
        let s = self.settings;
        let o = &s.opts;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "spool-loadgen {}: topic {} partitions {} producers {} consumers {} message_bytes {} keys {:?} acks {:?} compression {:?} batch_bytes {} linger_ms {} rate {} cores {}",
            s.kind.name(), o.topic, o.partitions, o.producers, o.consumers, o.message_bytes,
            o.keys, s.acks, s.compression, o.batch_bytes, o.linger_ms,
            o.rate.map_or("unlimited".to_string(), |r| format!("{r} msg/s")), o.cores
        );
        let _ = writeln!(
            out,
            "window {:.2} s (after {:.1} s warm-up)",
            self.window.as_secs_f64(),
            s.warmup.as_secs_f64()
        );
        if s.kind.produces() {
            let (m, mb) = self.produce_rates();
            let _ = writeln!(
                out,
                "produce: {} msgs acked, {m:.0} msg/s, {mb:.1} MB/s (values; MB = 10^6 B), {} failed sends",
                self.totals.acked_msgs, self.totals.failed_sends
            );
            let _ = writeln!(
                out,
                "{}",
                latency_line("produce", &self.totals.latencies.produce_us)
            );
            if !self.totals.latencies.commit_us.is_empty() {
                let _ = writeln!(
                    out,
                    "{}",
                    latency_line("commit", &self.totals.latencies.commit_us)
                );
            }
            let _ = writeln!(
                out,
                "longest time between two acknowledgements: {:.3} ms",
                self.totals.ack_gap_max_us as f64 / 1000.0
            );
        }
        if s.kind.consumes() {
            let (m, mb) = self.consume_rates();
            let _ = writeln!(
                out,
                "consume: {} msgs, {m:.0} msg/s, {mb:.1} MB/s",
                self.totals.consumed_msgs
            );
        }
        if s.kind == crate::cli::Kind::E2e {
            let _ = writeln!(
                out,
                "{}",
                latency_line("e2e", &self.totals.latencies.e2e_us)
            );
        }
        for e in self.errors.iter().take(10) {
            let _ = writeln!(out, "error: {e}");
        }
        if let Some(v) = self.verify {
            let _ = writeln!(
                out,
                "verify: acked {} received {} lost {} duplicated {} reordered {} failed_sends {} foreign {} -> {}",
                v.acked, v.received_unique, v.lost, v.duplicated, v.reordered, v.failed_sends,
                v.foreign, if v.passed() { "PASS" } else { "FAIL" }
            );
        }
        let (pm, pmb) = self.produce_rates();
        let (cm, cmb) = self.consume_rates();
        let l = &self.totals.latencies;
        let _ = writeln!(
            out,
            "LOADGEN mode={} produce_msgs_per_s={pm:.0} produce_mbps={pmb:.2} produce_p50_ms={:.3} produce_p99_ms={:.3} produce_p999_ms={:.3} ack_gap_max_ms={:.3} e2e_p50_ms={:.3} e2e_p99_ms={:.3} commit_p50_ms={:.3} commit_p99_ms={:.3} commits={} consume_msgs_per_s={cm:.0} consume_mbps={cmb:.2} produce_bytes={} consume_bytes={} cpu_s={:.3} errors={}",
            s.kind.name(),
            pct_ms(&l.produce_us, 50.0),
            pct_ms(&l.produce_us, 99.0),
            pct_ms(&l.produce_us, 99.9),
            self.totals.ack_gap_max_us as f64 / 1000.0,
            pct_ms(&l.e2e_us, 50.0),
            pct_ms(&l.e2e_us, 99.0),
            pct_ms(&l.commit_us, 50.0),
            pct_ms(&l.commit_us, 99.0),
            l.commit_us.len(),
            self.totals.acked_bytes,
            self.totals.consumed_bytes,
            self.cpu_s,
            self.errors.len() as u64 + self.totals.failed_sends,
        );
        out
    }

    pub fn json(&self) -> serde_json::Value {
        let s = self.settings;
        let o = &s.opts;
        let (pm, pmb) = self.produce_rates();
        let (cm, cmb) = self.consume_rates();
        json!({
            "mode": s.kind.name(),
            "config": {
                "brokers": o.brokers, "topic": o.topic, "partitions": o.partitions,
                "producers": o.producers, "consumers": o.consumers,
                "message_bytes": o.message_bytes, "keys": format!("{:?}", o.keys),
                "acks": format!("{:?}", s.acks), "compression": format!("{:?}", s.compression),
                "batch_bytes": o.batch_bytes, "linger_ms": o.linger_ms, "rate_msgs_per_s": o.rate,
                "warmup_s": s.warmup.as_secs_f64(), "cores": o.cores, "verify": o.verify,
            },
            "window_s": self.window.as_secs_f64(),
            "produce": {
                "acked_msgs": self.totals.acked_msgs, "acked_bytes": self.totals.acked_bytes,
                "failed_sends": self.totals.failed_sends,
                "ack_gap_max_ms": self.totals.ack_gap_max_us as f64 / 1000.0,
                "msgs_per_s": pm, "mbps": pmb,
                "latency": latency_json(&self.totals.latencies.produce_us),
                "commit_latency": latency_json(&self.totals.latencies.commit_us),
            },
            "consume": {
                "msgs": self.totals.consumed_msgs, "bytes": self.totals.consumed_bytes,
                "msgs_per_s": cm, "mbps": cmb,
            },
            "e2e": { "latency": latency_json(&self.totals.latencies.e2e_us) },
            "verify": self.verify.map(|v| json!({
                "acked": v.acked, "received_unique": v.received_unique, "lost": v.lost,
                "duplicated": v.duplicated, "reordered": v.reordered,
                "failed_sends": v.failed_sends, "foreign": v.foreign, "passed": v.passed(),
            })),
            "cpu_s": self.cpu_s,
            "errors": self.errors,
        })
    }
}

/// HdrHistogram's percentile distribution (as `outputPercentileDistribution` writes it), values
/// scaled from µs to ms.
pub fn hgrm(h: &Histogram<u64>) -> String {
    let mut out = format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let q = v.quantile_iterated_to();
            let value_ms = v.value_iterated_to() as f64 / 1000.0;
            if q < 1.0 {
                let _ = writeln!(
                    out,
                    "{value_ms:12.3} {q:2.12} {total:10} {:14.2}",
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(out, "{value_ms:12.3} {q:2.12} {total:10}");
            }
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        h.max() as f64 / 1000.0,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}

/// Writes the JSON and `.hgrm` files asked for.
pub fn write_files(outcome: &Outcome<'_>) -> Result<(), String> {
    let o = &outcome.settings.opts;
    if let Some(path) = &o.json {
        let text = serde_json::to_string_pretty(&outcome.json()).map_err(|e| e.to_string())?;
        write(path, &text)?;
    }
    if let Some(prefix) = &o.hgrm {
        let l = &outcome.totals.latencies;
        if outcome.settings.kind.produces() {
            write(
                Path::new(&format!("{prefix}-produce.hgrm")),
                &hgrm(&l.produce_us),
            )?;
        }
        if outcome.settings.kind == crate::cli::Kind::E2e {
            write(Path::new(&format!("{prefix}-e2e.hgrm")), &hgrm(&l.e2e_us))?;
        }
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{new_histogram, record};

    #[test]
    fn loadgen_line_carries_bytes_moved_and_cpu_seconds_for_bench_sh() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["x", "e2e"]).expect("flags");
        let settings = Settings::from_cli(cli).expect("valid");
        let totals = Totals {
            acked_bytes: 123_000,
            consumed_bytes: 45_000,
            ..Totals::default()
        };
        let outcome = Outcome {
            settings: &settings,
            totals: &totals,
            window: Duration::from_secs(1),
            verify: None,
            errors: &[],
            cpu_s: 1.25,
        };
        let text = outcome.text();
        let line = text
            .lines()
            .find(|l| l.starts_with("LOADGEN "))
            .expect("line");
        let fields: Vec<&str> = line.split(' ').collect();
        for f in ["produce_bytes=123000", "consume_bytes=45000", "cpu_s=1.250"] {
            assert!(fields.contains(&f), "{f} in {line}");
        }
        assert_eq!(outcome.json()["cpu_s"], 1.25);
    }

    #[test]
    fn hgrm_has_header_rows_ending_at_100_percent_and_footer() {
        let mut h = new_histogram();
        for us in 1..=1000 {
            record(&mut h, us * 10);
        }
        let text = hgrm(&h);
        assert!(text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)"));
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.contains("Value"))
            .collect();
        assert!(rows.len() > 10);
        let last = rows.last().copied().unwrap_or_default();
        assert!(last.contains("1.000000000000") && last.trim_end().ends_with("1000"));
        assert!(text.contains("Total count    =         1000"));
        // An empty histogram still writes a valid (empty) file.
        assert!(hgrm(&new_histogram()).contains("Total count"));
    }
}
