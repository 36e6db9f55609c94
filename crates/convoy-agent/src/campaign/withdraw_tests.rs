//! Withdrawals on the agent: a tombstone that outlives a restart and
//! refuses a deployment older than it, and the checks on versions.

use super::*;

const TOML: &str = "name = \"brake\"\npre_seconds = 0.5\npost_seconds = 0.3\n\
    [[signal]]\nname = \"Vehicle.Speed\"\n\
    [[trigger]]\nname = \"fast\"\nwhen = \"Vehicle.Speed > 30\"\n";

fn deployed(version: i64) -> Deployed {
    Deployed {
        name: "brake".into(),
        version,
        toml: TOML.into(),
        withdrawn: false,
    }
}

fn open(dir: &Path) -> (Arc<Campaigns>, Arc<Shared>) {
    let spool = Arc::new(Mutex::new(Spool::open(dir, 1 << 20).unwrap()));
    let status = Arc::new(Shared::default());
    let c = Campaigns::load(dir, spool, status.clone(), Arc::default());
    (c, status)
}

/// (name, version, withdrawn) of each campaign the status shows.
fn shown(status: &Shared) -> Vec<(String, i64, bool)> {
    let snap = status.snapshot();
    snap.campaigns
        .iter()
        .map(|c| (c.name.clone(), c.version, c.withdrawn))
        .collect()
}

#[test]
fn a_withdrawal_outlives_a_restart_and_refuses_older_deployments() {
    let dir = tempfile::tempdir().unwrap();
    let (c, status) = open(dir.path());
    c.apply(&deployed(1)).unwrap();
    assert_eq!(shown(&status), [("brake".into(), 1, false)]);
    let out = c.withdraw("brake", 2).unwrap();
    assert_eq!(out["withdrawn"]["was_running"], true);
    assert_eq!(shown(&status), [("brake".into(), 2, true)]);
    assert!(!c.active.load(Ordering::Relaxed), "nothing runs");
    // The same withdrawal again (a resend after a reconnection): no-op.
    c.withdraw("brake", 2).unwrap();
    let e = c.apply(&deployed(1)).unwrap_err();
    assert!(e.contains("older than its withdrawal (version 2)"), "{e}");
    drop(c);

    // After a restart it is still withdrawn, and does not run.
    let (c, status) = open(dir.path());
    assert_eq!(shown(&status), [("brake".into(), 2, true)]);
    assert!(c.apply(&deployed(1)).is_err());
    // A later deployment runs it again; a withdrawal older than it fails.
    c.apply(&deployed(3)).unwrap();
    assert_eq!(shown(&status), [("brake".into(), 3, false)]);
    let e = c.withdraw("brake", 2).unwrap_err();
    assert!(e.contains("older than the running version 3"), "{e}");
    // Withdrawing one this agent never ran records the tombstone too.
    let out = c.withdraw("other", 1).unwrap();
    assert_eq!(out["withdrawn"]["was_running"], false);
    assert_eq!(
        shown(&status),
        [("brake".into(), 3, false), ("other".into(), 1, true)]
    );
}
