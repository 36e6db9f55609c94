//! Campaigns end to end (issue 36), with real `convoy serve` and `convoy
//! agent` processes on loopback: a campaign deployed while the vehicle is
//! away reaches it when it connects; its triggers' windows arrive at the
//! server complete (every sample in [t - pre, t + post], none missing, none
//! twice); a new version replaces it without a restart and the agent
//! reports which runs; bad campaigns and a vehicle's token are refused with
//! one line, and nothing is queued. A withdrawn campaign stops without a
//! restart (no new windows, those spooled before still arrive), online or
//! queued for a vehicle that is away; a signal a vehicle declares in its
//! `extra_signals` is accepted once every targeted vehicle declared it.
//! Windows that ask for an unmetered link wait on a metered one.
//!
//! `CAMPAIGN_TRIGGERS=100 cargo test --release -p convoy --test campaigns
//! -- --nocapture` is issue 36's target run (100 triggers); the default,
//! 5, keeps `make test` within seconds.

mod net_support;
mod service_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use net_support::{bin, Proc};
use service_support::{convoy, ok, Fleet};

const CAMPAIGN: &str = r#"
name = "brake"
pre_seconds = 0.5
post_seconds = 0.3
[[signal]]
name = "Vehicle.Speed"
[[signal]]
name = "Vehicle.Private.Brake"
[[trigger]]
name = "press"
when = "Vehicle.Speed > 30 && rising(Vehicle.Private.Brake)"
"#;

/// `convoy agent` on `cfg`, its output discarded: with `feed`, run until
/// idle and read samples from stdin (the test writes them); without, run
/// until stopped.
fn spawn_agent(cfg: &Path, feed: bool) -> Proc {
    let mut cmd = Command::new(bin());
    cmd.arg("agent");
    if feed {
        cmd.arg("--until-idle");
    }
    cmd.arg("--config")
        .arg(cfg)
        .stdin(if feed { Stdio::piped() } else { Stdio::null() })
        .stderr(Stdio::null());
    Proc(Some(cmd.spawn().unwrap()))
}

/// `POST /api/campaigns/withdraw` of campaign "brake" with `who`'s token.
fn post_withdraw(f: &Fleet, who: &str) -> std::process::Output {
    f.curl()
        .args([
            "-s",
            "-H",
            &format!("Authorization: Bearer {}", f.token(who)),
        ])
        .args(["-d", r#"{"name": "brake"}"#])
        .arg(format!("{}/api/campaigns/withdraw", f.base_url()))
        .output()
        .unwrap()
}

fn deploy(f: &Fleet, who: &str, file: &Path, vehicles: &str) -> std::process::Output {
    campaign_cmd(
        f,
        who,
        &["deploy", file.to_str().unwrap(), "--vehicles", vehicles],
    )
}

/// `convoy fleet campaign --token TOKEN --key … ARGS` as `who`.
fn campaign_cmd(f: &Fleet, who: &str, sub: &[&str]) -> std::process::Output {
    let token = f.token(who);
    let mut args = vec![
        "fleet".to_string(),
        "campaign".into(),
        "--token".into(),
        token,
        "--key".into(),
        f.key.to_str().unwrap().into(),
    ];
    args.extend(f.catalog_args());
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.extend(sub);
    convoy(&a)
}

/// The vehicle's `campaign` request rows' states, by version.
fn states(f: &Fleet) -> BTreeMap<i64, String> {
    let doc = f.api("ops", "/api/campaigns");
    doc["campaigns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["version"].as_i64().unwrap(),
                c["vehicles"][0]["state"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string(),
            )
        })
        .collect()
}

fn wait_state(f: &Fleet, version: i64, state: &str, limit: Duration) {
    let end = Instant::now() + limit;
    loop {
        let s = states(f);
        if s.get(&version).map(String::as_str) == Some(state) {
            return;
        }
        assert!(
            Instant::now() < end,
            "campaign v{version} not {state}: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Windows stored for `vehicle`: trigger time → the (t_ns, path) of each
/// sample, in file order.
fn stored_windows(store: &Path, vehicle: &str) -> BTreeMap<i64, Vec<(i64, String)>> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<PathBuf> = vec![store.join(vehicle)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let s = p.to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if s.contains("/campaign/brake/") && s.ends_with(".jsonl.zst") {
                let t: i64 = s
                    .trim_end_matches(".jsonl.zst")
                    .rsplit('-')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                let raw = zstd::decode_all(std::fs::File::open(&p).unwrap()).unwrap();
                let samples = String::from_utf8(raw)
                    .unwrap()
                    .lines()
                    .map(|l| {
                        let v: serde_json::Value = serde_json::from_str(l).unwrap();
                        (
                            v["t_ns"].as_i64().unwrap(),
                            v["path"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect();
                out.insert(t, samples);
            }
        }
    }
    out
}

#[test]
fn triggered_windows_arrive_complete_and_campaigns_are_versioned() {
    let triggers: usize = std::env::var("CAMPAIGN_TRIGGERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let f = Fleet::start("campaigns", &["truck-7"], &[]);
    let file = f.dir.path().join("brake.toml");
    std::fs::write(&file, CAMPAIGN).unwrap();

    // Bad input: one line naming the place, and nothing recorded.
    let bad = f.dir.path().join("bad.toml");
    std::fs::write(&bad, CAMPAIGN.replace("Speed > 30 &&", "Sped > 30 &&")).unwrap();
    let out = deploy(&f, "ops", &bad, "truck-7");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.toml: trigger 1 (\"press\"): unknown VSS signal \"Vehicle.Sped\""),
        "{err}"
    );
    std::fs::write(
        &bad,
        CAMPAIGN.replace("post_seconds = 0.3", "post_seconds = 0.3 x"),
    )
    .unwrap();
    let err = String::from_utf8_lossy(&deploy(&f, "ops", &bad, "truck-7").stderr).into_owned();
    assert!(err.contains("bad.toml: line 4, column"), "{err}");
    let out = deploy(&f, "truck-7", &file, "truck-7");
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("campaigns need an operator's token: truck-7 is a vehicle"));
    let post = f
        .curl()
        .args([
            "-s",
            "-H",
            &format!("Authorization: Bearer {}", f.token("truck-7")),
        ])
        .args([
            "-d",
            &serde_json::json!({"campaign": CAMPAIGN, "vehicles": ["truck-7"]}).to_string(),
        ])
        .arg(format!("{}/api/campaigns", f.base_url()))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&post.stdout).contains("is a vehicle"));
    assert!(states(&f).is_empty(), "nothing deployed");

    // Deployed while the vehicle is away: queued, delivered when it connects.
    let out = ok(&deploy(&f, "ops", &file, "truck-7"));
    assert!(
        out.contains("campaign brake version 1 queued for truck-7"),
        "{out}"
    );
    let spool = f.dir.path().join("spool");
    let cfg = f.agent_config("truck-7", &spool, "[[source]]\nkind = \"stdin\"\n");
    let mut agent = spawn_agent(&cfg, true);
    wait_state(&f, 1, "done", Duration::from_secs(20));

    // 100 Hz of speed and brake; the brake pressed for 0.1 s every second
    // above 30 km/h (a trigger each), and once at 20 km/h (none).
    let t0 = (service_support::now_s() - 3600) * 1_000_000_000;
    let mut input = String::new();
    let mut all: Vec<(i64, String)> = Vec::new();
    let mut fired = Vec::new();
    let ticks = (triggers as i64 + 2) * 100;
    for i in 0..ticks {
        let t = t0 + i * 10_000_000;
        let second = i / 100;
        let speed = if second == 0 { 20.0 } else { 40.0 };
        // The last second has no press: it closes the last window.
        let pressed = (50..60).contains(&(i % 100)) && second <= triggers as i64;
        if i % 100 == 50 && (1..=triggers as i64).contains(&second) {
            fired.push(t);
        }
        for (path, value) in [
            ("Vehicle.Speed", serde_json::json!(speed)),
            ("Vehicle.Private.Brake", serde_json::json!(pressed)),
        ] {
            input += &format!("{{\"t_ns\":{t},\"path\":\"{path}\",\"value\":{value}}}\n");
            all.push((t, path.to_string()));
        }
    }
    {
        let mut stdin = agent.0.as_mut().unwrap().stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
    }
    let exit = agent.wait_output(Duration::from_secs(120));
    assert!(exit.status.success());
    let windows = stored_windows(&f.store, "truck-7");
    let (pre, post) = (500_000_000i64, 300_000_000i64);
    let mut missing = 0usize;
    let mut extra = 0usize;
    let mut duplicated = 0usize;
    for t in &fired {
        let want: BTreeSet<(i64, String)> = all
            .iter()
            .filter(|(s, _)| *s >= t - pre && *s <= t + post)
            .cloned()
            .collect();
        let got = windows.get(t).cloned().unwrap_or_default();
        let set: BTreeSet<(i64, String)> = got.iter().cloned().collect();
        duplicated += got.len() - set.len();
        missing += want.difference(&set).count();
        extra += set.difference(&want).count();
    }
    println!(
        "campaign windows: {} triggers, {} windows stored, {} samples expected, {missing} missing, {extra} outside their window, {duplicated} duplicated",
        fired.len(),
        windows.len(),
        fired.len() * 2 * 81
    );
    assert_eq!(
        windows.len(),
        fired.len(),
        "one window per trigger, none at 20 km/h"
    );
    assert_eq!((missing, extra, duplicated), (0, 0, 0));

    // In Parquet each sample is once under .telemetry/ (windows hold
    // copies); the windows are under .windows/, apart.
    let in_parquet = |rows: &[serde_json::Value], prefix: &str| -> (usize, i64) {
        let mine = rows
            .iter()
            .filter(|r| r["parquet"].as_str().is_some_and(|p| p.starts_with(prefix)));
        mine.fold((0, 0), |(n, s), r| {
            (n + 1, s + r["samples"].as_i64().unwrap())
        })
    };
    let rows = f.wait_uploads("every window indexed", |rows| {
        rows.iter().all(|r| r["state"] == "indexed")
            && in_parquet(rows, ".windows/vehicle=truck-7/campaign=brake/").0 == fired.len()
    });
    let window_samples: usize = windows.values().map(Vec::len).sum();
    assert_eq!(
        in_parquet(&rows, ".telemetry/").1,
        all.len() as i64,
        "each sample once"
    );
    assert_eq!(
        in_parquet(&rows, ".windows/").1,
        window_samples as i64,
        "the windows' samples, apart"
    );

    // A new version replaces the running one without a restart, and the
    // agent reports which runs.
    let mut agent = spawn_agent(&cfg, false);
    let v2 = CAMPAIGN.replace("pre_seconds = 0.5", "pre_seconds = 1");
    std::fs::write(&file, v2).unwrap();
    assert!(ok(&deploy(&f, "ops", &file, "truck-7")).contains("version 2"));
    wait_state(&f, 2, "done", Duration::from_secs(20));
    let end = Instant::now() + Duration::from_secs(5);
    let status = loop {
        let s = ok(&convoy(&[
            "agent",
            "status",
            "--json",
            "--config",
            cfg.to_str().unwrap(),
        ]));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        let c = v["agent"]["campaigns"].clone();
        if c[0]["version"] == 2 || Instant::now() > end {
            break c;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status[0]["name"], "brake");
    assert_eq!(status[0]["version"], 2, "{status}");
    agent.kill();
}

/// 100 Hz of speed (40 km/h) and brake from second `first` of `t0_ns` for
/// `seconds` seconds, the brake pressed for 0.1 s in each but the last (a
/// trigger each; the last second closes the last window). The input, and
/// the trigger times.
fn presses(t0_ns: i64, first: i64, seconds: i64) -> (String, Vec<i64>) {
    let mut input = String::new();
    let mut fired = Vec::new();
    for i in first * 100..(first + seconds) * 100 {
        let t = t0_ns + i * 10_000_000;
        let pressed = (50..60).contains(&(i % 100)) && i / 100 < first + seconds - 1;
        if pressed && i % 100 == 50 {
            fired.push(t);
        }
        input += &format!("{{\"t_ns\":{t},\"path\":\"Vehicle.Speed\",\"value\":40.0}}\n");
        input +=
            &format!("{{\"t_ns\":{t},\"path\":\"Vehicle.Private.Brake\",\"value\":{pressed}}}\n");
    }
    (input, fired)
}

/// `convoy agent status --json`'s campaigns, polled until `until` holds
/// (or 10 s pass).
fn agent_campaigns(cfg: &Path, until: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let s = ok(&convoy(&[
            "agent",
            "status",
            "--json",
            "--config",
            cfg.to_str().unwrap(),
        ]));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        let c = v["agent"]["campaigns"].clone();
        if until(&c) || Instant::now() > end {
            return c;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_withdrawn_campaign_stops_without_a_restart() {
    let f = Fleet::start("campaign-withdraw", &["truck-7"], &[]);
    let file = f.dir.path().join("brake.toml");
    std::fs::write(&file, CAMPAIGN).unwrap();

    // Refused: a vehicle's token (command and API), a campaign never
    // deployed, a vehicle it was never deployed to.
    let out = campaign_cmd(&f, "truck-7", &["withdraw", "brake"]);
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("campaigns need an operator's token: truck-7 is a vehicle"));
    let post = post_withdraw(&f, "truck-7");
    let body = String::from_utf8_lossy(&post.stdout);
    assert!(
        body.contains("campaigns need an operator's token: truck-7 is a vehicle"),
        "{body}"
    );
    let out = campaign_cmd(&f, "ops", &["withdraw", "brake"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no campaign named \"brake\" was deployed")
    );
    ok(&deploy(&f, "ops", &file, "truck-7"));
    let out = campaign_cmd(&f, "ops", &["withdraw", "brake", "--vehicles", "truck-9"]);
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("campaign \"brake\" was never deployed to \"truck-9\""));
    assert_eq!(states(&f).len(), 1, "only the deployment is recorded");

    // Running: two triggers, their windows spooled.
    let spool = f.dir.path().join("spool");
    let cfg = f.agent_config("truck-7", &spool, "[[source]]\nkind = \"stdin\"\n");
    let mut agent = spawn_agent(&cfg, true);
    wait_state(&f, 1, "done", Duration::from_secs(20));
    let t0 = (service_support::now_s() - 3600) * 1_000_000_000;
    let (before, fired) = presses(t0, 0, 3);
    assert_eq!(fired.len(), 2);
    let mut stdin = agent.0.as_mut().unwrap().stdin.take().unwrap();
    stdin.write_all(before.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let c = agent_campaigns(&cfg, |c| c[0]["windows_spooled"] == 2);
    assert_eq!(c[0]["windows_spooled"], 2, "{c}");

    // Withdrawn through the API while it runs: the agent stops it at once.
    let post = post_withdraw(&f, "ops");
    let reply: serde_json::Value = serde_json::from_slice(&post.stdout).unwrap();
    assert_eq!(reply["campaign"]["version"], 2, "{reply}");
    assert_eq!(reply["campaign"]["withdrawn"], true, "{reply}");
    wait_state(&f, 2, "done", Duration::from_secs(20));
    let c = agent_campaigns(&cfg, |c| c[0]["withdrawn"] == true);
    assert_eq!(
        (c[0]["name"].clone(), c[0]["version"].clone()),
        ("brake".into(), 2.into()),
        "{c}"
    );
    assert_eq!(c[0]["withdrawn"], true, "{c}");
    let text = ok(&convoy(&[
        "agent",
        "status",
        "--config",
        cfg.to_str().unwrap(),
    ]));
    assert!(
        text.contains("campaign brake withdrawn at version 2"),
        "{text}"
    );
    let list = ok(&campaign_cmd(&f, "ops", &["list"]));
    assert!(list.contains("brake v2 withdrawn by ops"), "{list}");
    let doc = f.api("ops", "/api/campaigns");
    assert_eq!(doc["campaigns"][0]["withdrawn"], true, "{doc}");

    // Three more presses after the withdrawal: no window for any of them;
    // the two from before arrive.
    let (after, more) = presses(t0, 3, 4);
    assert_eq!(more.len(), 3);
    stdin.write_all(after.as_bytes()).unwrap();
    drop(stdin);
    assert!(agent.wait_output(Duration::from_secs(60)).status.success());
    let windows = stored_windows(&f.store, "truck-7");
    assert_eq!(
        windows.keys().copied().collect::<Vec<_>>(),
        fired,
        "only the windows from before"
    );

    // Away: a new deployment and its withdrawal wait in the catalog and
    // reach the vehicle, in order, when it connects.
    ok(&deploy(&f, "ops", &file, "truck-7"));
    let out = ok(&campaign_cmd(
        &f,
        "ops",
        &["withdraw", "brake", "--vehicles", "truck-7"],
    ));
    assert!(
        out.contains("campaign brake withdrawn as version 4, queued for truck-7"),
        "{out}"
    );
    let mut agent = spawn_agent(&cfg, false);
    wait_state(&f, 3, "done", Duration::from_secs(20));
    wait_state(&f, 4, "done", Duration::from_secs(20));
    let c = agent_campaigns(&cfg, |c| c[0]["version"] == 4);
    assert_eq!(
        (c[0]["version"].clone(), c[0]["withdrawn"].clone()),
        (4.into(), true.into()),
        "{c}"
    );
    assert_eq!(c.as_array().map(Vec::len), Some(1), "nothing runs: {c}");
    agent.kill();
}

#[test]
fn a_signal_every_targeted_vehicle_declares_is_accepted() {
    let f = Fleet::start("campaign-extra", &["truck-7", "truck-8"], &[]);
    let file = f.dir.path().join("boost.toml");
    std::fs::write(
        &file,
        CAMPAIGN
            .replace("name = \"brake\"", "name = \"boost\"")
            .replace("Vehicle.Private.Brake", "Vehicle.Acme.Boost"),
    )
    .unwrap();
    let unknown =
        "boost.toml: signal 2 (\"Vehicle.Acme.Boost\"): unknown VSS signal \"Vehicle.Acme.Boost\"";
    // No vehicle has declared it yet.
    let out = deploy(&f, "ops", &file, "truck-7");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(unknown),
        "{out:?}"
    );

    // truck-7 declares it in its configuration and says so when it connects.
    let spool = f.dir.path().join("spool-7");
    let cfg = f.agent_config(
        "truck-7",
        &spool,
        "extra_signals = [\"Vehicle.Acme.Boost\"]\n[[source]]\nkind = \"stdin\"\n",
    );
    let mut agent = spawn_agent(&cfg, false);
    let end = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = deploy(&f, "ops", &file, "truck-7");
        if out.status.success() || Instant::now() > end {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(ok(&out).contains("campaign boost version 1 queued for truck-7"));
    wait_state(&f, 1, "done", Duration::from_secs(20));
    // truck-8 never declared it: a deployment to both is refused, whole.
    let out = deploy(&f, "ops", &file, "truck-7,truck-8");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(unknown),
        "{out:?}"
    );
    assert_eq!(states(&f).len(), 1);
    agent.kill();
}

/// A campaign whose windows ask for an unmetered link: on the metered LTE
/// link its windows wait in the spool while the vehicle's telemetry (which
/// that link carries) goes; on Wi-Fi they follow, complete.
#[test]
fn windows_that_ask_for_an_unmetered_link_wait_for_one() {
    let f = Fleet::start("campaign-metered", &["truck-7"], &[]);
    let file = f.dir.path().join("brake.toml");
    std::fs::write(
        &file,
        format!("{CAMPAIGN}[upload]\nunmetered_only = true\n"),
    )
    .unwrap();
    ok(&deploy(&f, "ops", &file, "truck-7"));
    let link = f.dir.path().join("link");
    std::fs::write(&link, "lte\n").unwrap();
    let spool = f.dir.path().join("spool");
    let cfg = f.agent_config(
        "truck-7",
        &spool,
        &format!(
            "link_file = {link:?}\n[[link]]\nname = \"wifi\"\n[[link]]\nname = \"lte\"\nmetered = true\n\
             [[source]]\nkind = \"stdin\"\n"
        ),
    );
    let mut agent = spawn_agent(&cfg, true);
    wait_state(&f, 1, "done", Duration::from_secs(20));
    let t0 = (service_support::now_s() - 3600) * 1_000_000_000;
    let (input, fired) = presses(t0, 0, 3);
    assert_eq!(fired.len(), 2);
    let mut stdin = agent.0.as_mut().unwrap().stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let c = agent_campaigns(&cfg, |c| c[0]["windows_spooled"] == 2);
    assert_eq!(c[0]["windows_spooled"], 2, "{c}");

    // Every telemetry sample reaches the server over LTE. The windows
    // were spooled before the last telemetry segment closed, and their
    // class (events) goes first where it may: had LTE been allowed to
    // them, they would be stored by now.
    let fed = input.lines().count() as i64;
    f.wait_uploads("all telemetry over LTE", |rows| {
        rows.iter()
            .filter(|r| {
                r["parquet"]
                    .as_str()
                    .is_some_and(|p| p.starts_with(".telemetry/"))
            })
            .map(|r| r["samples"].as_i64().unwrap_or(0))
            .sum::<i64>()
            == fed
    });
    assert!(
        stored_windows(&f.store, "truck-7").is_empty(),
        "a window went over the metered link"
    );

    // On Wi-Fi they follow, and the agent drains to idle.
    std::fs::write(&link, "wifi\n").unwrap();
    drop(stdin);
    assert!(agent.wait_output(Duration::from_secs(60)).status.success());
    let windows = stored_windows(&f.store, "truck-7");
    assert_eq!(windows.keys().copied().collect::<Vec<_>>(), fired);
}
