//! What the package will install: the hardened systemd units pass
//! `systemd-analyze verify` (with ExecStart pointed at the binary built
//! here, since /usr/bin/convoy is not installed), and the example
//! configurations load.

use std::path::{Path, PathBuf};
use std::process::Command;

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging")
}

#[test]
fn the_units_verify_and_are_hardened() {
    let have = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let dir = std::env::temp_dir().join(format!("convoy-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for unit in ["convoy-serve.service", "convoy-agent.service"] {
        let text = std::fs::read_to_string(packaging().join("systemd").join(unit)).unwrap();
        for hardening in [
            "DynamicUser=yes",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "NoNewPrivileges=yes",
            "CapabilityBoundingSet=\n",
            "SystemCallFilter=@system-service",
            "LoadCredential=",
        ] {
            assert!(text.contains(hardening), "{unit}: {hardening}");
        }
        assert!(text.contains("StateDirectory=convoy"), "{unit}");
        if !have {
            eprintln!("skipped: systemd-analyze not found ({unit} not verified)");
            continue;
        }
        let local = text.replace("/usr/bin/convoy", env!("CARGO_BIN_EXE_convoy"));
        let path = dir.join(unit);
        std::fs::write(&path, local).unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&path)
            .output()
            .unwrap();
        // Warnings about other units on the host are theirs, not ours.
        let err = String::from_utf8_lossy(&out.stderr);
        let ours: Vec<&str> = err.lines().filter(|l| l.contains(unit)).collect();
        assert!(out.status.success() && ours.is_empty(), "{unit}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_example_configs_load() {
    let agent = convoy_agent::config::Config::load(&packaging().join("agent.toml"));
    assert!(agent.is_ok(), "{:?}", agent.err());
    let out = Command::new(env!("CARGO_BIN_EXE_convoy"))
        .args(["serve", "--config"])
        .arg(packaging().join("serve.toml"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
