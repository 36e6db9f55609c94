//! `convoy bench codec`: every number in one run, so ratios between rows are
//! meaningful even on a shared, noisy machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use convoy_codec::gf::{self, Tier};
use convoy_codec::workload::LossyBlock;
use convoy_codec::CodeKind;
use serde::Serialize;

use crate::progress;
use crate::table::Table;

pub struct Options {
    pub json: bool,
    pub quick: bool,
    pub budget_ms: u64,
}

const GENERATIONS: [u32; 5] = [10, 32, 64, 128, 255];
const LOSSES: [f64; 3] = [0.0, 0.1, 0.3];
const SYMBOL_SIZE: u16 = 1400;
const BATCHES: u32 = 5;

#[derive(Serialize)]
struct Report {
    machine: Machine,
    method: &'static str,
    kernels: Vec<KernelRow>,
    rlnc: Vec<CodeRow>,
    raptorq: Vec<CodeRow>,
    cost: Cost,
    targets: Vec<Target>,
}

/// What one byte of application data costs the sending core, step by step,
/// in ns per byte: the figures to re-measure on a vehicle's own computer
/// (run `convoy bench codec` there), since no emulator predicts them.
#[derive(Serialize)]
struct Cost {
    /// The packet size every step is timed on (the codec's symbol size).
    packet_bytes: usize,
    steps: Vec<CostStep>,
    /// copy + coding + sealing with the AEAD this CPU negotiates + the send
    /// syscall: one core's work per byte the sender hands to convoy.
    sender_ns_per_byte: f64,
    /// 8 bits over `sender_ns_per_byte`: the rate one core could sustain
    /// doing only this.
    sender_core_mbit_per_s: f64,
}

#[derive(Serialize)]
struct CostStep {
    /// copy, coding, aead or syscall.
    kind: &'static str,
    step: String,
    ns_per_byte: f64,
    /// Whether the step is part of `sender_ns_per_byte`.
    in_sender_total: bool,
}

#[derive(Serialize)]
struct Machine {
    cpu: String,
    features: Vec<&'static str>,
    best_tier: &'static str,
}

#[derive(Serialize)]
struct KernelRow {
    level: &'static str,
    bytes: usize,
    op: String,
    gb_per_s: f64,
    /// This row's bandwidth over memcpy's at the same size.
    of_memcpy: f64,
}

#[derive(Serialize)]
struct CodeRow {
    generation: u32,
    symbol_size: u16,
    loss_pct: u32,
    encode_mb_per_s: f64,
    decode_mb_per_s: f64,
    /// Repair symbols alone: bytes of repair symbols one encoder writes per
    /// second, construction excluded. This is the coding rate proper; the
    /// encode column is dominated by copying source symbols at low loss.
    repair_mb_per_s: f64,
    /// Symbols the decoder took before it could decode (k = generation).
    symbols_to_decode: usize,
}

#[derive(Serialize)]
struct Target {
    what: String,
    measured: f64,
    required: f64,
    met: bool,
}

/// Seconds per call of `work`: the best of several batches sized to fill the
/// budget, because the fastest batch is the one least disturbed by the rest
/// of the machine.
fn time_per_call(budget: Duration, mut work: impl FnMut()) -> f64 {
    time_interleaved(budget, 1, |_| work())[0]
}

/// Seconds per call of each of `ops` operations (`work(op)` runs one), with
/// the batches of all operations interleaved: when the machine is busy for a
/// moment, every operation sees it, so their ratios stay meaningful.
fn time_interleaved(budget: Duration, ops: usize, mut work: impl FnMut(usize)) -> Vec<f64> {
    let per_batch = budget.as_secs_f64() / f64::from(BATCHES);
    let iters: Vec<u64> = (0..ops)
        .map(|op| {
            let start = Instant::now();
            work(op);
            let once = start.elapsed().as_secs_f64().max(1e-9);
            ((per_batch / once) as u64).clamp(1, 1 << 30)
        })
        .collect();
    let mut best = vec![f64::INFINITY; ops];
    for _ in 0..BATCHES {
        for op in 0..ops {
            let start = Instant::now();
            for _ in 0..iters[op] {
                work(op);
            }
            let per_call = start.elapsed().as_secs_f64() / iters[op] as f64;
            best[op] = best[op].min(per_call);
        }
    }
    best
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Source and destination regions of `bytes` each, both 64-byte aligned and
/// half a page apart modulo 4096. Heap blocks from malloc are only 16-byte
/// aligned, and on some CPUs (AMD's `rep movsb` in particular) that alone
/// halves memcpy, which would flatter every ratio against it.
fn aligned_pair(storage: &mut Vec<u8>, bytes: usize) -> (&mut [u8], &mut [u8]) {
    const PAGE: usize = 4096;
    let gap = bytes.next_multiple_of(PAGE) + PAGE / 2;
    storage.clear();
    storage.resize(gap + bytes + PAGE, 0);
    let start = storage.as_ptr().align_offset(PAGE);
    let (head, tail) = storage[start..].split_at_mut(gap);
    for (i, b) in head[..bytes].iter_mut().enumerate() {
        *b = (i * 131 + 7) as u8;
    }
    (&mut head[..bytes], &mut tail[..bytes])
}

fn kernels(opts: &Options, budget: Duration) -> Vec<KernelRow> {
    let dram = if opts.quick { 8 << 20 } else { 64 << 20 };
    // Source and destination together must fit the level: 2 x 8 KiB in a
    // 32 KiB L1d, 2 x 64 KiB in any L2 of the last decade (256 KiB and up).
    let levels: [(&str, usize); 3] = [("L1", 8 << 10), ("L2", 64 << 10), ("DRAM", dram)];
    let mut rows = Vec::new();
    let mut storage = Vec::new();
    for (level, bytes) in levels {
        let (src, dst) = aligned_pair(&mut storage, bytes);
        let src = &*src;
        let tiers: Vec<Tier> = Tier::ALL.into_iter().filter(|t| t.is_supported()).collect();
        progress::update(&format!("memcpy and mul_add on {level}-sized buffers"));
        // Op 0 is memcpy, op i the i-th supported tier's mul_add.
        let times = time_interleaved(budget * (1 + tiers.len() as u32), 1 + tiers.len(), |op| {
            if op == 0 {
                black_box(&mut *dst).copy_from_slice(black_box(src));
            } else {
                gf::mul_add_with(tiers[op - 1], black_box(&mut *dst), black_box(src), 0x57)
                    .expect("tier is supported");
            }
        });
        let gbps: Vec<f64> = times.iter().map(|t| bytes as f64 / t / 1e9).collect();
        let names = std::iter::once("memcpy".to_string())
            .chain(tiers.iter().map(|t| format!("mul_add {}", t.name())));
        for (op, name) in names.enumerate() {
            rows.push(KernelRow {
                level,
                bytes,
                op: name,
                gb_per_s: gbps[op],
                of_memcpy: gbps[op] / gbps[0],
            });
        }
    }
    rows
}

fn codes(budget: Duration, code: CodeKind) -> Result<Vec<CodeRow>> {
    let mut rows = Vec::new();
    let mut out = vec![0u8; usize::from(SYMBOL_SIZE)];
    for g in GENERATIONS {
        let repair = {
            let block = LossyBlock::new(code, g, SYMBOL_SIZE, 0.0, 1)?;
            let encoder = block.encoder()?;
            let mut id = 0u32;
            time_per_call(budget, || {
                encoder
                    .write_symbol(g + id % 64, &mut out)
                    .expect("encodes");
                id = id.wrapping_add(1);
                black_box(&mut out);
            })
        };
        for loss in LOSSES {
            let loss_pct = (loss * 100.0).round() as u32;
            progress::update(&format!("{} g={g} loss={loss_pct}%", code.name()));
            let block = LossyBlock::new(code, g, SYMBOL_SIZE, loss, u64::from(g) * 1000 + 17)
                .with_context(|| format!("setting up {} g={g}", code.name()))?;
            let symbols_to_decode = block.decode_round().with_context(|| {
                format!("{} g={g} loss={loss_pct}% did not decode", code.name())
            })?;
            let encode = time_per_call(budget, || {
                block.encode_round(&mut out).expect("encodes");
                black_box(&mut out);
            });
            let decode = time_per_call(budget, || {
                black_box(block.decode_round().expect("decodes"));
            });
            let mb = block.data_len() as f64 / 1e6;
            rows.push(CodeRow {
                generation: g,
                symbol_size: SYMBOL_SIZE,
                loss_pct,
                encode_mb_per_s: mb / encode,
                decode_mb_per_s: mb / decode,
                repair_mb_per_s: f64::from(SYMBOL_SIZE) / repair / 1e6,
                symbols_to_decode,
            });
        }
    }
    Ok(rows)
}

/// The generation and loss of the cost breakdown's coding rows (the same
/// cell as the RLNC targets).
const COST_GENERATION: u32 = 32;
const COST_LOSS_PCT: u32 = 10;

/// The per-byte breakdown, timed on 1400-byte packets. Coding comes from the
/// RLNC rows already measured; copies, kernels, AEADs and the send syscall
/// are timed here.
fn cost(budget: Duration, rlnc: &[CodeRow]) -> Result<Cost> {
    use convoy_proto::crypto::{cpu_has_aes_gcm, Aead, PacketKey};

    let n = usize::from(SYMBOL_SIZE);
    let per_byte = |seconds: f64| seconds * 1e9 / n as f64;
    let mut steps = Vec::new();
    let mut step = |kind, step: String, ns_per_byte, in_sender_total| {
        steps.push(CostStep {
            kind,
            step,
            ns_per_byte,
            in_sender_total,
        })
    };

    progress::update("per-byte cost: copies and kernels");
    let src: Vec<u8> = (0..n).map(|i| (i * 131 + 7) as u8).collect();
    let mut dst = vec![0u8; n];
    let copy = time_per_call(budget, || {
        black_box(&mut dst[..]).copy_from_slice(black_box(&src));
    });
    // One copy: the application's buffer into the stream's send buffer.
    step("copy", format!("memcpy {n} B"), per_byte(copy), true);
    let tiers = if Tier::best() == Tier::Scalar {
        vec![Tier::Scalar]
    } else {
        vec![Tier::best(), Tier::Scalar]
    };
    for tier in tiers {
        let t = time_per_call(budget, || {
            gf::mul_add_with(tier, black_box(&mut dst[..]), black_box(&src), 0x57)
                .expect("tier is supported");
        });
        step(
            "coding",
            format!("GF mul_add {} {n} B (one product)", tier.name()),
            per_byte(t),
            false,
        );
    }
    let cell = rlnc
        .iter()
        .find(|r| r.generation == COST_GENERATION && r.loss_pct == COST_LOSS_PCT)
        .context("the RLNC rows lack the cost breakdown's cell")?;
    let cell_name = format!("g={COST_GENERATION}, {COST_LOSS_PCT} % loss");
    step(
        "coding",
        format!("RLNC encode {cell_name}, per source byte"),
        1e3 / cell.encode_mb_per_s,
        true,
    );
    step(
        "coding",
        format!("RLNC decode {cell_name}, per source byte (receiver)"),
        1e3 / cell.decode_mb_per_s,
        false,
    );

    // Sealing a 1400-byte body (its last TAG_LEN bytes take the tag) with a
    // short header as associated data, as every data packet is.
    let header = [0x40u8; 11];
    let negotiated = Aead::negotiate(cpu_has_aes_gcm(), true);
    for aead in [Aead::ChaCha20Poly1305, Aead::Aes256Gcm] {
        progress::update(&format!("per-byte cost: {}", aead.name()));
        let key = PacketKey::new(aead, &[7u8; 32]);
        let mut body = src.clone();
        let mut pn = 0u64;
        let seal = time_per_call(budget, || {
            pn += 1;
            key.seal(pn, &header, black_box(&mut body));
        });
        key.seal(1, &header, &mut body);
        let mut out = Vec::with_capacity(n);
        let open = time_per_call(budget, || {
            black_box(key.open(1, &header, black_box(&body), &mut out)).expect("opens");
        });
        let chosen = if aead == negotiated {
            " (this CPU's choice)"
        } else {
            ""
        };
        step(
            "aead",
            format!("seal {}{chosen}", aead.name()),
            per_byte(seal),
            aead == negotiated,
        );
        step(
            "aead",
            format!("open {} (receiver)", aead.name()),
            per_byte(open),
            false,
        );
    }

    progress::update("per-byte cost: UDP send syscall");
    let send = udp_send_time(budget, &src).context("timing the UDP send syscall on loopback")?;
    step(
        "syscall",
        format!("UDP send, one {n} B datagram per call (loopback)"),
        per_byte(send),
        true,
    );

    let sender: f64 = steps
        .iter()
        .filter(|s| s.in_sender_total)
        .map(|s| s.ns_per_byte)
        .sum();
    Ok(Cost {
        packet_bytes: n,
        steps,
        sender_ns_per_byte: sender,
        sender_core_mbit_per_s: 8e3 / sender,
    })
}

/// Seconds per `send` of `payload` on a UDP socket connected to another on
/// 127.0.0.1. Nobody reads the receiver, so once its buffer is full the
/// kernel drops datagrams at the very end of the path, and the send costs
/// what it costs when the datagram is delivered, less the copy into the
/// receiver's queue. One datagram per syscall is an upper bound: convoy-net
/// batches with sendmmsg and UDP GSO where the kernel has them.
fn udp_send_time(budget: Duration, payload: &[u8]) -> Result<f64> {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let tx = std::net::UdpSocket::bind("127.0.0.1:0")?;
    tx.connect(rx.local_addr()?)?;
    let mut failed = None;
    let t = time_per_call(budget, || {
        if let Err(e) = tx.send(black_box(payload)) {
            failed.get_or_insert(e);
        }
    });
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(t),
    }
}

fn targets(kernels: &[KernelRow], rlnc: &[CodeRow]) -> Vec<Target> {
    let best = format!("mul_add {}", Tier::best().name());
    let l1 = kernels
        .iter()
        .find(|r| r.level == "L1" && r.op == best)
        .map_or(0.0, |r| r.of_memcpy);
    let g32 = rlnc.iter().find(|r| r.generation == 32 && r.loss_pct == 10);
    let (enc, dec) = g32.map_or((0.0, 0.0), |r| (r.encode_mb_per_s, r.decode_mb_per_s));
    let target = |what: String, measured: f64, required: f64| Target {
        what,
        measured,
        required,
        met: measured >= required,
    };
    vec![
        target(format!("{best} on L1 buffers, share of memcpy"), l1, 0.40),
        target("RLNC g=32 10% loss encode, MB/s".into(), enc, 2000.0),
        target("RLNC g=32 10% loss decode, MB/s".into(), dec, 2000.0),
    ]
}

pub fn run(opts: &Options) -> Result<()> {
    let budget = Duration::from_millis(if opts.quick { 10 } else { opts.budget_ms });
    let kernels = kernels(opts, budget);
    let rlnc = codes(budget, CodeKind::Rlnc)?;
    let raptorq = codes(budget, CodeKind::RaptorQ)?;
    let cost = cost(budget, &rlnc)?;
    progress::clear();
    let targets = targets(&kernels, &rlnc);
    let report = Report {
        machine: Machine {
            cpu: cpu_model(),
            features: gf::detected_features(),
            best_tier: Tier::best().name(),
        },
        method: "one core; best of 5 batches per cell; MB/s and GB/s are 10^6 and 10^9 bytes \
                 of source data per second; encode = build the encoder and write k source + \
                 round(k*loss) repair symbols; decode = push the surviving source symbols, then \
                 repair symbols until decodable, then take the data; repair = repair-symbol \
                 bytes one built encoder writes per second; per-byte cost = ns of one core \
                 per payload byte on 1400-byte packets, coding from the RLNC g=32 10% row, \
                 the send syscall one datagram per call on loopback",
        kernels,
        rlnc,
        raptorq,
        cost,
        targets,
    };
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

fn render(report: &Report) -> String {
    let m = &report.machine;
    let mut out = format!(
        "convoy bench codec — {} ({}), kernels chosen: {}\n\n",
        m.cpu,
        m.features.join(" "),
        m.best_tier
    );
    let mut kernels = Table::new(&["region op", "level", "bytes", "GB/s", "of memcpy"]);
    for r in &report.kernels {
        kernels.row(vec![
            r.op.clone(),
            r.level.into(),
            r.bytes.to_string(),
            format!("{:.1}", r.gb_per_s),
            format!("{:.0} %", r.of_memcpy * 100.0),
        ]);
    }
    out += &kernels.render();
    for (name, rows) in [("RLNC", &report.rlnc), ("RaptorQ", &report.raptorq)] {
        let mut t = Table::new(&[
            name,
            "symbol B",
            "loss",
            "encode MB/s",
            "decode MB/s",
            "symbols",
            "repair MB/s",
        ]);
        for r in rows.iter() {
            t.row(vec![
                format!("g={}", r.generation),
                r.symbol_size.to_string(),
                format!("{} %", r.loss_pct),
                format!("{:.0}", r.encode_mb_per_s),
                format!("{:.0}", r.decode_mb_per_s),
                r.symbols_to_decode.to_string(),
                format!("{:.0}", r.repair_mb_per_s),
            ]);
        }
        out += "\n";
        out += &t.render();
    }
    let c = &report.cost;
    let mut cost = Table::new(&["per byte, one core", "kind", "ns/B", "in sender total"]);
    for s in &c.steps {
        cost.row(vec![
            s.step.clone(),
            s.kind.into(),
            format!("{:.3}", s.ns_per_byte),
            if s.in_sender_total { "yes" } else { "" }.into(),
        ]);
    }
    out += "\n";
    out += &cost.render();
    out += &format!(
        "sender total: {:.3} ns/B (copy + RLNC encode + seal + send), one core's ceiling {:.0} Mbit/s\n",
        c.sender_ns_per_byte, c.sender_core_mbit_per_s
    );
    out += "\ntargets\n";
    for t in &report.targets {
        out += &format!(
            "  {:<4} {}: {:.2} (need {:.2})\n",
            if t.met { "met" } else { "MISS" },
            t.what,
            t.measured,
            t.required
        );
    }
    out += &format!("\n{}\n", report.method);
    out
}
