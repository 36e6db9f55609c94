//! Prints how many packets per second one link direction handles on one
//! core, for quoting:
//! `cargo run --release -p convoy-link --example link_throughput [packets] [mahimahi-trace]`
//! (default 10 000 000 packets and ../shared/traces/TMobile-LTE-short.down).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use convoy_link::workload::Workload;
use convoy_link::{DropReason, MahimahiTrace};

const DEFAULT_TRACE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/traces/TMobile-LTE-short.down"
);

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let packets: u64 = match args.next() {
        None => 10_000_000,
        Some(a) => match a.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("usage: link_throughput [packets > 0] [trace]; got packets {a:?}");
                return ExitCode::from(2);
            }
        },
    };
    let trace_path = args.next().unwrap_or_else(|| DEFAULT_TRACE.to_owned());
    let trace = match MahimahiTrace::from_file(&trace_path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    for w in [
        Workload::constant_gbit(),
        Workload::mahimahi(Arc::new(trace)),
    ] {
        let mut link = match w.link() {
            Ok(l) => l,
            Err(e) => {
                eprintln!("{}: {e}", w.id);
                return ExitCode::FAILURE;
            }
        };
        let start = Instant::now();
        let delivered = w.run(&mut link, packets);
        let secs = start.elapsed().as_secs_f64();
        let s = link.stats();
        println!(
            "{} ({}): {packets} packets in {secs:.3} s = {:.2} Mpkt/s \
             ({delivered} delivered, {} lost, {} tail-dropped)",
            w.id,
            w.description,
            packets as f64 / secs / 1e6,
            s.dropped(DropReason::Loss),
            s.dropped(DropReason::QueueFull),
        );
    }
    ExitCode::SUCCESS
}
