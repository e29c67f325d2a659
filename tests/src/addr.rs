//! Loopback addresses and free ports for brokers under test.
//!
//! Every broker gets its own 127.0.x.y (all of 127.0.0.0/8 is loopback on Linux): `x` comes from
//! this process's id, `y` from a per-process counter, so tests running in parallel threads — and
//! other test processes, and an engineer's broker on 127.0.0.1 — never share an address. Ports are
//! whatever the kernel hands out for a bind to port 0 on that address, so nothing else on the
//! machine holds them either. A broker keeps its address and ports across restarts.

use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};

/// Addresses handed out by this process so far.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// Distinct addresses per process before the counter wraps (far more than one run starts).
const ADDRESSES_PER_PROCESS: u32 = 250 * 250;

/// A fresh loopback address, never 127.0.0.1.
pub fn next_address() -> Ipv4Addr {
    let n = NEXT.fetch_add(1, Ordering::Relaxed) % ADDRESSES_PER_PROCESS;
    // 127.0.0.x is left to people; each process starts at its own third octet.
    let base = 1 + std::process::id() % 200;
    let third = (base + n / 250) % 250 + 1;
    let fourth = n % 250 + 2;
    Ipv4Addr::new(127, 0, third as u8, fourth as u8)
}

/// `count` distinct ports free on `ip` right now. All listeners are held until every port is
/// picked, so the ports differ from each other.
pub fn free_ports(ip: Ipv4Addr, count: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..count)
        .map(|_| TcpListener::bind((ip, 0)).expect("binding a free port on a loopback address"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("a bound listener's address").port())
        .collect()
}
