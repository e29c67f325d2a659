//! The admin endpoint over plain HTTP/1.1: one GET per connection, the body as text, and the
//! value of one Prometheus sample.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// `GET path`; the body of a 200 answer, or why there is none.
pub fn get(addr: SocketAddr, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .map_err(|e| format!("sending to {addr}: {e}"))?;
    let mut response = String::new();
    s.read_to_string(&mut response)
        .map_err(|e| format!("reading from {addr}: {e}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP head in {response:?}"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {head}"));
    }
    Ok(body.to_owned())
}

/// The value of the sample `name_and_labels` (e.g. `spool_partitions{core="0"}`) in Prometheus
/// text, if present.
pub fn sample(metrics: &str, name_and_labels: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(name_and_labels)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// The sum of every sample of metric `name` whose labels include `label` (e.g.
/// `reason="max_connections"`; empty: every sample), e.g. a per-core counter summed over cores.
pub fn sum(metrics: &str, name: &str, label: &str) -> f64 {
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => r.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            labels
                .contains(label)
                .then(|| value.trim().parse::<f64>().ok())?
        })
        .sum()
}
