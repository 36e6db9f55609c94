//! A small HTTP/1.1 server side: one request per connection (`Connection:
//! close`), GET, HEAD and OPTIONS only, headers up to 16 KiB. The API
//! needs no more, and owning the connection lets a response stream
//! (Server-Sent Events, large downloads) without buffering. Each
//! connection is read whole before the answer and drained after it, so
//! closing never resets a response the browser is still reading.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

const MAX_HEAD: usize = 16 * 1024;

pub struct Request {
    pub method: String,
    pub url: String,
    headers: Vec<(String, String)>,
    stream: TcpStream,
}

impl Request {
    /// Reads the request head; `None` if the client sent no valid one.
    pub fn read(stream: TcpStream) -> Option<Request> {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let mut r = BufReader::new(stream.try_clone().ok()?);
        let mut line = String::new();
        let mut total = 0;
        r.read_line(&mut line).ok()?;
        total += line.len();
        let mut parts = line.split_whitespace();
        let (method, url) = (parts.next()?.to_owned(), parts.next()?.to_owned());
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            let n = r.read_line(&mut h).ok()?;
            total += n;
            if n == 0 || total > MAX_HEAD {
                return None;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
        Some(Request {
            method,
            url,
            headers,
            stream,
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Writes the status line and headers; the body follows on the
    /// returned stream.
    pub fn start(
        mut self,
        status: u16,
        headers: &[(String, String)],
        len: Option<u64>,
    ) -> std::io::Result<TcpStream> {
        let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for (k, v) in headers {
            head += &format!("{k}: {v}\r\n");
        }
        if let Some(n) = len {
            head += &format!("Content-Length: {n}\r\n");
        }
        head += "Connection: close\r\n\r\n";
        self.stream.write_all(head.as_bytes())?;
        Ok(self.stream)
    }

    /// A whole response.
    pub fn respond(
        self,
        status: u16,
        headers: &[(String, String)],
        mut body: impl Read,
        len: u64,
        head_only: bool,
    ) -> std::io::Result<()> {
        let mut s = self.start(status, headers, Some(len))?;
        if !head_only {
            std::io::copy(&mut (&mut body).take(len), &mut s)?;
        }
        finish(s);
        Ok(())
    }
}

/// Ends a response: flush, half-close, and read what the client still
/// sends before closing, so the kernel does not reset the connection.
pub fn finish(mut s: TcpStream) {
    let _ = s.flush();
    let _ = s.shutdown(Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        416 => "Range Not Satisfiable",
        503 => "Service Unavailable",
        _ => "",
    }
}
