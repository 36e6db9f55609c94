//! The `convoy` command. Subcommands grow with the project: today it measures
//! the codec; later issues add send, serve, perf, emulate and simulate.

mod agent_cmd;
mod agent_metrics;
mod bench_can;
mod bench_codec;
mod bench_fleet_load;
mod bench_flood;
mod bench_hostile;
mod bench_link;
mod bench_load;
mod bench_server;
mod docs_cmd;
mod emu_cmd;
mod fleet_bench;
mod fleet_bench_http;
mod fleet_campaign;
mod fleet_cmd;
mod fleet_request;
mod logging;
mod net_cmd;
mod net_common;
mod perf_cmd;
mod progress;
mod serve_config;
mod service_cmd;
mod service_log;
mod service_metrics;
mod sim_cmd;
mod simulate_cmd;
mod table;
mod trace_cmd;

use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "convoy",
    version,
    about = "Coded, rate-controlled transport for vehicular links, and its testbed",
    long_about = "convoy moves data between vehicles and the cloud over lossy, \
                  fast-changing links (LTE, Wi-Fi, 802.11p): losses are repaired \
                  with RLNC or RaptorQ repair symbols instead of retransmissions.\n\n\
                  Start with `convoy bench codec` to see how fast the codes run here."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per run, so the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Measure convoy's building blocks on this machine.
    #[command(subcommand)]
    Bench(Bench),
    /// Run a command over emulated links (network namespaces + TUN, driven
    /// by the link model): `convoy emu --link lte:rate=50mbit,delay=20ms
    /// [--server CMD] -- CMD...`; `convoy emu selftest` measures accuracy.
    Emu(emu_cmd::EmuArgs),
    /// Vehicular channel models (802.11p PDR, building shadowing, empirical
    /// LTE, city obstacle coefficient) and per-vehicle link traces from SUMO
    /// mobility: `convoy trace pdr --m 0.7 --alpha 2.3`, `convoy trace
    /// from-mobility --fcd FCD --rsu X,Y --enb X,Y -o DIR`.
    #[command(subcommand)]
    Trace(trace_cmd::TraceCommand),
    /// One transfer in virtual time over the link model, with the protocol
    /// code the real sockets run: `convoy simulate --rate 20mbit --delay
    /// 25ms --loss 10% --size 10MB [--trace FILE] [--both-ways] [--json]`.
    /// Prints goodput against capacity x (1 - loss).
    Simulate(simulate_cmd::SimulateArgs),
    /// The fleet simulator: thousands of vehicles running convoy's own
    /// protocol code (AVE, convoy-proto) in virtual time over 802.11p and
    /// LTE models: `convoy sim fleet SCENARIO.toml [--seed N] [--out DIR]`,
    /// `convoy sim fleet --bench`, `convoy sim sweep SCENARIO.toml --seeds
    /// 1-10 --param KEY=A,B --out DIR` (docs/SIM.md).
    #[command(subcommand)]
    Sim(sim_cmd::SimCommand),
    /// Make a key pair for a server: `convoy keygen --out server.key`
    /// writes server.key (private, mode 0600) and server.key.pub, and
    /// prints the public key that clients pass as --server-key.
    Keygen(net_cmd::KeygenArgs),
    /// Accept uploads over convoy and store them durably: `convoy serve
    /// --listen 0.0.0.0:4433 --dir DIR --key server.key`. Each upload is
    /// written to a temporary file, fsynced and renamed into DIR before the
    /// client is told it is complete. `--config serve.toml` takes the
    /// same settings from a file (flags given here override it).
    #[command(args_override_self = true)]
    Serve(net_cmd::ServeArgs),
    /// Upload files: `convoy send FILE... ADDR --server-key server.key.pub`.
    /// Re-running after an interruption resumes; the server's copy is
    /// checked with BLAKE3.
    Send(net_cmd::SendArgs),
    /// Download a stored file: `convoy get NAME ADDR --server-key KEY
    /// [--out PATH]`; resumes from PATH.convoy-part.
    Get(net_cmd::GetArgs),
    /// Memory-to-memory throughput like iperf3: `convoy perf --server
    /// --listen ADDR --key FILE` on one side, `convoy perf ADDR
    /// --server-key KEY --time 10` on the other; `convoy perf
    /// --loopback-bench` compares with iperf3 TCP on this machine.
    Perf(perf_cmd::PerfArgs),
    /// The fleet registry of a data-service server: `convoy fleet add
    /// truck-7 truck-7.key.pub --dir DIR`, `fleet list`, `fleet revoke
    /// NAME`, `fleet token NAME --key server.key` (for the web view).
    #[command(subcommand)]
    Fleet(fleet_cmd::FleetCommand),
    /// The vehicle side of the data service: `convoy agent --config
    /// agent.toml` collects telemetry and files into a spool and uploads
    /// them by priority and link rules; `convoy agent status --config
    /// agent.toml` shows the spool, the lanes and the last upload.
    Agent(agent_cmd::AgentArgs),
    /// Print a shell completion script: `convoy completions bash >
    /// /etc/bash_completion.d/convoy` (also zsh, fish, elvish, powershell).
    Completions(docs_cmd::CompletionsArgs),
    /// Write the man pages (convoy.1 and one per subcommand, e.g.
    /// convoy-serve.1) into a directory: `convoy man --out DIR`.
    Man(docs_cmd::ManArgs),
}

#[derive(Subcommand)]
enum Bench {
    /// GF(2^8) kernel bandwidth per CPU tier against memcpy, and RLNC and
    /// RaptorQ encode/decode throughput under 0, 10 and 30 % loss.
    ///
    /// Everything is measured in this one run, so compare ratios within a
    /// table rather than across machines or runs.
    Codec(BenchCodecArgs),
    /// Packets per second through one link direction of the link model
    /// (constant 1 Gbit/s with loss and tail drops; optionally a Mahimahi
    /// trace with Gilbert–Elliott loss), in virtual time on one core.
    Link(BenchLinkArgs),
    /// A fleet on this machine: one `convoy serve` (all cores) and N
    /// connections streaming telemetry, some uploading bulk files; prints
    /// handshake times, the server's memory, drops and CPU against the
    /// targets: `convoy bench load --connections 1000`.
    Load(bench_load::LoadArgs),
    /// A handshake flood from forged sources (10,000 Initials/s), garbage,
    /// forged and replayed packets against one `convoy serve` on
    /// 127.0.0.1 while real clients connect: the server's memory, their
    /// handshake times, what was counted and the 3x limit. Needs root.
    Flood(bench_flood::FloodArgs),
    /// Issue 31's attacks (oversized blocks, data before authorization,
    /// a stream flood, out-of-order pieces, a reset beyond the limits)
    /// from a crafted client against a fleet `convoy serve` on 127.0.0.1,
    /// 100 connections each beside 10 honest uploads: the server's memory
    /// and the uploads' goodput against the targets. `--short` is the
    /// form `make test` runs.
    Hostile(bench_hostile::HostileArgs),
    /// candump frames per second decoded with a DBC on one thread (issue
    /// 36: ≥ 1 M frames/s with a 100-message DBC): parsing, decoding, and
    /// decoding into VSS samples as the agent's CAN source does.
    Can(bench_can::BenchCanArgs),
}

#[derive(Args)]
struct BenchLinkArgs {
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Packets offered per workload.
    #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    packets: u64,
    /// A Mahimahi packet-delivery trace to replay as a second workload,
    /// e.g. ../shared/traces/TMobile-LTE-short.down.
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct BenchCodecArgs {
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Far fewer repetitions and a smaller DRAM buffer: checks that the
    /// benchmark runs, but the numbers are noisy.
    #[arg(long)]
    quick: bool,
    /// Time spent per measurement, in milliseconds (best of 5 batches).
    #[arg(long, value_name = "MS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    budget_ms: u64,
}

fn main() -> ExitCode {
    net_common::keep_freed_memory();
    let cli = match command_line() {
        Ok(args) => Cli::parse_from(args),
        Err(e) => {
            eprintln!("convoy: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Bench(Bench::Codec(args)) => bench_codec::run(&bench_codec::Options {
            json: args.json,
            quick: args.quick,
            budget_ms: args.budget_ms,
        }),
        Command::Bench(Bench::Link(args)) => bench_link::run(&bench_link::Options {
            json: args.json,
            packets: args.packets,
            trace: args.trace,
        }),
        Command::Bench(Bench::Load(args)) => bench_load::run(args),
        Command::Bench(Bench::Flood(args)) => bench_flood::run(args),
        Command::Bench(Bench::Hostile(args)) => bench_hostile::run(args),
        Command::Bench(Bench::Can(args)) => bench_can::run(args),
        Command::Emu(args) => emu_cmd::run(args),
        Command::Trace(cmd) => trace_cmd::run(cmd),
        Command::Simulate(args) => simulate_cmd::run_simulate(args),
        Command::Sim(cmd) => sim_cmd::run(cmd),
        Command::Keygen(args) => net_cmd::keygen(args),
        Command::Serve(args) => net_cmd::serve(args),
        Command::Send(args) => net_cmd::send(args),
        Command::Get(args) => net_cmd::get(args),
        Command::Perf(args) => perf_cmd::run(args),
        Command::Fleet(cmd) => fleet_cmd::run(cmd),
        Command::Agent(args) => agent_cmd::run(args),
        Command::Completions(args) => docs_cmd::completions(args, Cli::command()),
        Command::Man(args) => docs_cmd::man(args, Cli::command()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `serve` and `agent` with --log-format json: every stderr line is
        // JSON, their last word too.
        Err(e) if logging::json_installed() => {
            tracing::error!(target: "convoy", error = format!("{e:#}"), "exiting");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("convoy: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The command line, with `convoy serve --config FILE`'s settings put in
/// front of the flags given (which so override them).
fn command_line() -> anyhow::Result<Vec<std::ffi::OsString>> {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let text: Vec<String> = raw
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Some(path) = serve_config::config_path(&text) else {
        return Ok(raw);
    };
    let cli = Cli::command();
    let serve = cli.find_subcommand("serve").expect("serve is a subcommand");
    Ok(serve_config::expand(text, &path, serve)?
        .into_iter()
        .map(Into::into)
        .collect())
}
