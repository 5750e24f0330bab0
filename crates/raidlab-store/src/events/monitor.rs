//! The monitor: turns successive status snapshots into events for the bus (`Fail`,
//! `FailSpare`, `DegradedArray`, `ArrayFailed`, `RebuildStarted` / `Progress` / `Finished`,
//! `SpareActive`, `ResyncStarted` / `Finished`, `CheckFinished`, `BackupLost` / `Restored`).

use super::*;

/// What the monitor keeps of one status.
#[derive(Debug, Clone, Default)]
struct Snap {
    state: String,
    /// Per slot: state word and device path.
    members: Vec<(String, Option<String>)>,
    failure: Option<String>,
    /// The rebuild's slot and fraction done.
    rebuild: Option<(u64, f64)>,
    resync_pending: u64,
    resynced_rows: u64,
    repaired_rows: u64,
    /// The write cache's mode (`backed`, `draining`, `write-through`) and why.
    backup: Option<(String, Option<String>)>,
    /// The check job's id and whether it is still running.
    check: Option<(u64, bool)>,
}

fn snap(st: &Value) -> Snap {
    let s = |v: &Value| v.as_str().map(str::to_string);
    Snap {
        state: s(&st["state"]).unwrap_or_default(),
        members: st["members"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .map(|m| (s(&m["state"]).unwrap_or_default(), s(&m["path"])))
                    .collect()
            })
            .unwrap_or_default(),
        failure: s(&st["failure"]),
        rebuild: st["rebuild"]["slot"]
            .as_u64()
            .map(|slot| (slot, st["rebuild"]["fraction"].as_f64().unwrap_or(0.0))),
        resync_pending: st["resync"]["pending_regions"].as_u64().unwrap_or(0),
        resynced_rows: st["resync"]["resynced_rows"].as_u64().unwrap_or(0),
        repaired_rows: st["resync"]["repaired_rows"].as_u64().unwrap_or(0),
        backup: st["write_cache"]["mode"]["state"]
            .as_str()
            .map(|m| (m.to_string(), s(&st["write_cache"]["mode"]["why"]))),
        check: st["check"]["id"]
            .as_u64()
            .map(|id| (id, st["check"]["state"] == "running")),
    }
}

/// Rebuild bookkeeping between polls: when it started, what was logged.
struct RebuildWatch {
    slot: u64,
    started: Instant,
    logged_pct: f64,
    logged_at: Instant,
    /// The last `RebuildNN` mark sent (20, 40, 60, 80).
    mark: u32,
    units: u64,
}

/// Turns successive status values (`ctl status --json`, with `"check"` when a check job
/// ran) into events on a [`Bus`].
pub struct Monitor {
    prev: Option<Snap>,
    chunk_bytes: u64,
    rebuild: Option<RebuildWatch>,
}

impl Monitor {
    pub fn new(chunk_bytes: u64) -> Monitor {
        Monitor {
            prev: None,
            chunk_bytes,
            rebuild: None,
        }
    }

    /// Compare `st` with the last status seen and emit what changed. The first call reports
    /// what a monitor starting now would (`DegradedArray`, a rebuild or resync under way).
    pub fn observe(&mut self, st: &Value, bus: &Bus) {
        let now = snap(st);
        let Some(prev) = self.prev.take() else {
            self.start(&now, st, bus);
            self.prev = Some(now);
            return;
        };
        if prev.failure.is_none() {
            if let Some(f) = &now.failure {
                bus.emit(
                    Level::Error,
                    "ArrayFailed",
                    None,
                    &format!("array failed: {f}"),
                    json!({ "failure": f }),
                );
            }
        }
        for (slot, new) in now.members.iter().enumerate() {
            let Some(old) = prev.members.get(slot) else {
                continue;
            };
            self.slot_changed(slot as u64, old, new, st, bus);
        }
        if let Some(w) = &mut self.rebuild {
            if let Some((slot, fraction)) = now.rebuild.filter(|r| r.0 == w.slot) {
                let pct = fraction * 100.0;
                let elapsed = w.started.elapsed();
                let device = now.members.get(slot as usize).and_then(|m| m.1.clone());
                while w.mark < 80 && pct >= f64::from(w.mark + 20) {
                    w.mark += 20;
                    bus.emit(
                        Level::Info,
                        &format!("Rebuild{}", w.mark),
                        device.as_deref(),
                        &format!("rebuild of slot {slot}: {}% done", w.mark),
                        json!({ "slot": slot, "fraction": fraction }),
                    );
                }
                if pct >= w.logged_pct + PROGRESS_PCT || w.logged_at.elapsed() >= PROGRESS_EVERY {
                    w.logged_pct = (pct / PROGRESS_PCT).floor() * PROGRESS_PCT;
                    w.logged_at = Instant::now();
                    let rate = st["rebuild"]["rate_mb_s"].as_f64().unwrap_or(0.0);
                    crate::info!(
                        { "event": "RebuildProgress", "slot": slot, "device": device, "fraction": fraction,
                          "elapsed_s": elapsed.as_secs_f64(), "rate_mb_s": rate },
                        "rebuild of slot {slot}: {pct:.1}% in {:.1} s, {rate:.1} MB/s", elapsed.as_secs_f64()
                    );
                }
            }
        }
        if prev.resync_pending > 0 && now.resync_pending == 0 {
            bus.emit(
                Level::Info,
                "ResyncFinished",
                None,
                &format!(
                    "resync done: {} rows resynced, {} repaired",
                    now.resynced_rows, now.repaired_rows
                ),
                json!({ "resynced_rows": now.resynced_rows, "repaired_rows": now.repaired_rows }),
            );
        }
        match (&prev.backup, &now.backup) {
            (Some((a, _)), Some((b, why))) if a == "backed" && b != "backed" => bus.emit(
                Level::Warn,
                "BackupLost",
                None,
                &format!(
                    "write cache {b}: {}",
                    why.as_deref().unwrap_or("its backup is lost")
                ),
                json!({ "mode": b, "why": why }),
            ),
            (Some((a, _)), Some((b, _))) if a != "backed" && b == "backed" => bus.emit(
                Level::Info,
                "BackupRestored",
                None,
                "write cache backed up again",
                json!({ "mode": b }),
            ),
            _ => {}
        }
        if let Some((id, false)) = now.check {
            if prev.check != Some((id, false)) {
                self.check_done(st, bus);
            }
        }
        self.prev = Some(now);
    }

    /// Whether a status has been seen.
    pub fn started(&self) -> bool {
        self.prev.is_some()
    }

    fn start(&mut self, now: &Snap, st: &Value, bus: &Bus) {
        if now.failure.is_some() {
            return;
        }
        if now.members.iter().any(|m| m.0 != "in_sync") {
            let missing: Vec<u64> = (0..now.members.len() as u64)
                .filter(|&s| now.members[s as usize].0 != "in_sync")
                .collect();
            bus.emit(
                Level::Warn,
                "DegradedArray",
                None,
                &format!(
                    "the array is {} (slots not in sync: {missing:?})",
                    now.state
                ),
                json!({ "state": now.state, "slots": missing }),
            );
        }
        if let Some((slot, _)) = now.rebuild {
            self.rebuild_started(slot, st, bus, now.members[slot as usize].1.as_deref());
        }
        if now.resync_pending > 0 {
            crate::info!(
                { "event": "ResyncStarted", "pending_regions": now.resync_pending },
                "resyncing {} dirty region(s) in the background", now.resync_pending
            );
        }
    }

    fn rebuild_started(&mut self, slot: u64, st: &Value, bus: &Bus, device: Option<&str>) {
        let units = st["rebuild"]["units"].as_u64().unwrap_or(0);
        let done = st["rebuild"]["fraction"].as_f64().unwrap_or(0.0);
        self.rebuild = Some(RebuildWatch {
            slot,
            started: Instant::now(),
            logged_pct: (done * 100.0 / PROGRESS_PCT).floor() * PROGRESS_PCT,
            logged_at: Instant::now(),
            mark: ((done * 100.0 / 20.0).floor() as u32 * 20).min(80),
            units,
        });
        bus.emit(
            Level::Info,
            "RebuildStarted",
            device,
            &format!(
                "rebuild of slot {slot} onto {} started ({} order{}, {:.1}% already done)",
                device.unwrap_or("-"),
                st["rebuild"]["order"].as_str().unwrap_or("sequential"),
                match st["rebuild"]["regions"].as_u64() {
                    Some(g) => format!(", partial re-add of {g} dirty region(s)"),
                    None => String::new(),
                },
                done * 100.0
            ),
            json!({ "slot": slot, "units": units, "fraction": done }),
        );
    }

    fn slot_changed(
        &mut self,
        slot: u64,
        old: &(String, Option<String>),
        new: &(String, Option<String>),
        st: &Value,
        bus: &Bus,
    ) {
        let replaced = old.1 != new.1;
        let (o, n) = (old.0.as_str(), new.0.as_str());
        if o == "in_sync" && n == "missing" {
            bus.emit(
                Level::Warn,
                "Missing",
                old.1.as_deref(),
                &format!(
                    "member {} (slot {slot}): its host is away; missing, re-added when it returns",
                    old.1.as_deref().unwrap_or("-")
                ),
                json!({ "slot": slot }),
            );
        } else if o == "in_sync" && (n != "in_sync" || replaced) {
            bus.emit(
                Level::Warn,
                "Fail",
                old.1.as_deref(),
                &format!(
                    "member {} (slot {slot}) failed",
                    old.1.as_deref().unwrap_or("-")
                ),
                json!({ "slot": slot }),
            );
        }
        if o == "rebuilding" && (n == "failed" || replaced) {
            self.rebuild = None;
            bus.emit(
                Level::Warn,
                "FailSpare",
                old.1.as_deref(),
                &format!(
                    "replacement {} in slot {slot} failed; rebuild stopped",
                    old.1.as_deref().unwrap_or("-")
                ),
                json!({ "slot": slot }),
            );
        }
        let was_rebuilding = o == "rebuilding" && !replaced;
        if n == "rebuilding" && !was_rebuilding {
            self.rebuild_started(slot, st, bus, new.1.as_deref());
        }
        if n == "in_sync" && (o != "in_sync" || replaced) {
            if !was_rebuilding {
                // Started and finished between two polls.
                self.rebuild_started(slot, st, bus, new.1.as_deref());
            }
            let w = self.rebuild.take();
            let secs = w
                .as_ref()
                .map_or(0.0, |w| w.started.elapsed().as_secs_f64());
            // What the rebuild wrote, when it is the last one the status reports (a partial
            // re-add writes its dirty regions only); else the units it started with.
            let last = &st["last_rebuild"];
            let bytes = match last["slot"].as_u64() {
                Some(s) if s == slot && last["device"].as_str() == new.1.as_deref() => {
                    last["bytes"].as_u64().unwrap_or(0)
                }
                _ => w.as_ref().map_or(0, |w| w.units) * self.chunk_bytes,
            };
            let rate = if secs > 0.0 {
                bytes as f64 / secs / 1e6
            } else {
                0.0
            };
            let dev = new.1.as_deref();
            bus.emit(
                Level::Info,
                "RebuildFinished",
                dev,
                &format!(
                    "rebuild of slot {slot} onto {} finished in {secs:.1} s ({rate:.1} MB/s)",
                    dev.unwrap_or("-")
                ),
                json!({ "slot": slot, "duration_s": secs, "rate_mb_s": rate, "bytes": bytes }),
            );
            bus.emit(
                Level::Info,
                "SpareActive",
                dev,
                &format!(
                    "{} is the in-sync member of slot {slot}",
                    dev.unwrap_or("-")
                ),
                json!({ "slot": slot }),
            );
        }
    }

    fn check_done(&self, st: &Value, bus: &Bus) {
        let c = &st["check"];
        let kind = c["kind"].as_str().unwrap_or("check");
        let mismatches = c["mismatches"].as_u64().unwrap_or(0);
        let level = if mismatches > 0 {
            Level::Warn
        } else {
            Level::Info
        };
        bus.emit(
            level,
            "CheckFinished",
            None,
            &format!(
                "{kind} {}: {} of {} rows, {mismatches} mismatches{}, in {:.1} s",
                c["state"].as_str().unwrap_or("done"),
                c["rows_done"],
                c["rows"],
                if kind == "repair" { " (repaired)" } else { "" },
                c["elapsed_s"].as_f64().unwrap_or(0.0)
            ),
            json!({
                "kind": kind,
                "state": c["state"],
                "rows": c["rows"],
                "rows_done": c["rows_done"],
                "mismatches": mismatches,
                "skipped": c["skipped"],
                "first_mismatches": c["first_mismatches"],
                "duration_s": c["elapsed_s"],
            }),
        );
    }
}
