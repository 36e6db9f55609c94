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

fn found(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The completions parse in their shells (bash always; zsh and fish where
/// installed) and name the long-running commands' options.
#[test]
fn the_completions_parse() {
    let dir = std::env::temp_dir().join(format!("convoy-compl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (shell, check) in [("bash", "bash"), ("zsh", "zsh"), ("fish", "fish")] {
        let out = Command::new(env!("CARGO_BIN_EXE_convoy"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        // fish writes options as `-l log-format`, so no leading dashes.
        for word in ["serve", "agent", "log-format", "http-tls"] {
            assert!(text.contains(word), "{shell} completion lacks {word}");
        }
        if !found(check) {
            eprintln!("skipped: {check} not installed (its completion not parsed)");
            continue;
        }
        let path = dir.join(format!("convoy.{shell}"));
        std::fs::write(&path, &text).unwrap();
        let out = Command::new(check).arg("-n").arg(&path).output().unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A page per subcommand, each rendered by groff with every warning on
/// (`-ww`, through preconv for UTF-8) without a word on stderr; the
/// serve page documents the logging options.
#[test]
fn the_man_pages_render() {
    let dir = std::env::temp_dir().join(format!("convoy-man-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_convoy"))
        .args(["man", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let pages: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    for name in [
        "convoy.1",
        "convoy-serve.1",
        "convoy-agent.1",
        "convoy-fleet-token.1",
    ] {
        assert!(pages.iter().any(|p| p.ends_with(name)), "{name}: {pages:?}");
    }
    let serve = std::fs::read_to_string(dir.join("convoy-serve.1")).unwrap();
    assert!(serve.contains(".TH convoy-serve 1"), "{serve}");
    assert!(
        serve.contains("log\\-format") && serve.contains("json"),
        "{serve}"
    );
    if !found("groff") {
        eprintln!("skipped: groff not installed (pages checked for structure only)");
    } else {
        for p in &pages {
            let out = Command::new("groff")
                .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
                .arg(p)
                .output()
                .unwrap();
            assert!(
                out.status.success() && out.stderr.is_empty(),
                "{p}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
