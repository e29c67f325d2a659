//! The accept loop every listener shares (native, Kafka, admin, internal): each connection is
//! served on its own task until the core stops. The client-facing listeners (native, Kafka) pass
//! the broker's [`ConnectionGate`]: a connection past `--max-connections` or
//! `--max-connections-per-ip` is closed at once, before anything is read from it, counted in
//! this core's metrics and logged at most once per [`crate::conn_limits::REFUSAL_LOG_INTERVAL_MS`].

use std::rc::Rc;
use std::sync::Arc;

use crate::conn_limits::{ConnectionGate, RefusalLog, Refused};
use crate::metrics::CoreMetrics;
use crate::shard::Shard;

/// Accepts connections on `listener` until the shard stops, serving each on its own task.
pub async fn accept_until_stopped<F, Fut>(
    shard: &Rc<Shard>,
    listener: &glommio::net::TcpListener,
    what: &str,
    serve: F,
) where
    F: Fn(Rc<Shard>, glommio::net::TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    accept_loop(shard, listener, what, None, serve).await;
}

/// [`accept_until_stopped`] for a client-facing listener: only connections `gate` admits are
/// served (the permit lives as long as the connection's task); the rest are closed at once.
pub async fn accept_clients_until_stopped<F, Fut>(
    shard: &Rc<Shard>,
    listener: &glommio::net::TcpListener,
    what: &str,
    gate: &Arc<ConnectionGate>,
    serve: F,
) where
    F: Fn(Rc<Shard>, glommio::net::TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    accept_loop(shard, listener, what, Some(gate), serve).await;
}

async fn accept_loop<F, Fut>(
    shard: &Rc<Shard>,
    listener: &glommio::net::TcpListener,
    what: &str,
    gate: Option<&Arc<ConnectionGate>>,
    serve: F,
) where
    F: Fn(Rc<Shard>, glommio::net::TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let mut refusals = RefusalLog::new();
    loop {
        let accepted = futures_lite::future::or(
            async { Some(listener.accept().await) },
            shard.stopped_signal(),
        )
        .await;
        match accepted {
            None => break,
            Some(Ok(stream)) => {
                let permit = match gate {
                    None => None,
                    Some(g) => match admit(shard, g, &stream, what, &mut refusals) {
                        Some(p) => Some(p),
                        // Dropping the stream closes it: the client sees the end of the stream.
                        None => continue,
                    },
                };
                let served = serve(Rc::clone(shard), stream);
                glommio::spawn_local(async move {
                    served.await;
                    drop(permit);
                })
                .detach();
            }
            Some(Err(e)) => tracing::warn!(core = shard.core, "{what} accept: {e}"),
        }
    }
}

/// Asks the gate for a place for `stream`; on a refusal, counts and (rate-limited) logs it.
fn admit(
    shard: &Shard,
    gate: &Arc<ConnectionGate>,
    stream: &glommio::net::TcpStream,
    what: &str,
    refusals: &mut RefusalLog,
) -> Option<crate::conn_limits::Permit> {
    let peer = match stream.peer_addr() {
        Ok(p) => p,
        // Gone already (reset before it was accepted): nothing to serve.
        Err(_) => return None,
    };
    let refused = match gate.admit(peer.ip()) {
        Ok(p) => return Some(p),
        Err(r) => r,
    };
    let m = &shard.metrics;
    let (counter, flag) = match refused {
        Refused::MaxConnections => (&m.connections_refused_max, "--max-connections"),
        Refused::MaxConnectionsPerIp => (&m.connections_refused_per_ip, "--max-connections-per-ip"),
    };
    CoreMetrics::add(counter, 1);
    if let Some(n) = refusals.note(crate::clock::monotonic_ms()) {
        tracing::warn!(
            core = shard.core,
            %peer,
            refused = n,
            open = gate.open(),
            "{what}: refusing connections past {flag} ({n} since the last such line on this core)"
        );
    }
    None
}
