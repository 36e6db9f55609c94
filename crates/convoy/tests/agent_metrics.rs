//! `convoy agent --metrics ADDR` with real processes: a fleet server, an
//! agent whose bulk files may not use its metered link (so they wait in
//! the spool), scraped with curl and checked by `promtool check metrics`.

mod net_support;
mod service_support;

use std::process::Command;
use std::time::{Duration, Instant};

use net_support::{make_file, spawn};
use service_support::{promtool_check, Fleet};

fn scrape(port: u16) -> Option<String> {
    let out = Command::new("curl")
        .args(["-s", "-f", "--max-time", "20"])
        .arg(format!("http://127.0.0.1:{port}/metrics"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn agent_metrics_show_the_spool_the_budget_and_the_lanes() {
    let f = Fleet::start("agent-metrics", &["v1"], &[]);
    let spool = f.dir.path().join("spool");
    let inbox = f.dir.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let cfg = f.agent_config(
        "v1",
        &spool,
        &format!(
            "[[source]]\nkind = \"directory\"\npath = {inbox:?}\nclass = \"bulk\"\nsettle_seconds = 0.5\n\
             [[link]]\nname = \"lte\"\nmetered = true\ndaily_budget = \"50MB\"\n"
        ),
    );
    let port = convoy_testkit::free_port();
    let _agent = spawn(
        &[
            "agent",
            "--config",
            cfg.to_str().unwrap(),
            "--metrics",
            &format!("127.0.0.1:{port}"),
        ],
        &[],
    );
    make_file(&inbox.join("cam0.mcap"), 300_000, 5);
    // Bulk may not use a metered link: it waits, and the page says so.
    let start = Instant::now();
    let text = loop {
        if let Some(t) = scrape(port) {
            if t.contains("convoy_agent_spool_bytes{class=\"bulk\"} 300000\n")
                && t.contains("convoy_agent_lane_state{lane=\"backlog\",state=\"idle\"} 1\n")
            {
                break t;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "{t}");
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no metrics");
        std::thread::sleep(Duration::from_millis(200));
    };
    for line in [
        "convoy_agent_spool_up 1\n",
        "convoy_agent_spool_segments{class=\"bulk\"} 1\n",
        "convoy_agent_spool_bytes{class=\"events\"} 0\n",
        "convoy_agent_link_budget_bytes{link=\"lte\"} 50000000\n",
        "convoy_agent_link_budget_used_bytes{link=\"lte\"} 0\n",
        "convoy_agent_lane_state{lane=\"live\",state=\"uploading\"} 0\n",
        "convoy_agent_offline 0\n",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    // Exactly one state per lane.
    for lane in ["live", "backlog"] {
        let on = text
            .lines()
            .filter(|l| l.starts_with(&format!("convoy_agent_lane_state{{lane=\"{lane}\"")))
            .filter(|l| l.ends_with(" 1"))
            .count();
        assert_eq!(on, 1, "{lane}: {text}");
    }
    let age: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("convoy_agent_oldest_unacknowledged_age_seconds "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(age > 0.0 && age < 120.0, "{age}");
    promtool_check(&text);
    // Any other path is 404.
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"404");
}
