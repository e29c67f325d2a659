//! Blocking connections for the blocking clients: one `TcpStream` per broker address, written by
//! the driving thread, read by one thread per connection that decodes response frames (limits and
//! verifier included) and forwards them over a bounded channel.
//!
//! A malformed response frame closes its connection: the stream can no longer be trusted to be in
//! step, so the core sees it as a lost connection (and retries / refreshes metadata).

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Duration;

use tracing::{debug, warn};

use crate::client::net::{Addr, ClientCore, NetAction};
use crate::codec::{decode_response, Response};
use crate::frame::{read_frame, FrameError, FrameLimits};

/// Events for the driving thread.
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
    /// Something changed outside the net (a record was sent, a flush asked for).
    Wake,
}

struct Conn {
    id: u64,
    stream: TcpStream,
}

/// Longest a connection attempt may take (Kafka `socket.connection.setup.timeout.ms`): the
/// driving thread waits on it, so an unreachable broker must not stall the others for long.
const MAX_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// Events queued between reader threads and the driver; readers wait when it is full.
const EVENT_CAPACITY: usize = 1024;

pub(crate) struct BlockingNet {
    conns: HashMap<Addr, Conn>,
    tx: SyncSender<Event>,
    rx: Receiver<Event>,
    limits: FrameLimits,
    connect_timeout: Duration,
    /// Bound on one frame write (the request timeout).
    write_timeout: Duration,
    next_conn_id: u64,
    /// The last failed connect or write, `addr: error`, so a caller whose operation timed out
    /// without a single answer can say why (refused, unresolvable) instead of "timed out".
    last_failure: Option<String>,
    /// Responses dispatched so far (to tell "no broker answered" from "the answer was slow").
    responses: u64,
}

impl BlockingNet {
    pub(crate) fn new(limits: FrameLimits, request_timeout_ms: u64) -> Self {
        let (tx, rx) = sync_channel(EVENT_CAPACITY);
        Self {
            conns: HashMap::new(),
            tx,
            rx,
            limits,
            connect_timeout: Duration::from_millis(
                request_timeout_ms.clamp(1, MAX_CONNECT_TIMEOUT_MS),
            ),
            write_timeout: Duration::from_millis(request_timeout_ms.max(1)),
            next_conn_id: 0,
            last_failure: None,
            responses: 0,
        }
    }

    /// Responses received so far.
    pub(crate) fn responses(&self) -> u64 {
        self.responses
    }

    /// The last failed connect or write, as `addr: error`.
    pub(crate) fn last_failure(&self) -> Option<&str> {
        self.last_failure.as_deref()
    }

    /// `error` unless it is a timeout of an operation that got no answer at all while a
    /// connection failed: then the failure is the cause and says more.
    pub(crate) fn explain(
        &self,
        error: crate::client::ClientError,
        responses_before: u64,
    ) -> crate::client::ClientError {
        match (&error, self.last_failure()) {
            (crate::client::ClientError::Timeout { .. }, Some(failure))
                if self.responses == responses_before =>
            {
                crate::client::ClientError::Connection(failure.to_owned())
            }
            _ => error,
        }
    }

    /// A handle that wakes the driver out of [`Self::recv`].
    pub(crate) fn waker(&self) -> SyncSender<Event> {
        self.tx.clone()
    }

    fn connect(&mut self, addr: &str) -> std::io::Result<&mut Conn> {
        if !self.conns.contains_key(addr) {
            let mut last_err = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{addr} resolves to nothing"),
            );
            let mut connected = None;
            for sa in addr.to_socket_addrs()? {
                match TcpStream::connect_timeout(&sa, self.connect_timeout) {
                    Ok(s) => {
                        connected = Some(s);
                        break;
                    }
                    Err(e) => last_err = e,
                }
            }
            let stream = connected.ok_or(last_err)?;
            stream.set_nodelay(true)?;
            // A broker that stops reading must not wedge the driving thread in write().
            stream.set_write_timeout(Some(self.write_timeout))?;
            let mut reader = stream.try_clone()?;
            self.next_conn_id += 1;
            let conn_id = self.next_conn_id;
            let tx = self.tx.clone();
            let limits = self.limits;
            let reader_addr = addr.to_owned();
            std::thread::Builder::new()
                .name(format!("spool-conn-{addr}"))
                .spawn(move || loop {
                    match read_frame(&mut reader, &limits) {
                        Ok(Some(raw)) => {
                            let response = decode_response(&raw, &limits);
                            let bad = response.is_err();
                            if tx
                                .send(Event::Response {
                                    addr: reader_addr.clone(),
                                    conn_id,
                                    response,
                                })
                                .is_err()
                                || bad
                            {
                                let _ = reader.shutdown(Shutdown::Both);
                                let _ = tx.send(Event::Closed {
                                    addr: reader_addr,
                                    conn_id,
                                });
                                return;
                            }
                        }
                        Ok(None) | Err(_) => {
                            let _ = tx.send(Event::Closed {
                                addr: reader_addr,
                                conn_id,
                            });
                            return;
                        }
                    }
                })?;
            debug!(%addr, conn_id, "connected");
            self.conns.insert(
                addr.to_owned(),
                Conn {
                    id: conn_id,
                    stream,
                },
            );
        }
        self.conns
            .get_mut(addr)
            .ok_or_else(|| std::io::Error::other("connection vanished"))
    }

    fn close(&mut self, addr: &str) {
        if let Some(c) = self.conns.remove(addr) {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }

    /// Performs the actions; returns the addresses whose connection failed (connect or write),
    /// which the caller reports to its core.
    pub(crate) fn execute(&mut self, actions: Vec<NetAction>) -> Vec<Addr> {
        let mut failed = Vec::new();
        for action in actions {
            match action {
                NetAction::Send { addr, frame, .. } => {
                    tracing::trace!(%addr, frame_bytes = frame.len(), "send");
                    if failed.contains(&addr) {
                        continue;
                    }
                    let result = self
                        .connect(&addr)
                        .and_then(|c| frame.write_to(&mut c.stream));
                    if let Err(e) = result {
                        warn!(%addr, error = %e, "connection failed");
                        self.last_failure = Some(format!("{addr}: {e}"));
                        self.close(&addr);
                        failed.push(addr);
                    }
                }
                NetAction::Close { addr } => self.close(&addr),
            }
        }
        failed
    }

    /// Waits up to `timeout` for one event.
    pub(crate) fn recv(&self, timeout: Duration) -> Option<Event> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// An event already queued, without waiting.
    pub(crate) fn try_recv(&self) -> Option<Event> {
        self.rx.try_recv().ok()
    }

    /// Hands an event to the core.
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
                    return; // From a connection already closed: its requests were reported lost.
                }
                match response {
                    Ok(r) => {
                        tracing::trace!(%addr, correlation_id = r.header.correlation_id, api_key = ?r.header.api_key, "response");
                        self.responses += 1;
                        core.on_response(&addr, r, now_ms)
                    }
                    Err(e) => {
                        warn!(%addr, error = %e, "malformed response; closing the connection");
                        self.close(&addr);
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

    /// One round: act on what the core wants now, then wait (at most `max_wait`, at most until
    /// the core's next wake-up) for an event and dispatch it with any others already queued.
    pub(crate) fn step<C: ClientCore + ?Sized>(&mut self, core: &mut C, max_wait: Duration) {
        let now = super::now_ms();
        let actions = core.poll_actions(now);
        for addr in self.execute(actions) {
            core.on_disconnect(&addr, super::now_ms());
        }
        let now = super::now_ms();
        let wait = super::wait_until_ms(core.next_wakeup_ms(now), max_wait);
        if let Some(ev) = self.recv(wait) {
            self.dispatch(ev, core, super::now_ms());
            while let Some(ev) = self.try_recv() {
                self.dispatch(ev, core, super::now_ms());
            }
        }
    }
}

impl Drop for BlockingNet {
    fn drop(&mut self) {
        for (_, c) in self.conns.drain() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }
}
