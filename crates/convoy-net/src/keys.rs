//! Key files. The private key file holds both halves (X25519 needs no
//! more, and deriving the public half would need a curve library of our
//! own); FILE.pub holds the public key's hex, which clients are given.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use convoy_proto::crypto::{hex, parse_key_hex};
use convoy_proto::Keypair;

use crate::error::NetError;

fn invalid(path: &Path, why: &str) -> NetError {
    NetError::file(
        path,
        std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_owned()),
    )
}

/// `FILE.pub` next to `FILE`.
pub fn public_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

/// Writes FILE (mode 0600, refusing to overwrite) and FILE.pub.
pub fn write_keypair(path: &Path, kp: &Keypair) -> Result<(), NetError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| NetError::file(path, e))?;
    let body = format!(
        "# convoy private key: keep it secret\nprivate={}\npublic={}\n",
        hex(&kp.private),
        hex(&kp.public)
    );
    f.write_all(body.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| NetError::file(path, e))?;
    let pubp = public_path(path);
    fs::write(&pubp, format!("{}\n", hex(&kp.public))).map_err(|e| NetError::file(&pubp, e))?;
    Ok(())
}

/// Reads a private key file written by [`write_keypair`].
pub fn load_keypair(path: &Path) -> Result<Keypair, NetError> {
    let text = fs::read_to_string(path).map_err(|e| NetError::file(path, e))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .and_then(parse_key_hex)
    };
    match (field("private="), field("public=")) {
        (Some(private), Some(public)) => Ok(Keypair { private, public }),
        _ => Err(invalid(
            path,
            "not a convoy private key file (make one with `convoy keygen --out FILE`)",
        )),
    }
}

/// A server key given as 64 hex digits or as a file (FILE.pub, or the
/// private key file, whose public half is used).
pub fn parse_server_key(arg: &str) -> Result<[u8; 32], NetError> {
    if let Some(k) = parse_key_hex(arg) {
        return Ok(k);
    }
    let path = Path::new(arg);
    let text = fs::read_to_string(path).map_err(|e| NetError::file(path, e))?;
    if let Some(k) = parse_key_hex(text.trim()) {
        return Ok(k);
    }
    text.lines()
        .find_map(|l| l.trim().strip_prefix("public="))
        .and_then(parse_key_hex)
        .ok_or_else(|| invalid(path, "no public key in it (expected 64 hex digits)"))
}
