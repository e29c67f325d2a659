//! `spool cluster local --nodes N`: a real N-broker cluster on this machine, as child processes
//! (DESIGN §10): node `i` (1-based) runs `spool serve` on 127.0.0.`i` with the usual ports, its
//! data in `<data-dir>/node-i`, rack `a`, `b`, `c`, … Nodes 1 to 3 are the controller voters
//! (Kafka's usual quorum of three: more voters make every metadata commit wait for more of them);
//! nodes past the third follow the metadata log as learners. It prints
//! where each listens, then waits; Ctrl-C or SIGTERM stops the nodes one at a time with SIGTERM,
//! as a rolling restart would, so each hands its leaderships to the nodes still running (a
//! controlled shutdown) before it stops cleanly: learners first, then voters while the voters
//! left keep a majority, then that last majority together — one of them alone would find no
//! quorum to hand off through and wait out its whole `--controlled-shutdown-timeout-ms`. The
//! nodes run in their own process group, so a terminal's Ctrl-C reaches this command only and
//! the order holds. A node that dies (say a test or an operator `kill -9`s it) is reported and
//! the others keep running, as a real cluster would; the command ends when every node has
//! exited. It has no restart of its own: stop a node with `kill -TERM <pid>` (a controlled
//! shutdown) and start it again with the command line `ps` shows.
//!
//! Kills only the processes it started, by PID. The addresses need no setup on Linux: all of
//! 127/8 is loopback.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Most nodes one local cluster runs (127.0.0.1 to 127.0.0.9, racks a to i).
pub const LOCAL_NODES_MAX: u32 = 9;
/// How long a stopping node may take before it is killed: its whole controlled-shutdown bound,
/// then its drain (at most 10 s), and a margin for closing partitions.
const STOP_GRACE_MS: u64 = crate::cluster_config::CONTROLLED_SHUTDOWN_TIMEOUT_MS_DEFAULT + 15_000;

#[derive(Debug, clap::Args)]
pub struct LocalArgs {
    /// How many brokers (the first three are the controller voters; the others learners).
    #[arg(long, default_value_t = 3)]
    pub nodes: u32,
    /// Parent of the nodes' data directories (`node-1`, `node-2`, …).
    #[arg(long, default_value = "./spool-data")]
    pub data_dir: PathBuf,
    /// Cores each broker uses (default 1: N brokers share this machine).
    #[arg(long, default_value_t = 1)]
    pub cores: usize,
}

/// Where node `i` (1-based) listens.
pub fn node_host(i: u32) -> String {
    format!("127.0.0.{i}")
}

/// The rack of node `i` (1-based): `a`, `b`, `c`, …
pub fn node_rack(i: u32) -> String {
    char::from(b'a' + (i - 1) as u8).to_string()
}

/// The CPUs node `i` (1-based) is pinned to: `cores` of the `allowed` ones, each node's window
/// starting where the previous one's ended (wrapping), so N one-core nodes on a machine of M
/// cores spread over all of them instead of sharing the first. Ascending, as `--cpuset` takes it.
pub fn node_cpus(allowed: &[usize], cores: usize, i: u32) -> Vec<usize> {
    assert!(!allowed.is_empty() && cores <= allowed.len() && i >= 1);
    let start = (i as usize - 1) * cores;
    let mut cpus: Vec<usize> = (0..cores)
        .map(|k| allowed[(start + k) % allowed.len()])
        .collect();
    cpus.sort_unstable();
    cpus
}

/// Controller voters of a local cluster, at most (the rest of the nodes are learners).
pub const LOCAL_VOTERS_MAX: u32 = 3;

/// The `--controller-voters` value of an `n`-node local cluster: its first
/// [`LOCAL_VOTERS_MAX`] nodes.
pub fn voters(n: u32) -> String {
    (1..=n.min(LOCAL_VOTERS_MAX))
        .map(|i| format!("{i}@{}:9094", node_host(i)))
        .collect::<Vec<_>>()
        .join(",")
}

pub fn run(args: LocalArgs) -> Result<(), String> {
    if args.nodes == 0 || args.nodes > LOCAL_NODES_MAX {
        return Err(format!(
            "--nodes must be between 1 and {LOCAL_NODES_MAX}, got {}",
            args.nodes
        ));
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding the spool binary: {e}"))?;
    let allowed =
        crate::cpuset::allowed().map_err(|e| format!("reading this process's CPUs: {e}"))?;
    if args.cores == 0 || args.cores > allowed.len() {
        return Err(format!(
            "--cores must be between 1 and the {} CPUs this process may use, got {}",
            allowed.len(),
            args.cores
        ));
    }
    crate::stop_signal::install();
    let mut children: Vec<(u32, Child)> = Vec::new();
    for i in 1..=args.nodes {
        let dir = args.data_dir.join(format!("node-{i}"));
        let cpus = crate::cpuset::format(&node_cpus(&allowed, args.cores, i));
        let child = Command::new(&exe)
            .arg("serve")
            .args(["--node-id", &i.to_string()])
            .args(["--host", &node_host(i)])
            .arg("--data-dir")
            .arg(&dir)
            .args(["--cores", &args.cores.to_string()])
            .args(["--cpuset", &cpus])
            .args(["--rack", &node_rack(i)])
            .args(["--controller-voters", &voters(args.nodes)])
            // Its own process group: a terminal's Ctrl-C (SIGINT to the foreground group) must
            // not stop every node at once, only this command, which then stops them in order.
            .process_group(0)
            .spawn();
        match child {
            Ok(c) => children.push((i, c)),
            Err(e) => {
                stop_in_order(&mut children, args.nodes);
                return Err(format!("starting node {i}: {e}"));
            }
        }
        let pid = children.last().map_or(0, |(_, c)| c.id());
        println!(
            "node {i} (pid {pid}): native {h}:9093  kafka {h}:9092  internal {h}:9094  admin http://{h}:9644  rack {r}  cpus {cpus}  data {}",
            dir.display(),
            h = node_host(i),
            r = node_rack(i),
        );
    }
    println!(
        "{} nodes running (controller quorum {}); Ctrl-C stops them all",
        args.nodes,
        voters(args.nodes)
    );
    let mut exited = vec![false; children.len()];
    while !crate::stop_signal::requested() && exited.iter().any(|e| !e) {
        std::thread::sleep(Duration::from_millis(100));
        for (k, (i, c)) in children.iter_mut().enumerate() {
            if exited[k] {
                continue;
            }
            if let Ok(Some(status)) = c.try_wait() {
                exited[k] = true;
                println!("node {i} exited ({status}); the others keep running");
            }
        }
    }
    stop_in_order(&mut children, args.nodes);
    if exited.iter().all(|e| *e) {
        return Err("every node exited".into());
    }
    Ok(())
}

/// The order an `n`-node cluster stops in: groups of node ids, each group stopped (together)
/// after the previous one exited. Learners one at a time, then voters one at a time while the
/// voters left keep a majority, then that majority together (see the module docs).
pub fn stop_groups(n: u32) -> Vec<Vec<u32>> {
    let voters = n.min(LOCAL_VOTERS_MAX);
    let majority = voters / 2 + 1;
    let mut groups: Vec<Vec<u32>> = ((voters + 1)..=n).rev().map(|i| vec![i]).collect();
    groups.extend(((majority + 1)..=voters).rev().map(|i| vec![i]));
    groups.push((1..=majority.min(voters)).collect());
    groups.retain(|g| !g.is_empty());
    groups
}

/// Stops the children of an `n`-node cluster in [`stop_groups`] order: SIGTERM to each one of a
/// group still running, then wait (bounded) for the group; SIGKILL to any that outlasts it.
fn stop_in_order(children: &mut [(u32, Child)], n: u32) {
    for group in stop_groups(n) {
        let mut members: Vec<&mut (u32, Child)> = children
            .iter_mut()
            .filter(|(i, _)| group.contains(i))
            .collect();
        stop_together(&mut members);
    }
}

/// SIGTERM to every one of `children` still running, then wait (bounded); SIGKILL to any that
/// outlasts it.
fn stop_together(children: &mut [&mut (u32, Child)]) {
    for (i, c) in children.iter_mut().map(|e| (e.0, &mut e.1)) {
        if let Ok(None) = c.try_wait() {
            if let Ok(pid) = i32::try_from(c.id()) {
                println!("node {i}: stopping (SIGTERM: it hands its leaderships away first)");
                // SAFETY: kill(2) with a PID this process spawned and has not reaped (try_wait
                // said it is running), so the PID cannot have been reused by another process.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
    }
    let deadline = Instant::now() + Duration::from_millis(STOP_GRACE_MS);
    for (i, c) in children.iter_mut().map(|e| (e.0, &mut e.1)) {
        loop {
            match c.try_wait() {
                Ok(Some(status)) => {
                    println!("node {i} stopped ({status})");
                    break;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                    println!("node {i} killed (no clean stop within {STOP_GRACE_MS} ms)");
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_core_nodes_spread_over_the_machine_before_sharing() {
        let two = [0, 1];
        let got: Vec<Vec<usize>> = (1..=3).map(|i| node_cpus(&two, 1, i)).collect();
        assert_eq!(got, vec![vec![0], vec![1], vec![0]]);
        let mask = [2, 3, 5, 7];
        let got: Vec<Vec<usize>> = (1..=3).map(|i| node_cpus(&mask, 2, i)).collect();
        assert_eq!(got, vec![vec![2, 3], vec![5, 7], vec![2, 3]]);
        let got: Vec<Vec<usize>> = (1..=2).map(|i| node_cpus(&mask, 3, i)).collect();
        assert_eq!(got, vec![vec![2, 3, 5], vec![2, 3, 7]]);
    }

    #[test]
    fn three_nodes_get_three_addresses_racks_and_one_quorum() {
        assert_eq!(
            voters(3),
            "1@127.0.0.1:9094,2@127.0.0.2:9094,3@127.0.0.3:9094"
        );
        assert_eq!((node_rack(1), node_rack(3)), ("a".into(), "c".into()));
        let parsed = crate::cluster_config::parse_voters(&voters(LOCAL_NODES_MAX)).unwrap();
        assert_eq!(
            parsed.len(),
            LOCAL_VOTERS_MAX as usize,
            "three voters, the rest learn"
        );
        assert_eq!(voters(1), "1@127.0.0.1:9094");
    }

    #[test]
    fn nodes_stop_one_at_a_time_and_the_last_quorum_together() {
        assert_eq!(stop_groups(1), vec![vec![1]]);
        assert_eq!(
            stop_groups(2),
            vec![vec![1, 2]],
            "two voters: both are the majority"
        );
        assert_eq!(stop_groups(3), vec![vec![3], vec![1, 2]]);
        assert_eq!(stop_groups(5), vec![vec![5], vec![4], vec![3], vec![1, 2]]);
        for n in 1..=LOCAL_NODES_MAX {
            let mut all: Vec<u32> = stop_groups(n).concat();
            all.sort_unstable();
            assert_eq!(all, (1..=n).collect::<Vec<_>>(), "every node once, n = {n}");
        }
    }
}
