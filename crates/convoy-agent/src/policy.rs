//! Priority classes and link rules, as pure functions of the clock and
//! the counters (so every rule is unit-tested without a network).
//!
//! Classes, most urgent first: events > telemetry > previews > bulk. On
//! each link, a class may be sent when the link allows it (a metered link
//! allows only the classes it names; unmetered links allow all), the
//! timetable is open, and today's budget is not spent. The budget check
//! happens before each segment, so a budget is exceeded by at most the
//! segment that crossed it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Events = 0,
    Telemetry = 1,
    Previews = 2,
    Bulk = 3,
}

impl Class {
    pub const ALL: [Class; 4] = [
        Class::Events,
        Class::Telemetry,
        Class::Previews,
        Class::Bulk,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Events => "events",
            Class::Telemetry => "telemetry",
            Class::Previews => "previews",
            Class::Bulk => "bulk",
        }
    }

    pub fn from_index(i: i64) -> Class {
        match i {
            0 => Class::Events,
            1 => Class::Telemetry,
            2 => Class::Previews,
            _ => Class::Bulk,
        }
    }
}

/// Windows of the UTC day when uploads may run.
#[derive(Clone, Debug, PartialEq)]
pub struct Timetable {
    /// Minutes since midnight, [start, end); end < start wraps midnight.
    windows: Vec<(u32, u32)>,
}

impl Timetable {
    /// "06:00-22:00" or "22:00-06:00,12:00-13:00".
    pub fn parse(s: &str) -> Result<Timetable, String> {
        let minute = |hm: &str| -> Result<u32, String> {
            let (h, m) = hm
                .trim()
                .split_once(':')
                .ok_or_else(|| format!("{hm:?}: expected HH:MM"))?;
            let (h, m): (u32, u32) = (
                h.parse().map_err(|_| format!("{hm:?}: bad hour"))?,
                m.parse().map_err(|_| format!("{hm:?}: bad minute"))?,
            );
            if h > 24 || m > 59 || (h == 24 && m > 0) {
                return Err(format!("{hm:?}: not a time of day"));
            }
            Ok(h * 60 + m)
        };
        let windows = s
            .split(',')
            .map(|w| {
                let (a, b) = w
                    .split_once('-')
                    .ok_or_else(|| format!("{w:?}: expected HH:MM-HH:MM"))?;
                Ok((minute(a)?, minute(b)?))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Timetable { windows })
    }

    pub fn open_at(&self, minute_of_day: u32) -> bool {
        self.windows.iter().any(|&(a, b)| {
            if a <= b {
                (a..b).contains(&minute_of_day)
            } else {
                minute_of_day >= a || minute_of_day < b
            }
        })
    }
}

/// What one link allows.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkRule {
    pub name: String,
    pub metered: bool,
    pub classes: Vec<Class>,
    pub daily_budget: Option<u64>,
    pub rate_bps: Option<u64>,
    pub hours: Option<Timetable>,
}

/// Why a class may not go now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    NotOnThisLink,
    OutsideHours,
    BudgetSpent,
}

impl LinkRule {
    pub fn unmetered(name: &str) -> LinkRule {
        LinkRule {
            name: name.into(),
            metered: false,
            classes: Class::ALL.to_vec(),
            daily_budget: None,
            rate_bps: None,
            hours: None,
        }
    }

    /// May a segment of `class` start now, with `spent_today` bytes
    /// already sent on this link today?
    pub fn allows(&self, class: Class, unix_s: i64, spent_today: u64) -> Result<(), Hold> {
        if !self.classes.contains(&class) {
            return Err(Hold::NotOnThisLink);
        }
        if let Some(t) = &self.hours {
            let minute = (unix_s.rem_euclid(86_400) / 60) as u32;
            if !t.open_at(minute) {
                return Err(Hold::OutsideHours);
            }
        }
        if let Some(b) = self.daily_budget {
            if spent_today >= b {
                return Err(Hold::BudgetSpent);
            }
        }
        Ok(())
    }

    /// How long to wait after sending `bytes` so the average stays under
    /// the rate cap (a token bucket refilled at the cap, one segment deep).
    pub fn pause_after(&self, bytes: u64, took: std::time::Duration) -> std::time::Duration {
        match self.rate_bps {
            Some(bps) => {
                let should = std::time::Duration::from_secs_f64(bytes as f64 * 8.0 / bps as f64);
                should.saturating_sub(took)
            }
            None => std::time::Duration::ZERO,
        }
    }
}

/// The UTC day number of a Unix time, for budgets.
pub fn day_of(unix_s: i64) -> i64 {
    unix_s.div_euclid(86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lte() -> LinkRule {
        LinkRule {
            name: "lte".into(),
            metered: true,
            classes: vec![Class::Events, Class::Telemetry],
            daily_budget: Some(1000),
            rate_bps: Some(8000),
            hours: Some(Timetable::parse("06:00-22:00").unwrap()),
        }
    }

    #[test]
    fn metered_links_carry_only_their_classes_within_budget_and_hours() {
        let noon = 12 * 3600;
        let l = lte();
        assert_eq!(l.allows(Class::Telemetry, noon, 0), Ok(()));
        assert_eq!(l.allows(Class::Bulk, noon, 0), Err(Hold::NotOnThisLink));
        assert_eq!(l.allows(Class::Previews, noon, 0), Err(Hold::NotOnThisLink));
        assert_eq!(l.allows(Class::Telemetry, noon, 999), Ok(()));
        assert_eq!(
            l.allows(Class::Telemetry, noon, 1000),
            Err(Hold::BudgetSpent)
        );
        assert_eq!(
            l.allows(Class::Events, 3 * 3600, 0),
            Err(Hold::OutsideHours)
        );
        let wifi = LinkRule::unmetered("wifi");
        assert_eq!(wifi.allows(Class::Bulk, 3 * 3600, u64::MAX), Ok(()));
    }

    #[test]
    fn timetables_wrap_midnight_and_reject_nonsense() {
        let t = Timetable::parse("22:00-06:00, 12:00-13:00").unwrap();
        assert!(t.open_at(23 * 60) && t.open_at(60) && t.open_at(12 * 60 + 30));
        assert!(!t.open_at(7 * 60) && !t.open_at(13 * 60));
        for bad in ["", "6-22", "25:00-26:00", "06:00"] {
            assert!(Timetable::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_rate_cap_paces_by_segment() {
        let l = lte();
        let p = l.pause_after(1000, std::time::Duration::from_millis(100));
        assert_eq!(p, std::time::Duration::from_millis(900));
        assert_eq!(
            LinkRule::unmetered("w").pause_after(1 << 30, Default::default()),
            Default::default()
        );
    }
}
