//! A cluster of `spool serve` processes under test (DESIGN §7, §11): N brokers on their own
//! loopback addresses, every one a controller voter (`--controller-voters` names them all, each
//! with its own `--internal-port`), racks `a`, `b`, `c`, … Each node is a [`Broker`], so it is
//! killed by PID when the cluster drops, and can be `kill9`ed, paused and restarted on its data.
//!
//! Reads what the nodes say about themselves from `/metrics` (the controller and image gauges of
//! `broker/src/controller_metrics.rs`); every wait is bounded and fails with the nodes' logs.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::broker::{Broker, BrokerOptions};

/// Bound on a cluster agreeing on something after a start or a fault.
pub const AGREE_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

pub struct Cluster {
    /// Node `i` (1-based id) is `nodes[i - 1]`: the voters first, then learners.
    pub nodes: Vec<Broker>,
    /// The `--controller-voters` every node was started with.
    voters: String,
    /// The `--controller-voters` count.
    voter_count: usize,
    /// Each node's `--internal-port`, by node id − 1.
    internal_ports: Vec<u16>,
}

/// How long a broker the cluster must refuse may run before the test calls it a failure (the
/// duplicate-id refusal waits out three session timeouts, 4.5 s by default).
pub const REFUSAL_TIMEOUT: Duration = Duration::from_secs(30);

impl Cluster {
    /// Starts `n` voters, one core each.
    pub fn start(n: usize) -> Self {
        Self::start_with_args(n, &[])
    }

    /// Starts `n` voters, one core each, each with `extra` flags too.
    pub fn start_with_args(n: usize, extra: &[&str]) -> Self {
        Self::start_with_data_dirs(n, extra, &[])
    }

    /// [`Cluster::start_with_args`], with node `i`'s data in `data_dirs[i - 1]` where that is
    /// given (a loop-mounted filesystem, say) instead of its scratch directory.
    pub fn start_with_data_dirs(
        n: usize,
        extra: &[&str],
        data_dirs: &[Option<std::path::PathBuf>],
    ) -> Self {
        let addrs: Vec<(Ipv4Addr, Vec<u16>)> = (0..n)
            .map(|_| {
                let ip = crate::addr::next_address();
                (ip, crate::addr::free_ports(ip, 4))
            })
            .collect();
        let voters: Vec<String> = addrs
            .iter()
            .enumerate()
            .map(|(i, (ip, ports))| format!("{}@{ip}:{}", i + 1, ports[3]))
            .collect();
        let voters = voters.join(",");
        let nodes = addrs
            .iter()
            .enumerate()
            .map(|(i, (ip, ports))| {
                let options = BrokerOptions {
                    cores: 1,
                    address: Some((*ip, [ports[0], ports[1], ports[2]])),
                    data_dir: data_dirs.get(i).cloned().flatten(),
                    ..BrokerOptions::default()
                }
                .arg("--node-id")
                .arg((i + 1).to_string())
                .arg("--controller-voters")
                .arg(voters.clone())
                .arg("--internal-port")
                .arg(ports[3].to_string())
                .arg("--rack")
                .arg(char::from(b'a' + i as u8).to_string());
                let options = extra.iter().fold(options, |o, a| o.arg(*a));
                Broker::start_with(options)
            })
            .collect();
        Cluster {
            nodes,
            voters,
            voter_count: n,
            internal_ports: addrs.iter().map(|(_, ports)| ports[3]).collect(),
        }
    }

    /// The options of a broker with node id `node_id` that joins this cluster without voting,
    /// on a fresh address.
    fn joiner(&self, node_id: i32, extra: &[&str]) -> (BrokerOptions, u16) {
        let ip = crate::addr::next_address();
        let ports = crate::addr::free_ports(ip, 4);
        let options = BrokerOptions {
            cores: 1,
            address: Some((ip, [ports[0], ports[1], ports[2]])),
            ..BrokerOptions::default()
        }
        .arg("--node-id")
        .arg(node_id.to_string())
        .arg("--controller-voters")
        .arg(self.voters.clone())
        .arg("--internal-port")
        .arg(ports[3].to_string());
        (extra.iter().fold(options, |o, a| o.arg(*a)), ports[3])
    }

    /// Starts the next node id as a broker outside the voters (it follows the metadata log as
    /// a learner); returns its id.
    pub fn add_learner(&mut self, extra: &[&str]) -> i32 {
        let id = self.nodes.len() as i32 + 1;
        let (options, internal_port) = self.joiner(id, extra);
        let broker = Broker::start_with(options);
        self.nodes.push(broker);
        self.internal_ports.push(internal_port);
        id
    }

    /// The node ids that vote.
    pub fn voter_ids(&self) -> Vec<i32> {
        (1..=self.voter_count as i32).collect()
    }

    /// Runs `spool serve` as node `node_id` joining this cluster from a fresh address (with its
    /// data in `data_dir`), expecting to be refused: returns how it ended and its output once
    /// it exits; panics if it is still running after [`REFUSAL_TIMEOUT`].
    pub fn serve_refused(
        &self,
        node_id: i32,
        data_dir: &std::path::Path,
        extra: &[&str],
    ) -> crate::process::Finished {
        let options = BrokerOptions {
            data_dir: Some(data_dir.to_path_buf()),
            ..self.joiner(node_id, extra).0
        };
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let mut cmd = std::process::Command::new(crate::binary::spool_binary());
        let (ip, ports) = options.address.expect("an address");
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--host")
            .arg(ip.to_string())
            .arg("--native-port")
            .arg(ports[0].to_string())
            .arg("--admin-port")
            .arg(ports[1].to_string())
            .arg("--kafka-port")
            .arg(ports[2].to_string())
            .arg("--cores")
            .arg("1")
            .args(&options.extra_args);
        crate::broker::clear_spool_env(&mut cmd);
        crate::process::run_to_end(&mut cmd, b"", scratch.path(), REFUSAL_TIMEOUT)
    }

    /// Node `id`'s internal port (raft, controller calls, replica fetches).
    pub fn internal_port(&self, id: i32) -> u16 {
        self.internal_ports[id as usize - 1]
    }

    pub fn node(&self, id: i32) -> &Broker {
        &self.nodes[id as usize - 1]
    }

    pub fn node_mut(&mut self, id: i32) -> &mut Broker {
        &mut self.nodes[id as usize - 1]
    }

    /// Waits until every node agrees on one active controller and sees every node registered
    /// and unfenced; returns the controller's id.
    pub fn wait_healthy(&self) -> i32 {
        let all: Vec<i32> = (1..=self.nodes.len() as i32).collect();
        let n = self.nodes.len() as i64;
        let controller = self.wait_until("one active controller all agree on", |c| {
            c.agreed_controller(&all)
        });
        self.wait_until("every broker registered and unfenced on every node", |c| {
            all.iter()
                .all(|&i| {
                    c.gauge(i, "spool_registered_brokers") == Some(n)
                        && c.gauge(i, "spool_fenced_brokers") == Some(0)
                })
                .then_some(())
        });
        controller
    }

    /// One gauge of node `id`'s `/metrics` (`None` when absent or the node does not answer).
    pub fn gauge(&self, id: i32, name: &str) -> Option<i64> {
        let text = crate::http::get(self.node(id).admin_addr(), "/metrics").ok()?;
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.trim().parse().ok()).flatten()
        })
    }

    /// Waits until `check` holds (at most [`AGREE_TIMEOUT`]); panics with every node's log tail.
    pub fn wait_until<T>(&self, what: &str, mut check: impl FnMut(&Cluster) -> Option<T>) -> T {
        let deadline = Instant::now() + AGREE_TIMEOUT;
        loop {
            if let Some(t) = check(self) {
                return t;
            }
            if Instant::now() >= deadline {
                let logs: Vec<String> = self.nodes.iter().map(Broker::log_tail).collect();
                panic!("{what}: not within {AGREE_TIMEOUT:?}\n{}", logs.join("\n"));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The active controller all of `ids` agree on, once exactly one of them says it is active.
    pub fn agreed_controller(&self, ids: &[i32]) -> Option<i32> {
        let active: Vec<i32> = ids
            .iter()
            .copied()
            .filter(|&i| self.gauge(i, "spool_controller_active") == Some(1))
            .collect();
        let [leader] = active[..] else {
            return None;
        };
        ids.iter()
            .all(|&i| self.gauge(i, "spool_controller_leader_id") == Some(i64::from(leader)))
            .then_some(leader)
    }

    /// The image digest all of `ids` share, once they have applied the same metadata.
    pub fn agreed_digest(&self, ids: &[i32]) -> Option<i64> {
        let digests: Vec<Option<i64>> = ids
            .iter()
            .map(|&i| self.gauge(i, "spool_metadata_image_digest"))
            .collect();
        let first = digests.first().copied().flatten()?;
        digests.iter().all(|d| *d == Some(first)).then_some(first)
    }
}

/// One partition as `spool topic describe` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRow {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Eligible leader replicas (KIP-966).
    pub eligible_leaders: Vec<i32>,
    /// Replicas on fenced or unregistered brokers.
    pub offline: Vec<i32>,
}

/// Parses `spool topic describe T`'s partition rows (`0  2  0  [2, 3, 1]  [2, 3, 1]  []  []`:
/// partition, leader, leader epoch, replicas, ISR, eligible leaders, offline replicas).
pub fn parse_describe(out: &str) -> Vec<PartitionRow> {
    let list = |s: &str| -> Option<Vec<i32>> {
        s.trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .filter(|x| !x.trim().is_empty())
            .map(|x| x.trim().parse().ok())
            .collect()
    };
    out.lines()
        .filter_map(|l| {
            let (head, lists) = l.split_once('[')?;
            let mut nums = head.split_whitespace().map(|x| x.parse::<i32>().ok());
            let (partition, leader, leader_epoch) = (nums.next()??, nums.next()??, nums.next()??);
            let lists = format!("[{lists}");
            let mut lists = lists.split("  ").filter(|x| !x.trim().is_empty()).map(list);
            let (replicas, isr) = (lists.next()??, lists.next()??);
            let (eligible_leaders, offline) = (lists.next()??, lists.next()??);
            Some(PartitionRow {
                partition,
                leader,
                leader_epoch,
                replicas,
                isr,
                eligible_leaders,
                offline,
            })
        })
        .collect()
}

impl Cluster {
    /// `topic`'s partitions as node `id` describes them.
    pub fn describe(&self, id: i32, topic: &str) -> Vec<PartitionRow> {
        let f = crate::cli::spool(self.node(id), &["topic", "describe", topic], "");
        if f.status.success() {
            parse_describe(&f.stdout)
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_describe_rows() {
        // As `spool topic describe` prints them (broker/src/cli.rs).
        let row = |p: i32, l: i32, e: i32, r: &[i32], i: &[i32], elr: &[i32], o: &[i32]| {
            format!(
                "{:>9}  {:>6}  {:>12}  {:>12}  {:>12}  {:>12}  {:?}\n",
                p,
                l,
                e,
                format!("{r:?}"),
                format!("{i:?}"),
                format!("{elr:?}"),
                o
            )
        };
        let out = format!(
            "topic orders (2 partitions)\nPARTITION  LEADER  LEADER-EPOCH      REPLICAS           ISR           ELR  OFFLINE\n{}{}",
            row(0, 2, 0, &[2, 3, 1], &[2, 3, 1], &[], &[]),
            row(1, -1, 4, &[3, 1, 2], &[3], &[2], &[1]),
        );
        let rows = parse_describe(&out);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].replicas, vec![2, 3, 1]);
        assert!(rows[0].offline.is_empty());
        assert_eq!(
            rows[1],
            PartitionRow {
                partition: 1,
                leader: -1,
                leader_epoch: 4,
                replicas: vec![3, 1, 2],
                isr: vec![3],
                eligible_leaders: vec![2],
                offline: vec![1],
            }
        );
    }
}

/// One broker row of `spool cluster info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRow {
    pub node_id: i32,
    pub epoch: i64,
    /// `active` or `fenced`.
    pub state: String,
    /// The metadata offset it reports having applied; `None` when it did not answer.
    pub applied: Option<u64>,
    pub lag: Option<u64>,
}

/// What `spool cluster info` printed: the cluster id, the broker rows, and the quorum line's
/// controller, voters and learners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    pub cluster_id: String,
    pub brokers: Vec<InfoRow>,
    pub controller: Option<i32>,
    pub voters: Vec<i32>,
    pub learners: Vec<i32>,
}

fn ids_after(line: &str, key: &str) -> Vec<i32> {
    line.split(key)
        .nth(1)
        .and_then(|rest| rest.split_once('[').map(|(_, r)| r))
        .and_then(|rest| rest.split_once(']').map(|(l, _)| l))
        .map(|l| l.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Parses `spool cluster info`'s output (its columns: BROKER ADDRESS RACK EPOCH STATE METADATA
/// LAG, then a `controller N  term …  voters [..]  learners [..]` line).
pub fn parse_cluster_info(out: &str) -> ClusterInfo {
    let mut info = ClusterInfo {
        cluster_id: String::new(),
        brokers: Vec::new(),
        controller: None,
        voters: Vec::new(),
        learners: Vec::new(),
    };
    for line in out.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        match cols.first() {
            Some(&"cluster") => info.cluster_id = cols.get(1).unwrap_or(&"").to_string(),
            Some(&"controller") => {
                info.controller = cols.get(1).and_then(|c| c.parse().ok());
                info.voters = ids_after(line, "voters");
                info.learners = ids_after(line, "learners");
            }
            Some(first) if cols.len() == 7 && first.parse::<i32>().is_ok() => {
                info.brokers.push(InfoRow {
                    node_id: first.parse().unwrap_or(-1),
                    epoch: cols[3].parse().unwrap_or(-1),
                    state: cols[4].to_string(),
                    applied: cols[5].parse().ok(),
                    lag: cols[6].parse().ok(),
                });
            }
            _ => {}
        }
    }
    info
}

impl Cluster {
    /// `spool cluster info` asked through node `id`, parsed.
    pub fn info(&self, id: i32) -> ClusterInfo {
        parse_cluster_info(&crate::cli::spool_ok(
            self.node(id),
            &["cluster", "info"],
            "",
        ))
    }
}
