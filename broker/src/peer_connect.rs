//! Outgoing connections to other brokers' internal ports, made from this broker's own address.
//!
//! Owns: [`connect_from`]. A connection's source address is the broker's `--host` (when it names
//! one address, not `0.0.0.0`), so that every packet between two brokers carries both brokers'
//! addresses: an operator's firewall rule — or a fault test's iptables DROP between 127.0.0.2
//! and 127.0.0.3 — cuts exactly the link it names. Without it the kernel picks the source (on
//! loopback, 127.0.0.1 for every broker), and one rule would cut several links, or none.
//!
//! glommio's `TcpStream::connect` cannot bind first, so the socket is bound and connected on the
//! executor's blocking pool (`spool_storage::run_blocking`), then handed to glommio. Connections
//! are opened rarely (one per peer and core, again after a failure), and each attempt waits at
//! most its timeout on that pool, never on the reactor.

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use glommio::net::TcpStream;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Connects to `host:port` from `local` (any port), within `timeout`.
pub async fn connect_from(
    local: Option<IpAddr>,
    host: &str,
    port: u16,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let target = format!("{host}:{port}");
    let socket = spool_storage::run_blocking(move || -> io::Result<Socket> {
        let addr: SocketAddr = target.to_socket_addrs()?.next().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{target} resolves to nothing"),
            )
        })?;
        let domain = if addr.is_ipv6() {
            Domain::IPV6
        } else {
            Domain::IPV4
        };
        let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
        if let Some(ip) = local.filter(|ip| !ip.is_unspecified() && ip.is_ipv6() == addr.is_ipv6())
        {
            socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
        }
        socket.connect_timeout(&SockAddr::from(addr), timeout)?;
        Ok(socket)
    })
    .await?;
    Ok(TcpStream::from(socket))
}

/// The address a broker's outgoing internal connections come from: its `--host`, when that is
/// one address.
pub fn source_ip(host: &str) -> Option<IpAddr> {
    host.parse::<IpAddr>()
        .ok()
        .filter(|ip| !ip.is_unspecified())
}
