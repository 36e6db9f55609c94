//! `convoy agent --metrics ADDR`: the agent's figures in the Prometheus
//! text format, read at scrape time from the same places `convoy agent
//! status` reads (the spool's catalog and the status the agent writes
//! every second), so the two never disagree. No figure carries the
//! vehicle's name: one agent runs per vehicle, and Prometheus adds the
//! target's own labels.

use std::path::PathBuf;

use convoy_agent::config::Config;
use convoy_agent::policy::{day_of, LinkRule};
use convoy_web::metrics::Exposition;

/// The lane states a scrape reports, one sample each (1 for the current).
const LANE_STATES: [&str; 7] = [
    "idle",
    "connecting",
    "uploading",
    "rate_cap",
    "waiting_to_retry",
    "no_link",
    "other",
];

/// The fixed state name of a lane's status line.
fn lane_state(text: &str) -> &'static str {
    match text {
        "" | "idle" => "idle",
        "connecting" => "connecting",
        "waiting to retry" => "waiting_to_retry",
        "no link" => "no_link",
        t if t.starts_with("uploading ") => "uploading",
        t if t.starts_with("rate cap") => "rate_cap",
        _ => "other",
    }
}

/// What a scrape needs: the spool's place and the link rules.
pub struct AgentMetrics {
    spool: PathBuf,
    quota: u64,
    links: Vec<LinkRule>,
}

impl AgentMetrics {
    pub fn new(cfg: &Config) -> Result<AgentMetrics, String> {
        Ok(AgentMetrics {
            spool: cfg.spool.clone(),
            quota: cfg.quota_bytes(),
            links: cfg.link_rules()?,
        })
    }

    pub fn write(&self, p: &mut Exposition) {
        let now_ns = convoy_telemetry::now_ns();
        let spool = convoy_agent::spool::Spool::open_readonly(&self.spool);
        p.one(
            "convoy_agent_spool_up",
            "gauge",
            "1 if the spool's catalog could be read for this scrape, else 0.",
            u8::from(spool.is_ok()),
        );
        p.one(
            "convoy_agent_spool_quota_bytes",
            "gauge",
            "The spool's cap on bytes not yet acknowledged (quota).",
            self.quota,
        );
        if let Ok(spool) = &spool {
            if let Ok(classes) = spool.status() {
                p.family(
                    "convoy_agent_spool_bytes",
                    "gauge",
                    "Bytes of segments waiting for acknowledgement, by class.",
                );
                for c in &classes {
                    let l = format!("{{class=\"{}\"}}", c.class);
                    p.sample("convoy_agent_spool_bytes", &l, c.queued_bytes);
                }
                p.family(
                    "convoy_agent_spool_segments",
                    "gauge",
                    "Segments waiting for acknowledgement, by class.",
                );
                for c in &classes {
                    let l = format!("{{class=\"{}\"}}", c.class);
                    p.sample("convoy_agent_spool_segments", &l, c.queued);
                }
                p.family(
                    "convoy_agent_dropped_bytes",
                    "gauge",
                    "Bytes of segments the overflow rule dropped, by class (kept in the spool's records).",
                );
                for c in &classes {
                    let l = format!("{{class=\"{}\"}}", c.class);
                    p.sample("convoy_agent_dropped_bytes", &l, c.dropped_bytes);
                }
            }
            let oldest = spool.oldest_waiting_ns().ok().flatten();
            p.one(
                "convoy_agent_oldest_unacknowledged_age_seconds",
                "gauge",
                "Age of the oldest segment not yet acknowledged, from when it was made \
                 (its samples are up to a segment's length older); 0 when none waits.",
                oldest.map_or(0.0, |t| (now_ns - t).max(0) as f64 / 1e9),
            );
            let day = day_of(now_ns.div_euclid(1_000_000_000));
            p.family(
                "convoy_agent_link_budget_used_bytes",
                "gauge",
                "Bytes sent today (UTC) on each link.",
            );
            for r in &self.links {
                let l = format!("{{link=\"{}\"}}", escape(&r.name));
                p.sample(
                    "convoy_agent_link_budget_used_bytes",
                    &l,
                    spool.spent(&r.name, day),
                );
            }
            p.family(
                "convoy_agent_link_budget_bytes",
                "gauge",
                "Each budgeted link's daily budget (links without one are left out).",
            );
            for r in &self.links {
                if let Some(b) = r.daily_budget {
                    let l = format!("{{link=\"{}\"}}", escape(&r.name));
                    p.sample("convoy_agent_link_budget_bytes", &l, b);
                }
            }
        }
        let snap = convoy_agent::status::read(&self.spool);
        p.one(
            "convoy_agent_status_age_seconds",
            "gauge",
            "Seconds since the agent last wrote its status (every second while it runs).",
            snap.as_ref()
                .map_or(-1.0, |s| (now_ns - s.written_ns) as f64 / 1e9),
        );
        let Some(s) = snap else { return };
        p.one(
            "convoy_agent_offline",
            "gauge",
            "1 while the lanes find the server out of reach.",
            u8::from(s.offline),
        );
        p.family(
            "convoy_agent_lane_state",
            "gauge",
            "Each upload lane's state: 1 for the one it is in.",
        );
        for (lane, st) in [("live", &s.live), ("backlog", &s.backlog)] {
            let now = lane_state(&st.state);
            for state in LANE_STATES {
                p.sample(
                    "convoy_agent_lane_state",
                    &format!("{{lane=\"{lane}\",state=\"{state}\"}}"),
                    u8::from(state == now),
                );
            }
        }
        p.family(
            "convoy_agent_lane_uploads_total",
            "counter",
            "Segments each lane uploaded and had acknowledged since the agent started.",
        );
        for (lane, st) in [("live", &s.live), ("backlog", &s.backlog)] {
            p.sample(
                "convoy_agent_lane_uploads_total",
                &format!("{{lane=\"{lane}\"}}"),
                st.uploads,
            );
        }
        p.family(
            "convoy_agent_lane_upload_bytes_total",
            "counter",
            "Bytes of those segments, per lane.",
        );
        for (lane, st) in [("live", &s.live), ("backlog", &s.backlog)] {
            p.sample(
                "convoy_agent_lane_upload_bytes_total",
                &format!("{{lane=\"{lane}\"}}"),
                st.bytes,
            );
        }
        for (name, help, v) in [
            (
                "convoy_agent_samples_total",
                "Samples read from every source since the agent started.",
                s.samples_in,
            ),
            (
                "convoy_agent_lines_rejected_total",
                "Input lines refused (malformed, unknown signal).",
                s.lines_rejected,
            ),
            (
                "convoy_agent_samples_lost_total",
                "Samples lost to the overflow rule or a full disk.",
                s.samples_lost,
            ),
        ] {
            p.one(name, "counter", help, v);
        }
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_status_lines_map_to_fixed_states() {
        assert_eq!(lane_state("uploading a.jsonl.zst on lte"), "uploading");
        assert_eq!(lane_state("rate cap on lte"), "rate_cap");
        assert_eq!(lane_state("waiting to retry"), "waiting_to_retry");
        assert_eq!(lane_state("no link"), "no_link");
        assert_eq!(lane_state("something new"), "other");
    }
}
