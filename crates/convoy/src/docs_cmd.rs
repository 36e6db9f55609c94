//! `convoy completions SHELL` and `convoy man --out DIR`: shell
//! completions (clap_complete) and man pages (clap_mangen) made from the
//! same clap definitions that parse the command line, so they never
//! describe options the binary lacks. The package installs both.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Command};
use clap_complete::Shell;

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Args)]
pub struct ManArgs {
    /// Directory the pages are written to (made if missing): convoy.1 and
    /// one page per subcommand, convoy-serve.1, convoy-fleet-add.1…
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// The completion script for `shell` on stdout.
pub fn completions(args: CompletionsArgs, mut cli: Command) -> Result<()> {
    clap_complete::generate(args.shell, &mut cli, "convoy", &mut std::io::stdout());
    Ok(())
}

/// Writes a page for the command and for every subcommand under it;
/// prints the files written.
pub fn man(args: ManArgs, cli: Command) -> Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot make {}", args.out.display()))?;
    let mut written = Vec::new();
    write_pages(cli, &args.out, &mut written)?;
    for p in &written {
        println!("{}", p.display());
    }
    Ok(())
}

fn write_pages(cmd: Command, dir: &Path, written: &mut Vec<PathBuf>) -> Result<()> {
    // `build` fills in what derive leaves lazy (the version, help flags),
    // which the page prints.
    let mut cmd = cmd;
    cmd.build();
    write_page(&cmd, dir, written)?;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        // A subcommand's page is named after its path: convoy-fleet-add.1.
        let name = format!("{}-{}", cmd.get_name(), sub.get_name());
        let sub = sub
            .clone()
            .name(name.clone())
            .bin_name(name.replace('-', " "));
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

fn write_page(cmd: &Command, dir: &Path, written: &mut Vec<PathBuf>) -> Result<()> {
    let man = clap_mangen::Man::new(cmd.clone()).section("1");
    let path = dir.join(man.get_filename());
    let mut buf = Vec::new();
    man.render(&mut buf)?;
    std::fs::write(&path, buf).with_context(|| format!("cannot write {}", path.display()))?;
    written.push(path);
    Ok(())
}
