//! The accept loop every listener shares (native, Kafka, admin): each connection is served on its
//! own task until the core stops.

use std::rc::Rc;

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
    loop {
        let accepted = futures_lite::future::or(
            async { Some(listener.accept().await) },
            shard.stopped_signal(),
        )
        .await;
        match accepted {
            None => break,
            Some(Ok(stream)) => {
                glommio::spawn_local(serve(Rc::clone(shard), stream)).detach();
            }
            Some(Err(e)) => tracing::warn!(core = shard.core, "{what} accept: {e}"),
        }
    }
}
