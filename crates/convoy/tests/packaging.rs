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

/// The newest target/debian/convoy_*.deb (`make deb`), or $CONVOY_DEB.
fn built_deb() -> PathBuf {
    if let Some(p) = std::env::var_os("CONVOY_DEB") {
        return p.into();
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debian");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run make deb)", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("convoy_") && n.ends_with(".deb"))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("no convoy_*.deb in target/debian: run make deb")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `make test-deb`: what the package holds, that its binary runs and its
/// units verify where they are installed, and that dpkg would install it.
#[test]
#[ignore = "needs the package: make test-deb"]
fn the_deb_holds_the_binary_units_configs_man_pages_and_completions() {
    let deb = built_deb();
    eprintln!("checking {}", deb.display());
    let info = run(Command::new("dpkg-deb").arg("--info").arg(&deb));
    for field in [
        "Package: convoy",
        "Architecture: ",
        "Depends: ",
        "Section: net",
        "Maintainer: ",
    ] {
        assert!(info.contains(field), "{field}:\n{info}");
    }
    assert!(info.contains("conffiles"), "no conffiles:\n{info}");
    let contents = run(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    for path in [
        "./usr/bin/convoy",
        "./lib/systemd/system/convoy-serve.service",
        "./lib/systemd/system/convoy-agent.service",
        "./etc/convoy/serve.toml",
        "./etc/convoy/agent.toml",
        "./usr/share/man/man1/convoy.1.gz",
        "./usr/share/man/man1/convoy-serve.1.gz",
        "./usr/share/man/man1/convoy-agent.1.gz",
        "./usr/share/bash-completion/completions/convoy",
        "./usr/share/zsh/vendor-completions/_convoy",
        "./usr/share/fish/vendor_completions.d/convoy.fish",
        "./usr/share/doc/convoy/SERVICE.md",
        "./usr/share/doc/convoy/copyright",
    ] {
        assert!(
            contents.lines().any(|l| l.ends_with(path)),
            "{path} missing:\n{contents}"
        );
    }
    assert!(
        contents
            .lines()
            .any(|l| l.starts_with("-rwxr-xr-x 0/0") && l.ends_with("./usr/bin/convoy")),
        "the binary is not root's and executable:\n{contents}"
    );

    // Unpacked: the binary runs, the pages render, the completion parses,
    // and the units verify pointing at the unpacked binary.
    let root = std::env::temp_dir().join(format!("convoy-deb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    let bin = root.join("usr/bin/convoy");
    let version = run(Command::new(&bin).arg("--version"));
    assert!(version.starts_with("convoy "), "{version}");
    run(Command::new("bash")
        .arg("-n")
        .arg(root.join("usr/share/bash-completion/completions/convoy")));
    let page = run(Command::new("man")
        .arg("-l")
        .arg(root.join("usr/share/man/man1/convoy-serve.1.gz"))
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "80"));
    assert!(page.contains("--log-format"), "{page}");
    if found("systemd-analyze") {
        for unit in ["convoy-serve.service", "convoy-agent.service"] {
            let text = std::fs::read_to_string(root.join("lib/systemd/system").join(unit)).unwrap();
            let path = root.join(unit);
            std::fs::write(
                &path,
                text.replace("/usr/bin/convoy", bin.to_str().unwrap()),
            )
            .unwrap();
            let out = Command::new("systemd-analyze")
                .arg("verify")
                .arg(&path)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            let ours: Vec<&str> = err.lines().filter(|l| l.contains(unit)).collect();
            assert!(out.status.success() && ours.is_empty(), "{unit}: {err}");
        }
    }
    let _ = std::fs::remove_dir_all(&root);

    // dpkg's own answer on installing it here, without installing it.
    if found("dpkg") {
        let out = Command::new("dpkg")
            .args(["--dry-run", "-i"])
            .arg(&deb)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "dpkg --dry-run -i: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if found("lintian") {
        // Errors fail the test; warnings are printed for a person to read.
        let out = Command::new("lintian").arg(&deb).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        eprintln!("lintian:\n{text}");
        assert!(!text.lines().any(|l| l.starts_with("E: ")), "{text}");
    } else {
        eprintln!("skipped: lintian not installed");
    }
}
