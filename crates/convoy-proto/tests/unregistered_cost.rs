//! What a key the registry does not know costs a server (issue 31: at
//! most 64 KB, and no disk): 100 clients with fresh keys shake hands and
//! then send as fast as they can, while the server's application never
//! authorizes them, as a fleet server does with an unknown key until the
//! registry's answer closes the connection. The heap the server's endpoint
//! keeps is counted by an allocator that counts only while the server's
//! code runs. Virtual time, so the figure is the same on any machine.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use convoy_proto::{Config, Endpoint, Keypair};

/// Net bytes allocated while `COUNTING` is set on the allocating thread.
static NET: AtomicI64 = AtomicI64::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

struct Counting;

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counter is only arithmetic beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            NET.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.with(Cell::get) {
            NET.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            NET.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` with the server's allocations counted.
fn server<T>(f: impl FnOnce() -> T) -> T {
    COUNTING.with(|c| c.set(true));
    let out = f();
    COUNTING.with(|c| c.set(false));
    out
}

const CLIENTS: usize = 100;
const MS: Duration = Duration::from_millis(1);

fn addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 9, (i >> 8) as u8, i as u8], 2000 + i as u16))
}

#[test]
fn an_unregistered_key_costs_the_server_at_most_64_kb() {
    let server_kp = Keypair::generate();
    let mut cfg = Config::new(server_kp.clone());
    cfg.seed = Some(1);
    cfg.authorize_before_data = true;
    let mut s = server(|| Endpoint::new(cfg, true).unwrap());
    let server_addr: SocketAddr = "10.0.0.2:4433".parse().unwrap();
    let mut clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let mut c = Config::new(Keypair::generate());
            c.seed = Some(100 + i as u64);
            let mut ep = Endpoint::new(c, false).unwrap();
            let h = ep
                .connect(Duration::ZERO, server_addr, Some(&server_kp.public))
                .unwrap();
            (ep, h, None)
        })
        .collect();
    let before = NET.load(Ordering::Relaxed);
    let mut buf = vec![0u8; 2048];
    let data = vec![0x42u8; 64 * 1024];
    let mut now = Duration::ZERO;
    let mut peak = 0i64;
    // Two seconds: the handshakes, then the clients' windows and probe
    // timeouts against a server that reads nothing but 8 datagrams each.
    for _ in 0..2000 {
        for (i, (c, h, stream)) in clients.iter_mut().enumerate() {
            if let Some(conn) = c.connection(*h) {
                if conn.is_established() {
                    let id = *stream.get_or_insert_with(|| conn.open_stream().unwrap());
                    let _ = conn.write(id, &data);
                }
            }
            while let Some(t) = c.poll_transmit(now, &mut buf) {
                let d = buf[..t.len].to_vec();
                server(|| s.handle(now, addr(i), &d));
            }
        }
        let replies = server(|| {
            let mut out = Vec::new();
            while let Some(t) = s.poll_transmit(now, &mut buf) {
                out.push((t.remote, buf[..t.len].to_vec()));
            }
            out
        });
        for (to, d) in replies {
            if let Some(i) = (0..CLIENTS).find(|&i| addr(i) == to) {
                clients[i].0.handle(now, server_addr, &d);
            }
        }
        // The application accepts each handshake but never authorizes.
        server(|| while s.accept().is_some() {});
        now += MS;
        for (c, _, _) in &mut clients {
            c.handle_timeout(now);
        }
        server(|| s.handle_timeout(now));
        peak = peak.max(NET.load(Ordering::Relaxed) - before);
    }
    let held: usize = server(|| {
        s.handles()
            .into_iter()
            .filter_map(|h| s.connection_ref(h).map(|c| c.memory_in_use()))
            .sum()
    });
    let per_key = peak as f64 / CLIENTS as f64;
    eprintln!(
        "{CLIENTS} unregistered keys sending for 2 s: server heap peak {:.1} KB each ({:.1} KB held in packets and buffers by its own count)",
        per_key / 1024.0,
        held as f64 / CLIENTS as f64 / 1024.0
    );
    assert!(per_key <= 64.0 * 1024.0, "{per_key} bytes per key");
}
