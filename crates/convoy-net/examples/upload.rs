//! Uploads one file to a `convoy serve` server with the tokio API and
//! waits until the server has it on disk.
//!
//!     cargo run --release -p convoy-net --features tokio --example upload -- FILE 127.0.0.1:4433 server.key.pub

use convoy_net::{parse_server_key, tokio::Client, ClientOptions, NetError};

#[tokio::main]
async fn main() -> Result<(), NetError> {
    let args: Vec<String> = std::env::args().collect();
    let [_, file, addr, key] = &args[..] else {
        eprintln!("usage: upload FILE ADDR SERVER_KEY");
        std::process::exit(2);
    };
    let addr = addr
        .parse()
        .map_err(|_| NetError::Config(format!("bad address {addr}")))?;
    let client = Client::connect(ClientOptions::new(addr, parse_server_key(key)?)).await?;
    let report = client.upload(file).await?;
    println!(
        "stored {} ({} bytes, resumed from {}, BLAKE3 {})",
        report.name, report.bytes, report.resumed_from, report.blake3
    );
    client.close().await;
    Ok(())
}
