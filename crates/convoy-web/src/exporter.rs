//! A `/metrics` endpoint on its own address, for a process that has no
//! web view: `convoy agent --metrics ADDR`. The same stack as the web
//! view (hyper on a small tokio runtime, HTTP/1.1 with keep-alive and
//! the same head limits), serving `GET /metrics` from a function that
//! renders the page at scrape time; any other path is 404.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::watch;

use crate::body::{self, Body};
use crate::metrics::Exposition;

/// Writes the families of one scrape.
pub type Render = Arc<dyn Fn(&mut Exposition) + Send + Sync>;

/// A running endpoint; dropping it stops it.
pub struct Exporter {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// Listens on `listen` and serves `/metrics` from `render`, which runs
    /// on a blocking thread (it may read files or a database).
    pub fn start(listen: SocketAddr, render: Render) -> Result<Exporter, String> {
        let listener = std::net::TcpListener::bind(listen)
            .map_err(|e| format!("cannot listen on {listen} (metrics): {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the metrics runtime: {e}"))?;
        let (stop, mut stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("convoy-metrics".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    loop {
                        let (stream, _) = tokio::select! {
                            a = listener.accept() => match a {
                                Ok(a) => a,
                                Err(_) => {
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                    continue;
                                }
                            },
                            _ = stopped.changed() => return,
                        };
                        let render = render.clone();
                        tokio::spawn(async move {
                            let service = hyper::service::service_fn(move |req| {
                                let render = render.clone();
                                async move {
                                    Ok::<_, std::convert::Infallible>(answer(req, render).await)
                                }
                            });
                            let mut b = hyper::server::conn::http1::Builder::new();
                            b.timer(TokioTimer::new())
                                .header_read_timeout(crate::server::HEAD_TIMEOUT)
                                .max_buf_size(crate::server::MAX_HEAD.max(8192));
                            let _ = b.serve_connection(TokioIo::new(stream), service).await;
                        });
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(|e| e.to_string())?;
        Ok(Exporter {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn answer(req: Request<hyper::body::Incoming>, render: Render) -> Response<Body> {
    let reply = |status: StatusCode, text: String| {
        let mut r = Response::new(body::full(text));
        *r.status_mut() = status;
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(crate::http::PROMETHEUS_TEXT),
        );
        r
    };
    if req.uri().path() != "/metrics" {
        return reply(StatusCode::NOT_FOUND, "only /metrics here\n".into());
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n".into());
    }
    let page = tokio::task::spawn_blocking(move || {
        let mut p = Exposition::default();
        render(&mut p);
        p.into_text()
    })
    .await;
    match page {
        Ok(text) => reply(StatusCode::OK, text),
        Err(_) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "rendering failed\n".into(),
        ),
    }
}
