//! Connections: a tokio runtime of its own (the transport server runs on
//! convoy's driver threads, not on tokio), TLS when configured, and hyper
//! serving HTTP/1.1 with keep-alive or HTTP/2 on each connection.
//!
//! What a client may hold is bounded: a connection that sends nothing is
//! closed after [`FIRST_BYTE_TIMEOUT`], a request head must arrive whole
//! within [`HEAD_TIMEOUT`] (slowloris) and fit in [`MAX_HEAD`] bytes
//! (431 past it), a TLS handshake must end within [`HEAD_TIMEOUT`], and
//! an idle keep-alive connection is closed after [`HEAD_TIMEOUT`] too
//! (hyper starts that clock whenever it waits for a new head).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::http::{self, Shared};

/// How long a new connection may stay silent before its first byte.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request head (or a TLS handshake) may take to arrive whole.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head: request line and headers. Default: 16 KiB.
pub const MAX_HEAD: usize = 16 * 1024;

/// The HTTP/2 connection preface's first bytes: what tells a cleartext
/// HTTP/2 client (prior knowledge) from an HTTP/1.1 one.
const H2_PREFACE_START: &[u8] = b"PRI ";

/// Accepts until `stop` turns true, serving each connection on its own task.
pub async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut stop: watch::Receiver<bool>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("convoy-web: cannot use the listening socket: {e}");
            return;
        }
    };
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            // Out of descriptors or a client that reset before accept:
            // no reason to stop serving the others.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _open = crate::metrics::OpenConnection::new(&shared.counters);
            let shared = shared.clone();
            match acceptor {
                Some(a) => serve_tls(a, stream, peer, shared).await,
                None => serve_plain(stream, peer, shared).await,
            }
        });
    }
}

async fn serve_tls(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
) {
    let tls = match tokio::time::timeout(HEAD_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        // A failed or stalled handshake: nothing to answer in HTTP.
        _ => {
            shared
                .counters
                .tls_failed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
    };
    let h2 = tls.get_ref().1.alpn_protocol() == Some(crate::tls::ALPN_H2);
    serve(tls, h2, peer, shared).await
}

async fn serve_plain(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    // Closed, or silent past the timeout: dropped unanswered.
    if let Ok(Some(h2)) = tokio::time::timeout(FIRST_BYTE_TIMEOUT, starts_h2(&stream)).await {
        serve(stream, h2, peer, shared).await
    }
}

/// Peeks at the first bytes: `Some(true)` for an HTTP/2 preface,
/// `Some(false)` for anything else (HTTP/1.1 decides what it is), `None`
/// if the client closed first.
async fn starts_h2(stream: &TcpStream) -> Option<bool> {
    let mut buf = [0u8; 4];
    loop {
        let n = stream.peek(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        if n >= H2_PREFACE_START.len() || buf[..n] != H2_PREFACE_START[..n] {
            return Some(buf[..n] == *H2_PREFACE_START);
        }
        // Fewer bytes than it takes to tell: peek returns at once with
        // the same bytes, so wait a moment before looking again.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn serve<I>(io: I, h2: bool, peer: SocketAddr, shared: Arc<Shared>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(http::service(shared, peer));
    let io = TokioIo::new(io);
    // Errors here are the client's (reset, timeout, bad framing); hyper
    // has already answered what deserves an answer (400, 431).
    if h2 {
        let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        b.timer(TokioTimer::new())
            .max_header_list_size(MAX_HEAD as u32)
            .keep_alive_interval(Some(Duration::from_secs(20)))
            .keep_alive_timeout(Duration::from_secs(20));
        let _ = b.serve_connection(io, service).await;
    } else {
        let mut b = hyper::server::conn::http1::Builder::new();
        b.timer(TokioTimer::new())
            .header_read_timeout(HEAD_TIMEOUT)
            .max_buf_size(MAX_HEAD.max(8192))
            .keep_alive(true);
        let _ = b.serve_connection(io, service).await;
    }
}
