//! Network namespaces a test makes with `ip netns` and deletes on drop
//! (with the veth pairs in them), so a failing test leaves none behind.
//! Needs root and iproute2; [`Netns::new`] says why it cannot and returns
//! `None` otherwise.

use std::process::Command;

/// A named network namespace, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// `ip netns add convoy-TAG-PID`; `None` (with a line on stderr naming
    /// `test`) without root or iproute2.
    pub fn new(test: &str, tag: &str) -> Option<Netns> {
        // SAFETY: plain syscall.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("{test}: skipped: network namespaces need root");
            return None;
        }
        let name = format!("convoy-{tag}-{}", std::process::id());
        // A namespace of this name left by an earlier run of this process
        // id cannot be ours any more.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        match Command::new("ip").args(["netns", "add", &name]).output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                eprintln!(
                    "{test}: skipped: ip netns add: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                return None;
            }
            Err(e) => {
                eprintln!("{test}: skipped: no ip (iproute2): {e}");
                return None;
            }
        }
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        Some(ns)
    }

    /// `ip -n NAME ARGS`, which must succeed.
    pub fn ip(&self, args: &[&str]) {
        let out = Command::new("ip")
            .args(["-n", &self.name])
            .args(args)
            .output()
            .expect("ip runs");
        assert!(
            out.status.success(),
            "ip -n {} {}: {}",
            self.name,
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A command for `program` inside the namespace (`ip netns exec`,
    /// which execs it: the child's pid is the program's).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// A veth pair from this namespace (`here`) to `other` (`there`).
    pub fn veth(&self, here: &str, other: &Netns, there: &str) {
        self.ip(&[
            "link",
            "add",
            here,
            "type",
            "veth",
            "peer",
            "name",
            there,
            "netns",
            &other.name,
        ]);
        self.ip(&["link", "set", here, "up"]);
        other.ip(&["link", "set", there, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
