//! `convoy serve --config serve.toml`: a file of the same settings as the
//! flags, one key per long option (`http_tls` or `http-tls` for
//! `--http-tls`), turned into arguments placed before the command line's,
//! so a flag given on the command line overrides the file.
//!
//! An unknown key, or a value of the wrong kind, is a one-line error that
//! names the file and the key. Relative paths (`dir`, `key`, `http_tls`,
//! `overlay`) are relative to the file, as in the agent's configuration.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// Keys whose values are paths, resolved against the file's directory.
const PATH_KEYS: [&str; 4] = ["dir", "key", "http-tls", "overlay"];

/// Keys that cannot come from the file: the file itself, and help.
const NOT_IN_FILE: [&str; 3] = ["config", "help", "version"];

/// The `--config FILE` of a `convoy serve` command line, if any.
pub fn config_path(args: &[String]) -> Option<String> {
    if args.get(1).map(String::as_str) != Some("serve") {
        return None;
    }
    let mut it = args.iter().skip(2);
    while let Some(a) = it.next() {
        if a == "--config" {
            return it.next().cloned();
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(p.to_owned());
        }
        if a == "--" {
            break;
        }
    }
    None
}

/// `args` with the file's settings inserted right after `serve`.
/// `serve` is clap's description of the subcommand: its long options are
/// the keys a file may hold.
pub fn expand(args: Vec<String>, path: &str, serve: &clap::Command) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("{path}: {}", one_line(&e.to_string())))?;
    let base = Path::new(path).parent().unwrap_or(Path::new("."));
    let mut from_file = Vec::new();
    for (key, value) in &table {
        let flag = key.replace('_', "-");
        let Some(arg) = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(flag.as_str()))
            .filter(|_| !NOT_IN_FILE.contains(&flag.as_str()))
        else {
            bail!(
                "{path}: unknown key {key:?} (the keys are convoy serve's long options, \
                 e.g. listen, dir, key, http, http_tls, catalog, store; see convoy serve --help)"
            );
        };
        let takes_value = arg.get_action().takes_values();
        let is_path = PATH_KEYS.contains(&flag.as_str());
        let scalar = |v: &toml::Value| -> Result<String> {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(x) => x.to_string(),
                _ => bail!("{path}: {key}: expected a string or a number"),
            };
            Ok(
                if is_path && Path::new(&s).is_relative() && !s.contains("://") {
                    base.join(&s).display().to_string()
                } else {
                    s
                },
            )
        };
        match (value, takes_value) {
            (toml::Value::Boolean(true), false) => from_file.push(format!("--{flag}")),
            (toml::Value::Boolean(false), false) => {}
            (_, false) => bail!("{path}: {key}: expected true or false"),
            (toml::Value::Array(items), true) => {
                from_file.push(format!("--{flag}"));
                for v in items {
                    from_file.push(scalar(v)?);
                }
            }
            (v, true) => {
                from_file.push(format!("--{flag}"));
                from_file.push(scalar(v)?);
            }
        }
    }
    let mut out = Vec::with_capacity(args.len() + from_file.len());
    out.extend(args.iter().take(2).cloned());
    out.extend(from_file);
    out.extend(args.into_iter().skip(2));
    Ok(out)
}

/// TOML's errors span lines (the line quoted, a caret): one line here.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve() -> clap::Command {
        clap::Command::new("serve")
            .arg(clap::Arg::new("listen").long("listen"))
            .arg(clap::Arg::new("dir").long("dir"))
            .arg(clap::Arg::new("http_tls").long("http-tls").num_args(2))
            .arg(
                clap::Arg::new("fleet")
                    .long("fleet")
                    .action(clap::ArgAction::SetTrue),
            )
            .arg(clap::Arg::new("config").long("config"))
    }

    /// Writes `text` to a configuration file in a fresh directory, which
    /// lives as long as the returned guard.
    fn write(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("convoy.toml");
        std::fs::write(&p, text).unwrap();
        (dir, p.display().to_string())
    }

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn file_settings_go_before_the_command_line_so_flags_win() {
        let (dir, p) = write(
            "listen = \"0.0.0.0:4433\"\ndir = \"data\"\nfleet = true\nhttp_tls = [\"c.pem\", \"/k.pem\"]\n",
        );
        let cli = args(&["convoy", "serve", "--config", &p, "--listen", "127.0.0.1:1"]);
        assert_eq!(config_path(&cli).as_deref(), Some(p.as_str()));
        let out = expand(cli, &p, &serve()).unwrap();
        let d = dir.path().display();
        assert_eq!(
            out,
            args(&[
                "convoy",
                "serve",
                "--dir",
                &format!("{d}/data"),
                "--fleet",
                "--http-tls",
                &format!("{d}/c.pem"),
                "/k.pem",
                "--listen",
                "0.0.0.0:4433",
                "--config",
                &p,
                "--listen",
                "127.0.0.1:1"
            ])
        );
    }

    #[test]
    fn unknown_keys_and_wrong_kinds_are_one_line_errors() {
        let (_dir, p) = write("listn = \"x\"\n");
        let e = expand(args(&["convoy", "serve"]), &p, &serve())
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown key \"listn\""), "{e}");
        assert!(!e.contains('\n'));
        let (_dir, p) = write("fleet = \"yes\"\n");
        let e = expand(args(&["convoy", "serve"]), &p, &serve())
            .unwrap_err()
            .to_string();
        assert!(e.contains("fleet: expected true or false"), "{e}");
        let (_dir, p) = write("config = \"other.toml\"\n");
        assert!(expand(args(&["convoy", "serve"]), &p, &serve()).is_err());
        let (_dir, p) = write("listen = \n");
        let e = expand(args(&["convoy", "serve"]), &p, &serve())
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
        assert_eq!(
            config_path(&args(&["convoy", "agent", "--config", "a"])),
            None
        );
    }
}
