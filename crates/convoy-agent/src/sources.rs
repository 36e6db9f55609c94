//! Where samples and files come from: JSON lines on stdin or a Unix
//! socket, files dropped into a directory, and a SUMO FCD replay.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use convoy_telemetry::{parse_line, Sample, SignalCatalog, Value};

use crate::policy::Class;
use crate::spool::Spool;
use crate::status::Shared;

/// A sample on its way to the segmenter of its class.
pub type Tagged = (Class, Sample);

/// Reads JSON lines from `input` until it ends or `stop`.
pub fn read_lines(
    input: impl BufRead,
    source: &str,
    class: Class,
    signals: &SignalCatalog,
    out: &SyncSender<Tagged>,
    status: &Shared,
    stop: &AtomicBool,
) {
    for (i, line) in input.lines().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                status.reject(&format!("{source}:{}: unreadable: {e}", i + 1));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(&line, signals, convoy_telemetry::now_ns()) {
            Ok(s) => {
                if out.send((class, s)).is_err() {
                    return;
                }
            }
            Err(e) => status.reject(&format!("{source}:{}: {e}", i + 1)),
        }
    }
}

/// Accepts producers on a Unix socket, a thread each.
pub fn serve_socket(
    path: &Path,
    class: Class,
    signals: Arc<SignalCatalog>,
    out: SyncSender<Tagged>,
    status: Arc<Shared>,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let _ = std::fs::remove_file(path);
    let listener = std::os::unix::net::UnixListener::bind(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let name = path.display().to_string();
    crate::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((conn, _)) => {
                    let _ = conn.set_nonblocking(false);
                    let (signals, out, status, stop, name) = (
                        signals.clone(),
                        out.clone(),
                        status.clone(),
                        stop.clone(),
                        name.clone(),
                    );
                    crate::spawn(move || {
                        read_lines(
                            BufReader::new(conn),
                            &name,
                            class,
                            &signals,
                            &out,
                            &status,
                            &stop,
                        )
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    });
    Ok(())
}

/// Polls `dir` and moves each settled file into the spool as
/// `DATE/inbox/RELATIVE/PATH`.
pub fn watch_directory(
    dir: PathBuf,
    class: Class,
    settle: Duration,
    spool: Arc<Mutex<Spool>>,
    status: Arc<Shared>,
    stop: Arc<AtomicBool>,
) {
    crate::spawn(move || {
        let mut seen: std::collections::HashMap<PathBuf, (u64, SystemTime, Instant)> =
            Default::default();
        while !stop.load(Ordering::Relaxed) {
            let mut stack = vec![dir.clone()];
            let mut present = std::collections::HashSet::new();
            while let Some(d) = stack.pop() {
                let Ok(rd) = std::fs::read_dir(&d) else {
                    continue;
                };
                for e in rd.flatten() {
                    let p = e.path();
                    let Ok(m) = e.metadata() else { continue };
                    if m.is_dir() {
                        stack.push(p);
                        continue;
                    }
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    if name.starts_with('.') || name.ends_with(".tmp") {
                        continue;
                    }
                    present.insert(p.clone());
                    let stamp = (m.len(), m.modified().unwrap_or(SystemTime::UNIX_EPOCH));
                    let entry = seen
                        .entry(p.clone())
                        .or_insert((stamp.0, stamp.1, Instant::now()));
                    if (entry.0, entry.1) != stamp {
                        *entry = (stamp.0, stamp.1, Instant::now());
                    } else if entry.2.elapsed() >= settle {
                        if let Err(e) = take_file(&dir, &p, m.len(), class, &spool, &status) {
                            status.note_error(&format!("{}: {e}", p.display()));
                        }
                    }
                }
            }
            seen.retain(|p, _| present.contains(p));
            std::thread::sleep(Duration::from_millis(250));
        }
    });
}

fn take_file(
    root: &Path,
    p: &Path,
    len: u64,
    class: Class,
    spool: &Arc<Mutex<Spool>>,
    status: &Shared,
) -> Result<(), String> {
    let rel = p.strip_prefix(root).map_err(|e| e.to_string())?;
    let rel: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().replace(['\\', '\0'], "_"))
        .collect();
    let name = format!(
        "{}/inbox/{}",
        crate::utc_date(convoy_telemetry::now_ns()),
        rel.join("/")
    );
    convoy_net::request::validate_name(&name)?;
    let mut sp = spool.lock().map_err(|_| "spool lock")?;
    match sp.make_room(class, len) {
        Ok(dropped) => {
            for (n, c, b) in dropped {
                tracing::warn!(
                    target: "convoy::agent",
                    class = c.as_str(), segment = n, bytes = b,
                    "spool quota: dropped a segment to make room"
                );
            }
        }
        Err(r) => {
            return Err(format!(
                "spool quota: not taken ({} bytes; {} of {} used by higher priority); it stays in the inbox",
                r.needed, r.used, r.quota
            ))
        }
    }
    let tmp = sp.tmp_path(&format!("inbox-{}", convoy_telemetry::now_ns()));
    let moved = std::fs::rename(p, &tmp).is_ok();
    let sync = |f: &Path| {
        std::fs::File::open(f)
            .and_then(|f| f.sync_all())
            .map_err(|e| e.to_string())
    };
    let queued = if moved {
        sync(&tmp).and_then(|_| sp.add(&tmp, &name, class, len).map_err(String::from))
    } else {
        // Another filesystem: copy, fsync, then remove the original.
        std::fs::copy(p, &tmp)
            .map_err(|e| e.to_string())
            .and_then(|_| sync(&tmp))
            .and_then(|_| std::fs::remove_file(p).map_err(|e| e.to_string()))
            .and_then(|_| sp.add(&tmp, &name, class, len).map_err(String::from))
    };
    if let Err(e) = queued {
        // Not queued (a full disk, say). Files left in tmp/ are deleted at
        // start-up, so put it back into the inbox for a later try, or just
        // remove a copy whose original is still there.
        if !moved && p.exists() {
            let _ = std::fs::remove_file(&tmp);
        } else {
            let _ = std::fs::rename(&tmp, p);
        }
        return Err(e);
    }
    drop(sp);
    status.wake_uploaders();
    Ok(())
}

/// Replays one vehicle of a SUMO FCD file as position, speed and heading
/// samples stamped with the wall clock.
pub struct FcdReplay {
    pub path: PathBuf,
    pub vehicle: String,
    pub origin: [f64; 2],
    pub speedup: f64,
    pub looped: bool,
}

/// Metres to degrees on a sphere of the WGS 84 equatorial radius.
const M_PER_DEG: f64 = 6_378_137.0 * std::f64::consts::PI / 180.0;

impl FcdReplay {
    pub fn to_lat_lon(&self, x: f64, y: f64) -> (f64, f64) {
        let lat = self.origin[0] + y / M_PER_DEG;
        let lon = self.origin[1] + x / (M_PER_DEG * self.origin[0].to_radians().cos());
        (lat, lon)
    }

    pub fn run(self, out: SyncSender<Tagged>, status: Arc<Shared>, stop: Arc<AtomicBool>) {
        crate::spawn(move || loop {
            if let Err(e) = self.replay_once(&out, &stop) {
                status.note_error(&format!("FCD replay {}: {e}", self.path.display()));
                return;
            }
            if !self.looped || stop.load(Ordering::Relaxed) {
                return;
            }
        });
    }

    fn replay_once(&self, out: &SyncSender<Tagged>, stop: &AtomicBool) -> Result<(), String> {
        let f = std::fs::File::open(&self.path).map_err(|e| e.to_string())?;
        let mut r =
            convoy_models::sumo::FcdReader::new(BufReader::new(f), self.path.display().to_string());
        let start = Instant::now();
        let mut t0 = None;
        let mut prev: Option<(f64, f64)> = None;
        while let Some(step) = r.next_step().map_err(|e| e.to_string())? {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let Some(v) = step.vehicles.iter().find(|v| v.id == self.vehicle) else {
                continue;
            };
            let t0 = *t0.get_or_insert(step.time_s);
            let due = start + Duration::from_secs_f64((step.time_s - t0).max(0.0) / self.speedup);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let t_ns = convoy_telemetry::now_ns();
            let (lat, lon) = self.to_lat_lon(v.pos.x, v.pos.y);
            let mut samples = vec![
                (convoy_telemetry::LATITUDE, lat),
                (convoy_telemetry::LONGITUDE, lon),
                (convoy_telemetry::SPEED, v.speed * 3.6),
            ];
            if let Some((px, py)) = prev {
                let (dx, dy) = (v.pos.x - px, v.pos.y - py);
                if dx.abs() + dy.abs() > 0.01 {
                    // VSS heading: degrees clockwise from north.
                    let h = dx.atan2(dy).to_degrees().rem_euclid(360.0);
                    samples.push((convoy_telemetry::HEADING, h));
                }
            }
            prev = Some((v.pos.x, v.pos.y));
            for (path, value) in samples {
                let s = Sample {
                    t_ns,
                    path: path.into(),
                    value: Value::Number(value),
                };
                if out.send((Class::Telemetry, s)).is_err() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
