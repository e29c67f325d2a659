//! Connections for the glommio clients: glommio `TcpStream`s split into a write half (used by the
//! driving task) and a read half owned by a per-connection reader task, which decodes frames
//! (limits and verifier included) into a bounded local channel. Dropping a connection cancels its
//! reader task. A malformed response frame closes the connection, as in the blocking layer.

use std::collections::HashMap;
use std::net::ToSocketAddrs;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::io::{split, WriteHalf};
use futures_lite::AsyncWriteExt;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::TcpStream;
use glommio::Task;
use tracing::{debug, warn};

use crate::client::net::{Addr, ClientCore, NetAction};
use crate::codec::{decode_response, Response};
use crate::frame::{read_frame_async_with, FrameError, FrameLimits};
use crate::recv_lowat::RecvLowat;

/// Bytes read from a broker's socket at once (per connection): a bound on the client's memory,
/// and room for many small responses per `recv`.
const READ_BUFFER_BYTES: usize = 64 * 1024;

pub(crate) enum Event {
    Response {
        addr: Addr,
        conn_id: u64,
        response: Result<Response, FrameError>,
    },
    Closed {
        addr: Addr,
        conn_id: u64,
    },
    Wake,
}

struct Conn {
    id: u64,
    writer: WriteHalf<TcpStream>,
    _reader: Task<()>,
}

/// Longest a connection attempt may take (Kafka `socket.connection.setup.timeout.ms`): the
/// driving task waits on it, so an unreachable broker must not stall the others for long.
const MAX_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// Events queued between reader tasks and the driver; readers wait when it is full.
const EVENT_CAPACITY: usize = 1024;

pub(crate) struct AsyncNet {
    conns: HashMap<Addr, Conn>,
    tx: Rc<LocalSender<Event>>,
    rx: LocalReceiver<Event>,
    limits: FrameLimits,
    connect_timeout: Duration,
    /// Bound on one frame write (the request timeout).
    write_timeout: Duration,
    next_conn_id: u64,
}

pub(crate) fn now_ms() -> u64 {
    crate::client::blocking::now_ms()
}

impl AsyncNet {
    pub(crate) fn new(limits: FrameLimits, request_timeout_ms: u64) -> Self {
        let (tx, rx) = local_channel::new_bounded(EVENT_CAPACITY);
        Self {
            conns: HashMap::new(),
            tx: Rc::new(tx),
            rx,
            limits,
            connect_timeout: Duration::from_millis(
                request_timeout_ms.clamp(1, MAX_CONNECT_TIMEOUT_MS),
            ),
            write_timeout: Duration::from_millis(request_timeout_ms.max(1)),
            next_conn_id: 0,
        }
    }

    async fn connect(&mut self, addr: &str) -> std::io::Result<()> {
        if self.conns.contains_key(addr) {
            return Ok(());
        }
        let Some(sa) = addr.to_socket_addrs()?.next() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{addr} resolves to nothing"),
            ));
        };
        let stream = TcpStream::connect_timeout(sa, self.connect_timeout)
            .await
            .map_err(std::io::Error::from)?;
        stream.set_nodelay(true).map_err(std::io::Error::from)?;
        // A broker that stops reading must not wedge the driving task in a write.
        stream
            .set_write_timeout(Some(self.write_timeout))
            .map_err(std::io::Error::from)?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
        let (reader, writer) = split(stream);
        // One `recv` usually brings a response's length prefix, its body and often the next
        // responses: read through a buffer, a frame costs a fraction of a syscall instead of
        // two (prefix, then body). A body larger than the buffer is read straight into its
        // frame once the buffer is drained.
        let mut reader = futures_lite::io::BufReader::with_capacity(READ_BUFFER_BYTES, reader);
        self.next_conn_id += 1;
        let conn_id = self.next_conn_id;
        let tx = self.tx.clone();
        let limits = self.limits;
        let reader_addr = addr.to_owned();
        let task = glommio::spawn_local(async move {
            // The task holds the read half, so the socket is open whenever the mark is set;
            // dropped with the task, the mark touches nothing.
            let mut mark = RecvLowat::without_reset_on_drop(fd);
            loop {
                // What the buffer already holds has arrived: only the rest is still to come,
                // and the mark waits for no more than that.
                let body = read_frame_async_with(&mut reader, &limits, |r, remaining| {
                    mark.expect(remaining.saturating_sub(r.buffer().len()));
                });
                match body.await {
                    Ok(Some(raw)) => {
                        let response = decode_response(&raw, &limits);
                        let bad = response.is_err();
                        let addr = reader_addr.clone();
                        if tx
                            .send(Event::Response {
                                addr,
                                conn_id,
                                response,
                            })
                            .await
                            .is_err()
                            || bad
                        {
                            return;
                        }
                    }
                    Ok(None) | Err(_) => {
                        let _ = tx
                            .send(Event::Closed {
                                addr: reader_addr,
                                conn_id,
                            })
                            .await;
                        return;
                    }
                }
            }
        });
        debug!(%addr, conn_id, "connected");
        self.conns.insert(
            addr.to_owned(),
            Conn {
                id: conn_id,
                writer,
                _reader: task,
            },
        );
        Ok(())
    }

    /// Performs the actions; returns the addresses whose connection failed.
    pub(crate) async fn execute(&mut self, actions: Vec<NetAction>) -> Vec<Addr> {
        let mut failed = Vec::new();
        for action in actions {
            match action {
                NetAction::Send { addr, frame, .. } => {
                    if failed.contains(&addr) {
                        continue;
                    }
                    let mut result = self.connect(&addr).await;
                    if result.is_ok() {
                        result = match self.conns.get_mut(&addr) {
                            Some(c) => match frame.write_to_async(&mut c.writer).await {
                                Ok(()) => c.writer.flush().await,
                                Err(e) => Err(e),
                            },
                            None => Err(std::io::Error::other("connection vanished")),
                        };
                    }
                    if let Err(e) = result {
                        warn!(%addr, error = %e, "connection failed");
                        self.conns.remove(&addr);
                        failed.push(addr);
                    }
                }
                NetAction::Close { addr } => {
                    self.conns.remove(&addr);
                }
            }
        }
        failed
    }

    /// Waits up to `timeout` for one event.
    pub(crate) async fn recv(&self, timeout: Duration) -> Option<Event> {
        futures_lite::future::or(self.rx.recv(), async {
            glommio::timer::sleep(timeout).await;
            None
        })
        .await
    }

    /// A sender for waking the driver.
    pub(crate) fn waker(&self) -> Rc<LocalSender<Event>> {
        self.tx.clone()
    }

    pub(crate) fn dispatch<C: ClientCore + ?Sized>(
        &mut self,
        event: Event,
        core: &mut C,
        now_ms: u64,
    ) {
        match event {
            Event::Response {
                addr,
                conn_id,
                response,
            } => {
                if self.conns.get(&addr).map(|c| c.id) != Some(conn_id) {
                    return;
                }
                match response {
                    Ok(r) => core.on_response(&addr, r, now_ms),
                    Err(e) => {
                        warn!(%addr, error = %e, "malformed response; closing the connection");
                        self.conns.remove(&addr);
                        core.on_disconnect(&addr, now_ms);
                    }
                }
            }
            Event::Closed { addr, conn_id } => {
                if self.conns.get(&addr).map(|c| c.id) == Some(conn_id) {
                    self.conns.remove(&addr);
                    core.on_disconnect(&addr, now_ms);
                }
            }
            Event::Wake => {}
        }
    }

    /// One round for a core owned by the caller: act, then wait for one event (at most
    /// `max_wait`, at most until the core's next wake-up).
    pub(crate) async fn step<C: ClientCore>(&mut self, core: &mut C, max_wait: Duration) {
        let now = now_ms();
        let actions = core.poll_actions(now);
        for addr in self.execute(actions).await {
            core.on_disconnect(&addr, now_ms());
        }
        let now = now_ms();
        let wait = crate::client::blocking::wait_until_ms(core.next_wakeup_ms(now), max_wait);
        if let Some(ev) = self.recv(wait).await {
            self.dispatch(ev, core, now_ms());
        }
    }
}
