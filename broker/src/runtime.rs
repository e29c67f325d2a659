//! `spool serve`: one pinned glommio executor per core, joined by a channel mesh; core 0 also
//! runs the controller and the admin HTTP endpoint. Owns start-up (data-dir lock, port checks,
//! the controller's image reaching every core before any listener opens) and shutdown (SIGTERM or
//! SIGINT: a clustered broker first hands its leaderships away while it keeps serving
//! ([`crate::controlled_shutdown`]); then stop accepting, finish in-flight requests, flush and
//! close every partition cleanly, exit 0).

use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use glommio::channels::channel_mesh::MeshBuilder;
use glommio::net::TcpListener;
use glommio::{LocalExecutorBuilder, Placement};

use crate::accept::{accept_clients_until_stopped, accept_until_stopped};
use crate::config::BrokerConfig;
use crate::conn_limits::ConnectionGate;
use crate::controller::Controller;
use crate::requests::ApplyMetadata;
use crate::router::{Envelope, MESH_CHANNEL_CAPACITY};
use crate::shard::Shard;

/// How often cores look at the stop flag ([`crate::stop_signal`]).
const STOP_POLL_MS: u64 = 50;
/// How long shutdown waits for open connections to finish their requests.
const DRAIN_TIMEOUT_MS: u64 = 10_000;

/// Takes an exclusive lock on the data directory for the process's lifetime.
fn lock_data_dir(config: &BrokerConfig) -> Result<std::fs::File, String> {
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| format!("cannot create data dir {}: {e}", config.data_dir.display()))?;
    let path = config.data_dir.join(".broker.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(format!(
            "data dir {} is in use by another spool broker (lock {})",
            config.data_dir.display(),
            path.display()
        ));
    }
    Ok(f)
}

/// glommio sets SO_REUSEPORT on every listener, so a second broker on the same port would bind
/// silently and steal connections (DESIGN §12). So before binding, ask the port: if anything
/// accepts a connection there, another broker (or program) is listening. A bind-based probe is
/// not used because connections of a broker killed a moment ago linger (FIN_WAIT) and would make
/// a legitimate restart fail. A killed broker's listeners also outlive it by some milliseconds
/// (its io_uring instances are torn down asynchronously), so a listener must keep answering for
/// [`PORT_PROBE_MS`] before the port counts as taken.
fn check_port_free(host: &str, port: u16, what: &str) -> Result<(), String> {
    use std::net::{TcpStream, ToSocketAddrs};
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}:{port} ({what}): {e}"))?
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(PORT_PROBE_MS);
    loop {
        let taken = addrs
            .iter()
            .any(|a| TcpStream::connect_timeout(a, std::time::Duration::from_millis(500)).is_ok());
        if !taken {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "cannot listen on {host}:{port} ({what}): something is already listening there — is another broker running?"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// How long a port must keep accepting connections before start-up calls it taken.
const PORT_PROBE_MS: u64 = 2_000;

pub fn serve(config: BrokerConfig) -> Result<(), String> {
    let _lock = lock_data_dir(&config)?;
    check_port_free(&config.host, config.native_port, "native port")?;
    check_port_free(&config.host, config.admin_port, "admin port")?;
    check_port_free(&config.host, config.kafka_port, "Kafka port")?;
    if config.clustered() {
        check_port_free(&config.host, config.internal_port, "internal port")?;
    }
    crate::stop_signal::install();
    let gate = std::sync::Arc::new(connection_gate(&config)?);
    let mut config = config;
    // A fresh incarnation id per process start (KIP-631). Entropy is drawn here, at the edge.
    config.incarnation = spool_raft::Uuid128 {
        high: crate::clock::entropy_seed(),
        low: crate::clock::entropy_seed() | 1,
    };
    let config = std::sync::Arc::new(config);
    let phases = std::sync::Arc::new(ShutdownPhases::default());
    // Threads started from here on (glommio's helpers included) inherit the set, so nothing of
    // the broker runs outside it; each executor is then pinned to its own CPU of the set.
    crate::cpuset::restrict_current_thread(&config.cpus).map_err(|e| e.to_string())?;
    tracing::info!(
        cpus = %crate::cpuset::format(&config.cpus),
        "{} executors pinned one per CPU, in order",
        config.cores
    );
    let mesh = MeshBuilder::<Envelope, _>::full(config.cores, MESH_CHANNEL_CAPACITY);
    // Every handle is cloned before any executor starts (DESIGN §12: joining while handles are
    // still being cloned can hang the join).
    let meshes: Vec<_> = (0..config.cores).map(|_| mesh.clone()).collect();
    drop(mesh);
    let mut handles = Vec::new();
    for (core, mesh) in meshes.into_iter().enumerate() {
        let config = std::sync::Arc::clone(&config);
        let phases = std::sync::Arc::clone(&phases);
        let gate = std::sync::Arc::clone(&gate);
        let cpu = config.cpus[core];
        // The registered buffer area: glommio falls back to the heap (and unregistered I/O)
        // where the memlock limit refuses the registration, so this never stops a start.
        let io_memory_bytes = usize::try_from(config.io_memory_bytes).unwrap_or(usize::MAX);
        let h = LocalExecutorBuilder::new(Placement::Fixed(cpu))
            .name(&format!("spool-core-{core}"))
            .io_memory(io_memory_bytes)
            .spawn(
                move || async move { run_core(core, (*config).clone(), mesh, phases, gate).await },
            )
            .map_err(|e| format!("cannot start executor {core} on CPU {cpu}: {e}"))?;
        handles.push(h);
    }
    let mut first_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(format!("a core failed: {e}"));
            }
        }
    }
    if let Some(reason) = crate::stop_signal::failure() {
        first_error.get_or_insert_with(|| reason.to_string());
    }
    match first_error {
        Some(e) => Err(e),
        None => {
            tracing::info!("spool stopped cleanly");
            Ok(())
        }
    }
}

/// Raises the open-files limit to the hard limit, sizes `--max-connections` from it when unset,
/// and reports both in one line; an explicit limit that leaves less than a quarter of the
/// open-files limit for everything else (segment files, peers) gets a warning.
fn connection_gate(config: &BrokerConfig) -> Result<ConnectionGate, String> {
    let files = crate::conn_limits::raise_open_files_limit()?;
    let max_connections = config
        .max_connections
        .unwrap_or_else(|| crate::conn_limits::default_max_connections(files.soft_now));
    let per_ip = config
        .max_connections_per_ip
        .map_or_else(|| "no bound of its own".to_string(), |n| n.to_string());
    tracing::info!(
        open_files_limit = files.soft_now,
        "open-files limit {} (soft limit was {}, hard limit {}); client connections at most {max_connections} (--max-connections), per address {per_ip} (--max-connections-per-ip)",
        files.soft_now,
        files.soft_before,
        files.hard
    );
    let headroom = files.soft_now / 4;
    if max_connections as u64 > files.soft_now.saturating_sub(headroom) {
        tracing::warn!(
            "--max-connections {max_connections} leaves less than a quarter of the open-files limit ({}) for segment files and peers",
            files.soft_now
        );
    }
    Ok(ConnectionGate::new(
        max_connections,
        config.max_connections_per_ip,
    ))
}

/// One line on the request-memory budget; a warning when a core's share is below
/// `--max-frame-bytes` (frames between the two are refused).
fn log_request_memory(config: &BrokerConfig, per_core_bytes: usize) {
    tracing::info!(
        "request memory {} bytes ({per_core_bytes} per core; --request-memory-bytes)",
        config.request_memory_bytes
    );
    if per_core_bytes < config.max_frame_bytes {
        tracing::warn!(
            "a core's request memory ({per_core_bytes} bytes) is below --max-frame-bytes ({}): frames larger than it are refused",
            config.max_frame_bytes
        );
    }
}

/// Shutdown is two barriers across cores, so no core leaves while another may still ask it
/// something: every core first drains its connections (each still answering the others' mesh
/// requests), then every core closes its partitions, then all exit. Counters, not locks: they are
/// touched only at shutdown, never on the data path.
#[derive(Default)]
struct ShutdownPhases {
    drained: std::sync::atomic::AtomicUsize,
    closed: std::sync::atomic::AtomicUsize,
}

/// Waits (serving the mesh meanwhile) until `counter` reaches `cores`, at most `DRAIN_TIMEOUT_MS`;
/// whether every core got there.
async fn barrier(counter: &std::sync::atomic::AtomicUsize, cores: usize) -> bool {
    counter.fetch_add(1, Ordering::SeqCst);
    let mut waited = 0;
    while counter.load(Ordering::SeqCst) < cores && waited < DRAIN_TIMEOUT_MS {
        glommio::timer::sleep(Duration::from_millis(10)).await;
        waited += 10;
    }
    counter.load(Ordering::SeqCst) >= cores
}

async fn run_core(
    core: usize,
    config: BrokerConfig,
    mesh: MeshBuilder<Envelope, glommio::channels::channel_mesh::Full>,
    phases: std::sync::Arc<ShutdownPhases>,
    gate: std::sync::Arc<ConnectionGate>,
) -> Result<(), String> {
    let (senders, receivers) = mesh
        .join()
        .await
        .map_err(|_| "joining the core mesh failed".to_string())?;
    // Mesh peer ids follow the order executors joined, not the order they were created: the
    // shard takes its peer id as its index, so `send_to(i)` always reaches shard i. The CPU the
    // executor is pinned to does not matter for routing.
    let cpu = core;
    let core = senders.peer_id();
    tracing::debug!(cpu, core, "joined the core mesh");
    // After the mesh join (a core leaving before it would hang the others) and before this
    // executor opens any DMA file (raft log, segments); otherwise glommio may send every
    // segment write to its polled ring on a disk without poll queues (DESIGN §12).
    if let Err(e) = spool_storage::poll_probe::settle(&config.data_dir).await {
        crate::stop_signal::request();
        return Err(format!("cannot probe the data directory's disk: {e}"));
    }
    let request_memory_bytes =
        usize::try_from(config.request_memory_bytes / config.cores as u64).unwrap_or(usize::MAX);
    crate::request_memory::install(request_memory_bytes);
    crate::frame_pins::install(crate::frame_pins::bound_for(
        request_memory_bytes,
        config.max_frame_bytes,
    ));
    let response_memory_bytes =
        usize::try_from(config.response_memory_bytes / config.cores as u64).unwrap_or(usize::MAX);
    crate::response_memory::install(response_memory_bytes);
    if core == 0 {
        log_request_memory(&config, request_memory_bytes);
        tracing::info!(
            "response memory {} bytes ({response_memory_bytes} per core; --response-memory-bytes)",
            config.response_memory_bytes
        );
    }
    let shard = Shard::new(Rc::new(config), senders);
    debug_assert_eq!(shard.core, core);
    shard.spawn_receivers(receivers);
    spawn_stop_watcher(&shard);
    if core == 0 {
        let incarnation = shard.config.incarnation;
        let seed = crate::clock::entropy_seed();
        let opened =
            Controller::open(&shard.local, Rc::clone(&shard.router), incarnation, seed).await;
        let (controller, image) = match opened {
            Ok(c) => c,
            Err(e) => {
                crate::stop_signal::request();
                return Err(format!(
                    "cannot start the controller in {}: {e}",
                    shard.config.data_dir.display()
                ));
            }
        };
        *shard.controller.borrow_mut() = Some(Rc::clone(&controller));
        let records: Vec<Vec<u8>> = spool_raft::image_snapshot::image_records(&image)
            .iter()
            .filter_map(|r| spool_protocol::metadata_log::encode(r).ok())
            .collect();
        for (core, applied) in shard
            .broadcast(|| ApplyMetadata {
                records: records.clone(),
                replace: true,
            })
            .await
            .into_iter()
            .enumerate()
        {
            if let Err(e) = applied {
                crate::stop_signal::request();
                return Err(format!("core {core} did not apply the start-up image: {e}"));
            }
        }
        controller.spawn_ticker(Rc::clone(&shard.local), Rc::clone(&shard));
        if shard.config.clustered() {
            let cfg = &shard.config;
            let internal =
                TcpListener::bind((cfg.host.as_str(), cfg.internal_port)).map_err(|e| {
                    format!(
                        "cannot listen on {}:{} (internal): {e}",
                        cfg.host, cfg.internal_port
                    )
                })?;
            let me = Rc::clone(&shard);
            glommio::spawn_local(async move {
                accept_until_stopped(&me, &internal, "internal", crate::internal_server::serve)
                    .await;
            })
            .detach();
            crate::broker_session::spawn(
                Rc::clone(&controller),
                Rc::clone(&shard.local),
                Rc::clone(&shard),
                (incarnation.high, incarnation.low),
            );
        }
        crate::admin_http::spawn(&shard)?;
    }
    futures_lite::future::or(shard.until_ready(), async {
        let _: Option<()> = shard.stopped_signal().await;
    })
    .await;
    spawn_maintenance(&shard);
    shard.groups.spawn_ticker();
    shard.txns.spawn_ticker();
    crate::txn_markers::spawn(&shard);
    if shard.config.clustered() {
        crate::replication::spawn(&shard);
    }
    let listener = TcpListener::bind((shard.config.host.as_str(), shard.config.native_port))
        .map_err(|e| {
            format!(
                "core {core}: cannot listen on {}:{}: {e}",
                shard.config.host, shard.config.native_port
            )
        })?;
    if core == 0 {
        tracing::info!(
            "spool serving on {}:{} (native), {}:{} (Kafka, advertised {}:{}), {}:{} (admin), {} cores, data in {}",
            shard.config.host,
            shard.config.native_port,
            shard.config.host,
            shard.config.kafka_port,
            shard.config.advertised_host,
            shard.config.advertised_kafka_port,
            shard.config.host,
            shard.config.admin_port,
            shard.config.cores,
            shard.config.data_dir.display()
        );
    }
    let kafka_listener = TcpListener::bind((shard.config.host.as_str(), shard.config.kafka_port))
        .map_err(|e| {
        format!(
            "core {core}: cannot listen on {}:{} (Kafka): {e}",
            shard.config.host, shard.config.kafka_port
        )
    })?;
    futures_lite::future::zip(
        accept_clients_until_stopped(&shard, &listener, "native", &gate, crate::connection::serve),
        accept_clients_until_stopped(&shard, &kafka_listener, "Kafka", &gate, crate::kafka::serve),
    )
    .await;
    drop(listener);
    drop(kafka_listener);
    // Drain: connections stop reading new requests and finish what they have.
    let mut waited = 0;
    while shard.metrics.connections.get() > 0 && waited < DRAIN_TIMEOUT_MS {
        glommio::timer::sleep(Duration::from_millis(20)).await;
        waited += 20;
    }
    let open = shard.metrics.connections.get();
    if open > 0 {
        // A request that outlives the drain waits on something the stop does not end (an
        // acks=all waiter nobody releases, say): worth a line, as its client saw it time out.
        tracing::warn!(
            connections = open,
            "connections still busy after the {DRAIN_TIMEOUT_MS} ms drain: closing them with their requests unanswered"
        );
    }
    let _ = barrier(&phases.drained, shard.cores()).await;
    crate::net_io::close_kept_direct_files().await;
    crate::maintenance::close_partitions(&shard.local).await;
    let all_closed = barrier(&phases.closed, shard.cores()).await;
    // Every core flushed and closed its partitions, and nothing made the process stop on its
    // own: a clean shutdown, which the next start tells the controller (KIP-966).
    if core == 0 && all_closed && crate::stop_signal::failure().is_none() {
        let controller = shard.controller.borrow().clone();
        if let Some(c) = controller {
            c.record_clean_shutdown(shard.config.data_dir.clone()).await;
        }
    }
    if core == 0 {
        crate::controlled_shutdown::log_leaderships_at_exit(&shard.local);
    }
    Ok(())
}

/// Once a stop is asked for, stops this core — on core 0 after the controlled shutdown, on the
/// others once core 0 releases them (both bounded), so every core keeps serving its partitions
/// while the leaderships move.
fn spawn_stop_watcher(shard: &Rc<Shard>) {
    let shard = Rc::clone(shard);
    glommio::spawn_local(async move {
        while !crate::stop_signal::requested() {
            glommio::timer::sleep(Duration::from_millis(STOP_POLL_MS)).await;
        }
        if shard.core == 0 {
            let controller = shard.controller.borrow().clone();
            crate::controlled_shutdown::hand_off_then_release(controller, &shard.config).await;
        } else {
            crate::controlled_shutdown::wait_for_release(&shard.config).await;
        }
        shard.stop();
    })
    .detach();
}

/// Periodic work of one core: making acks=0 appends durable and visible, retention, compaction.
fn spawn_maintenance(shard: &Rc<Shard>) {
    let me = Rc::clone(shard);
    glommio::spawn_local(async move {
        let interval = me.config.flush_interval_ms;
        let mut since_retention = 0u64;
        while !me.stopping.get() {
            glommio::timer::sleep(Duration::from_millis(interval)).await;
            crate::maintenance::flush_partitions(&me.local).await;
            since_retention += interval;
            if since_retention >= me.config.log_retention_check_interval_ms {
                since_retention = 0;
                crate::maintenance::enforce_retention(&me.local, crate::clock::now_ms()).await;
            }
        }
    })
    .detach();
}
