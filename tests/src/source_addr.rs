//! A TCP connection from a chosen local address: std's `TcpStream::connect` cannot bind before
//! connecting, and tests of per-address limits need clients on more than one address (any
//! 127.x.y.z is local on Linux). Blocking, like the rest of the harness.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::FromRawFd;

/// Bound on making the connection.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Connects to `to` from `source` (port chosen by the kernel).
pub fn connect_from(source: Ipv4Addr, to: SocketAddr) -> io::Result<TcpStream> {
    let SocketAddr::V4(to) = to else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "connect_from: IPv4 only",
        ));
    };
    // SAFETY: socket() has no memory arguments; the descriptor it returns is owned by the
    // TcpStream made from it below (or closed on the error paths) and used by nothing else.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket() and nothing else owns it: the stream takes it
    // over and closes it on drop, including on every error path below.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    let sockaddr = |a: std::net::SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let from = sockaddr(std::net::SocketAddrV4::new(source, 0));
    // SAFETY: `from` is a live, initialised sockaddr_in and `len` is its size.
    if unsafe { libc::bind(fd, std::ptr::from_ref(&from).cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Linux bounds a blocking connect by the send timeout: a listener that never takes the
    // connection fails the test instead of hanging it.
    stream.set_write_timeout(Some(CONNECT_TIMEOUT))?;
    let dest = sockaddr(to);
    // SAFETY: `dest` is a live, initialised sockaddr_in and `len` is its size; the socket is
    // blocking, so connect returns once the connection is made or refused.
    if unsafe { libc::connect(fd, std::ptr::from_ref(&dest).cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stream)
}
