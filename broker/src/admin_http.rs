//! The admin HTTP endpoint on core 0 (port 9644): `GET /metrics` (Prometheus text, every core's
//! metrics gathered over the mesh) and `GET /health`. One request per connection, request head
//! bounded to 8 KiB.

use std::rc::Rc;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

use crate::requests::MetricsText;
use crate::shard::Shard;

const REQUEST_HEAD_BYTES_MAX: usize = 8192;

pub fn spawn(shard: &Rc<Shard>) -> Result<(), String> {
    let cfg = &shard.config;
    let listener = TcpListener::bind((cfg.host.as_str(), cfg.admin_port)).map_err(|e| {
        format!(
            "cannot listen on {}:{} (admin): {e}",
            cfg.host, cfg.admin_port
        )
    })?;
    let shard = Rc::clone(shard);
    glommio::spawn_local(async move {
        crate::accept::accept_until_stopped(&shard, &listener, "admin", serve).await;
    })
    .detach();
    Ok(())
}

async fn serve(shard: Rc<Shard>, mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > REQUEST_HEAD_BYTES_MAX {
            let _ = respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "request head too large\n",
            )
            .await;
            return;
        }
    }
    let line = String::from_utf8_lossy(&head);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let result = match (method, path) {
        ("GET", "/metrics") => {
            let mut body = String::from(crate::metrics::header());
            for text in shard.broadcast(|| MetricsText).await.into_iter().flatten() {
                body.push_str(&text);
            }
            respond(&mut stream, "200 OK", "text/plain; version=0.0.4", &body).await
        }
        ("GET", "/health") => respond(&mut stream, "200 OK", "text/plain", "ok\n").await,
        _ => {
            respond(
                &mut stream,
                "404 Not Found",
                "text/plain",
                "try /metrics or /health\n",
            )
            .await
        }
    };
    if let Err(e) = result {
        tracing::debug!("admin response: {e}");
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await
}
