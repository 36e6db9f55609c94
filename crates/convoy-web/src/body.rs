//! Response bodies: whole ones (JSON, assets) and streamed ones fed
//! through a channel (Server-Sent Events, downloads read from the store
//! on a blocking thread). hyper writes each chunk as it arrives, so an
//! event reaches the page when it is sent, not when a buffer fills.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};
use tokio::sync::mpsc;

pub type Body = BoxBody<Bytes, std::io::Error>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).map_err(|e| match e {}).boxed()
}

pub fn empty() -> Body {
    Empty::new().map_err(|e| match e {}).boxed()
}

/// A body whose chunks come from a channel; it ends when every sender is
/// gone. `len`, when known, lets hyper send Content-Length rather than
/// chunks (or HTTP/2 frames without an end marker).
pub struct ChannelBody {
    rx: mpsc::Receiver<std::io::Result<Bytes>>,
    len: Option<u64>,
}

impl ChannelBody {
    /// The body and the sender that feeds it; `depth` chunks may wait.
    pub fn channel(depth: usize, len: Option<u64>) -> (mpsc::Sender<std::io::Result<Bytes>>, Body) {
        let (tx, rx) = mpsc::channel(depth);
        (tx, ChannelBody { rx, len }.boxed())
    }
}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|r| r.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        match self.len {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}
