//! What campaigns add to the spool: a triggered window is a segment that
//! is **preserved** (its `prio` is set, which the overflow rule leaves
//! alone, as for a requested segment) and may carry its campaign's upload
//! conditions (`only_links`, `unmetered`), which the lanes check before
//! taking it.

use rusqlite::{params, Connection};

use crate::policy::{Class, LinkRule};
use crate::spool::Spool;

/// Adds the upload-condition columns to a spool made before campaigns.
pub(crate) fn migrate(db: &Connection) -> rusqlite::Result<()> {
    for (col, ty) in [
        ("only_links", "TEXT"),
        ("unmetered", "INTEGER NOT NULL DEFAULT 0"),
    ] {
        let has: bool = db
            .prepare("SELECT 1 FROM pragma_table_info('items') WHERE name = ?1")?
            .exists([col])?;
        if !has {
            db.execute(&format!("ALTER TABLE items ADD COLUMN {col} {ty}"), [])?;
        }
    }
    Ok(())
}

/// The SQL a lane adds to its pick on `link`: segments with conditions
/// the link does not meet are left for another link.
pub(crate) fn link_filter(link: Option<&LinkRule>) -> String {
    match link {
        None => String::new(),
        Some(l) => {
            // Link names come from agent.toml; quotes are doubled so a
            // name cannot end the SQL string.
            let name = l.name.replace('\'', "''");
            format!(
                " AND (only_links IS NULL OR instr(only_links, ',{name},') > 0)\
                 AND (unmetered = 0 OR {} = 0)",
                i64::from(l.metered)
            )
        }
    }
}

/// Whether `link` meets a segment's upload conditions (the rule
/// [`link_filter`] applies when a lane picks a segment, applied again by
/// the lane's watcher to a window already in flight when the link
/// changes): `only_links` is `,a,b,` or `None`.
pub fn link_meets(only_links: Option<&str>, unmetered: bool, link: &LinkRule) -> bool {
    let named = only_links.is_none_or(|l| l.contains(&format!(",{},", link.name)));
    named && !(unmetered && link.metered)
}

impl Spool {
    /// Marks the just-added segment `name` as a campaign window: preserved
    /// at `class`'s priority, with its upload conditions.
    pub fn mark_window(
        &mut self,
        name: &str,
        class: Class,
        links: &[String],
        unmetered: bool,
    ) -> rusqlite::Result<()> {
        let only = (!links.is_empty()).then(|| format!(",{},", links.join(",")));
        self.db.execute(
            "UPDATE items SET prio = ?2, only_links = ?3, unmetered = ?4 WHERE name = ?1",
            params![name, class as i64, only, i64::from(unmetered)],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spool::Lane;

    fn put(s: &mut Spool, name: &str, class: Class, bytes: usize) {
        let tmp = s.tmp_path("x");
        std::fs::write(&tmp, vec![0u8; bytes]).unwrap();
        s.add(&tmp, name, class, bytes as u64).unwrap();
    }

    #[test]
    fn a_window_is_never_dropped_and_waits_for_a_link_it_may_use() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1000).unwrap();
        put(&mut s, "w", Class::Telemetry, 600);
        s.mark_window("w", Class::Telemetry, &["wifi".into()], true)
            .unwrap();
        put(&mut s, "old", Class::Telemetry, 300);
        // A newcomer over the quota: the overflow rule drops the plain
        // segment, never the window; with nothing else to drop, refused.
        assert_eq!(s.make_room(Class::Telemetry, 300).unwrap().len(), 1);
        assert!(s.make_room(Class::Telemetry, 600).is_err());
        assert_eq!(s.preserved(), (1, 600));
        let lte = LinkRule {
            metered: true,
            ..LinkRule::unmetered("lte")
        };
        let now = convoy_telemetry::now_ns();
        // Not on a metered link, nor on an unmetered one it does not name.
        assert!(s.take_for_link(Lane::Backlog, &lte, now).unwrap().is_none());
        let eth = LinkRule::unmetered("eth");
        assert!(s.take_for_link(Lane::Backlog, &eth, now).unwrap().is_none());
        let wifi = LinkRule::unmetered("wifi");
        let got = s.take_for_link(Lane::Backlog, &wifi, now).unwrap().unwrap();
        assert_eq!(got.name, "w");
        // The item carries its conditions, for the watcher.
        assert_eq!(
            (got.only_links.as_deref(), got.unmetered),
            (Some(",wifi,"), true)
        );
        assert!(link_meets(got.only_links.as_deref(), got.unmetered, &wifi));
        assert!(!link_meets(got.only_links.as_deref(), got.unmetered, &lte));
        assert!(!link_meets(got.only_links.as_deref(), got.unmetered, &eth));
        assert!(link_meets(None, false, &lte), "a plain segment: any link");
    }
}
