//! Uploads one file to a `convoy serve` server with the blocking API and
//! waits until the server has it on disk.
//!
//!     cargo run --release -p convoy-net --example upload_blocking -- FILE 127.0.0.1:4433 server.key.pub

use convoy_net::{parse_server_key, Client, ClientOptions, NetError};

fn main() -> Result<(), NetError> {
    let args: Vec<String> = std::env::args().collect();
    let [_, file, addr, key] = &args[..] else {
        eprintln!("usage: upload_blocking FILE ADDR SERVER_KEY");
        std::process::exit(2);
    };
    let addr = addr
        .parse()
        .map_err(|_| NetError::Config(format!("bad address {addr}")))?;
    let key = parse_server_key(key)?;
    let mut client = Client::connect(ClientOptions::new(addr, key))?;
    let report = client.upload(std::path::Path::new(file), None, None)?;
    println!(
        "stored {} ({} bytes, resumed from {}, BLAKE3 {})",
        report.name, report.bytes, report.resumed_from, report.blake3
    );
    client.close();
    Ok(())
}
