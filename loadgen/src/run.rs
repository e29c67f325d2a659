//! Runs one load: makes sure the topic exists, starts one glommio executor per `--cores` (thread
//! per core; unpinned unless `--cpuset` names CPUs, because the broker under test usually pins
//! the same machine's cores) with its share of producers and consumers, prints progress, then
//! merges the executors' histograms, counters and verification bookkeeping into the report.

use std::cell::RefCell;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use glommio::{LocalExecutorBuilder, Placement};
use spool_protocol::client::admin::{AdminConfig, NewTopic};
use spool_protocol::client::glommio_io::Admin;
use spool_protocol::ErrorCode;

use crate::cli::Settings;
use crate::core_state::CoreState;
use crate::report::{write_files, Outcome};
use crate::shared::Shared;
use crate::stats::{progress_loop, Totals};
use crate::verify::{AckLog, Verifier};

/// Exit status when verification finds a lost, duplicated or reordered message.
pub const EXIT_VERIFY_FAILED: u8 = 3;
/// Bound on creating (or describing) the topic, retries included.
const ADMIN_TIMEOUT_MS: u64 = 15_000;

/// Where client executor `i` runs: unbound, or the `--cpuset` CPUs round robin.
fn placement(settings: &Settings, i: usize) -> Placement {
    match &settings.cpus {
        Some(cpus) if !cpus.is_empty() => Placement::Fixed(cpus[i % cpus.len()]),
        _ => Placement::Unbound,
    }
}

fn ensure_topic(settings: &Settings) -> Result<(), String> {
    let brokers: Vec<String> = settings.brokers().iter().map(|s| s.to_string()).collect();
    let o = settings.opts.clone();
    let handle = LocalExecutorBuilder::new(placement(settings, 0))
        .name("loadgen-admin")
        .spawn(move || async move {
            let refs: Vec<&str> = brokers.iter().map(String::as_str).collect();
            // A broker that is not there should fail the run in seconds, not a minute.
            let config = AdminConfig {
                client_id: "loadgen-admin".into(),
                request_timeout_ms: ADMIN_TIMEOUT_MS,
                operation_timeout_ms: ADMIN_TIMEOUT_MS,
                ..AdminConfig::default()
            };
            let mut admin = Admin::new(&refs, config).map_err(|e| format!("admin: {e}"))?;
            let created = admin
                .create_topics(vec![NewTopic::new(
                    o.topic.clone(),
                    o.partitions,
                    o.replication_factor,
                )])
                .await
                .map_err(|e| format!("create topic {}: {e}", o.topic))?;
            for (name, result) in created {
                match result {
                    Ok(()) => {}
                    Err(e) if e.error_code() == Some(ErrorCode::TopicAlreadyExists) => {
                        let described = admin
                            .describe_topics(vec![name.clone()])
                            .await
                            .map_err(|e| format!("describe {name}: {e}"))?;
                        for (_, d) in described {
                            let d = d.map_err(|e| format!("describe {name}: {e}"))?;
                            if d.partitions.len() != o.partitions as usize {
                                return Err(format!(
                                    "topic {name} exists with {} partitions, not --partitions {}",
                                    d.partitions.len(),
                                    o.partitions
                                ));
                            }
                        }
                    }
                    Err(e) => return Err(format!("create topic {name}: {e}")),
                }
            }
            Ok(())
        })
        .map_err(|e| format!("cannot start the admin executor: {e}"))?;
    handle
        .join()
        .map_err(|e| format!("admin executor failed: {e}"))?
}

struct CoreResult {
    totals: Totals,
    acks: AckLog,
    verifier: Verifier,
    errors: Vec<String>,
}

async fn core_main(core: usize, sh: Arc<Shared>) -> CoreResult {
    let st = Rc::new(RefCell::new(CoreState::new(sh.run_id)));
    let live = sh.lives[core].clone();
    let s = &sh.settings;
    let cores = s.opts.cores;
    let mut tasks = Vec::new();
    if s.kind.consumes() {
        for id in (core..s.opts.consumers).step_by(cores) {
            let t = crate::consumer::run(id, sh.clone(), st.clone(), live.clone());
            tasks.push(glommio::spawn_local(t));
        }
    }
    if s.kind.produces() {
        for id in (core..s.opts.producers).step_by(cores) {
            let (sh2, st2, live2) = (sh.clone(), st.clone(), live.clone());
            tasks.push(glommio::spawn_local(async move {
                let r = crate::producer::run(id, sh2.clone(), st2, live2).await;
                sh2.producers_done
                    .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                r
            }));
        }
    }
    for t in tasks {
        if let Err(e) = t.await {
            st.borrow_mut().error(e);
        }
    }
    let mut st = st.borrow_mut();
    if st.errors_dropped > 0 {
        let n = st.errors_dropped;
        st.errors.push(format!("… and {n} more errors"));
    }
    CoreResult {
        totals: std::mem::take(&mut st.totals),
        acks: std::mem::take(&mut st.acks),
        verifier: std::mem::replace(&mut st.verifier, Verifier::new(sh.run_id)),
        errors: std::mem::take(&mut st.errors),
    }
}

pub fn run(settings: Settings) -> Result<ExitCode, String> {
    if let Some(cpus) = &settings.cpus {
        // Every thread started from here on (progress, glommio's helpers) inherits the set.
        crate::cpuset::restrict_current_thread(cpus).map_err(|e| e.to_string())?;
    }
    ensure_topic(&settings)?;
    let sh = Arc::new(Shared::new(settings));
    let stop = Arc::new(AtomicBool::new(false));
    let progress = if sh.settings.opts.quiet {
        None
    } else {
        let (lives, stop) = (sh.lives.clone(), stop.clone());
        Some(std::thread::spawn(move || progress_loop(lives, stop)))
    };
    let mut handles = Vec::new();
    for core in 0..sh.settings.opts.cores {
        let sh = sh.clone();
        let h = LocalExecutorBuilder::new(placement(&sh.settings, core))
            .name(&format!("loadgen-{core}"))
            .spawn(move || async move { core_main(core, sh).await })
            .map_err(|e| format!("cannot start client executor {core}: {e}"))?;
        handles.push(h);
    }
    let mut totals = Totals::default();
    let mut acks = AckLog::default();
    let mut verifier = Verifier::new(sh.run_id);
    let mut errors = Vec::new();
    for (core, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(r) => {
                totals.merge(&r.totals);
                acks.merge(r.acks);
                verifier.merge(r.verifier);
                errors.extend(r.errors);
            }
            Err(e) => errors.push(format!("client executor {core} failed: {e}")),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    let window = match (sh.started(), totals.last_event) {
        (Some(start), Some(last)) => last.saturating_duration_since(start + sh.settings.warmup),
        _ => std::time::Duration::ZERO,
    };
    let verify = sh.settings.opts.verify.then(|| verifier.report(&acks));
    let outcome = Outcome {
        settings: &sh.settings,
        totals: &totals,
        window,
        verify,
        errors: &errors,
        cpu_s: crate::cpu_time::process_cpu_s(),
    };
    print!("{}", outcome.text());
    write_files(&outcome)?;
    if verify.is_some_and(|v| !v.passed()) {
        return Ok(ExitCode::from(EXIT_VERIFY_FAILED));
    }
    if !errors.is_empty() || totals.failed_sends > 0 {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn settings(args: &[&str]) -> Settings {
        Settings::from_cli(crate::cli::Cli::try_parse_from(args).expect("flags")).expect("valid")
    }

    #[test]
    fn executors_go_round_robin_over_the_cpuset_or_unbound() {
        let s = settings(&["x", "produce", "--cores", "3"]);
        assert_eq!(placement(&s, 2), Placement::Unbound);
        let allowed = crate::cpuset::allowed().expect("affinity");
        let list = crate::cpuset::format(&allowed);
        let s = settings(&["x", "produce", "--cores", "3", "--cpuset", &list]);
        for i in 0..3 {
            assert_eq!(
                placement(&s, i),
                Placement::Fixed(allowed[i % allowed.len()])
            );
        }
    }
}
