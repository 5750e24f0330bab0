//! `ctl status`: the array's state, members, rebuild, resync and cache as one JSON value.

use std::sync::atomic::Ordering;

use raidlab::array::ArrayState;
use serde_json::{json, Value};

use super::{Controller, SlotState};
use crate::member::timed::TimingStatus;

/// A disk-timed member's model and counters, as `ctl status` shows them.
fn timing_json(t: &TimingStatus) -> Value {
    json!({
        "spec": t.spec,
        "ops": t.ops,
        "service_us_mean": t.service_us_mean,
        "wait_us_mean": t.wait_us_mean,
        "late_us_mean": t.late_us_mean,
        "late_us_max": t.late_us_max,
        "queue_max": t.queue_max,
        "queue_now": t.queue_now,
        "utilization": t.utilization,
        "seek_cylinders": t.device.seek_cylinders,
        // Summed over started operations: how many were waiting when each was chosen.
        "choices": t.device.choices,
        // Operations started per priority class: foreground, destage, rebuild, background,
        // and their total waits (submission to start of service), microseconds.
        "class_ops": t.device.class_ops,
        "class_wait_us": t.device.class_wait_ns.map(|w| (w / 1000) as u64),
        "busy_us": t.device.busy_ns / 1000,
    })
}

impl Controller {
    /// The overall state word: failed, rebuilding, resyncing, degraded, or clean / active
    /// (healthy, with or without writes since the last clean mark).
    pub fn state_word(&self) -> &'static str {
        let st = self.read_state();
        if st.dead.is_some() {
            return "failed";
        }
        let array_state = st.array.state();
        let clean = st.clean;
        drop(st);
        match array_state {
            ArrayState::Rebuilding => "rebuilding",
            ArrayState::Degraded => "degraded",
            ArrayState::Normal if self.resync_pending() => "resyncing",
            ArrayState::Normal if clean => "clean",
            ArrayState::Normal => "active",
        }
    }

    /// Whether the array has failed (lost more than its level survives).
    pub fn is_dead(&self) -> bool {
        self.read_state().dead.is_some()
    }

    /// Everything `ctl status --json` prints.
    pub fn status(&self) -> Value {
        let state = self.state_word();
        let rebuild = self.rebuild_progress().map(|p| {
            let done_bytes = p.units_done * self.shape.chunk_bytes;
            json!({
                "slot": p.slot,
                "order": p.order,
                "executor": p.executor,
                "rows_reread": p.rows_reread,
                "units_done": p.units_done,
                "units": p.units,
                "fraction": if p.units == 0 { 1.0 } else { p.units_done as f64 / p.units as f64 },
                "elapsed_s": p.elapsed_s,
                "rate_mb_s": if p.elapsed_s > 0.0 { done_bytes as f64 / p.elapsed_s / 1e6 } else { 0.0 },
                "kind": if p.partial_regions.is_some() { "partial" } else { "full" },
                "regions": p.partial_regions,
                "bytes": p.units * self.shape.chunk_bytes,
                "bytes_done": p.rebuilt_rows * self.shape.chunk_bytes,
                "member_bytes": self.shape.member_data_bytes,
            })
        });
        let last_rebuild = self.last_rebuild().map(|r| {
            json!({
                "slot": r.slot,
                "device": r.device,
                "kind": if r.partial_regions.is_some() { "partial" } else { "full" },
                "regions": r.partial_regions,
                "rows": r.rows,
                "rows_reread": r.rows_reread,
                "bytes": r.bytes,
                "member_bytes": r.member_bytes,
            })
        });
        let resync = {
            let r = self.resync.lock().unwrap_or_else(|e| e.into_inner());
            json!({
                "pending_regions": r.todo.len(),
                "rows_per_region": r.rows_per_region,
                "dirty_regions": r.dirty.iter().filter(|&&b| b).count(),
                "resynced_rows": r.resynced_rows,
                "repaired_rows": r.repaired_rows,
                "bitmap_set_writes": r.set_writes,
                "bitmap_clear_writes": r.clear_writes,
                "region_bytes": r.rows_per_region * self.shape.chunk_bytes,
                "cleared_events": r.cleared_events,
            })
        };
        let cache = self.cache.as_ref().map(|c| {
            json!({
                "policy": c.policy_name,
                "capacity_blocks": c.capacity_blocks(),
                "resident_blocks": c.resident_blocks(),
                "hits": c.hits.load(Ordering::Relaxed),
                "misses": c.misses.load(Ordering::Relaxed),
                "evictions": c.evictions.load(Ordering::Relaxed),
            })
        });
        let write_cache = self.front_status.get().and_then(|f| f());
        let locks = self.locks.contention();
        let st = self.read_state();
        let members: Vec<Value> = (0..self.shape.disks)
            .map(|s| {
                let state = if st.array.rebuilding(s).is_some() {
                    "rebuilding"
                } else if st.missing.iter().any(|m| m.slot == s) {
                    "missing"
                } else if st.array.is_failed(s) {
                    "failed"
                } else {
                    "in_sync"
                };
                let c = &self.counters[s as usize];
                let dev = st.devs[s as usize].as_ref();
                json!({
                    "slot": s,
                    "path": dev.map(|d| d.path().to_string()),
                    "state": state,
                    "read_blocks": c.read_blocks.load(Ordering::Relaxed),
                    "write_blocks": c.write_blocks.load(Ordering::Relaxed),
                    "errors": c.errors.load(Ordering::Relaxed),
                    "timing": dev.and_then(|d| d.timing()).map(|t| timing_json(&t)),
                })
            })
            .collect();
        let faulty: Vec<Value> = st
            .faulty
            .iter()
            .zip(&st.faulty_slots)
            .map(|(d, s)| json!({"path": d.path(), "slot": s}))
            .collect();
        json!({
            "state": state,
            "clean": st.clean,
            "events": st.events(),
            "failure": st.dead,
            "level": self.shape.level.name(),
            "layout": self.shape.layout.name(),
            "disks": self.shape.disks,
            "chunk_bytes": self.shape.chunk_bytes,
            "data_offset_bytes": self.shape.data_offset_bytes,
            "member_data_bytes": self.shape.member_data_bytes,
            "size_bytes": self.size_bytes(),
            "members": members,
            "spares": st.spares.iter().map(|d| d.path().to_string()).collect::<Vec<_>>(),
            "faulty": faulty,
            "missing": Self::missing_json(&st),
            "rebuild": rebuild,
            "last_rebuild": last_rebuild,
            "resync": resync,
            "row_locks": json!({
                "takings": locks.takings,
                "waits": locks.waits,
                "wait_ms": locks.wait_ns as f64 / 1e6,
                "shared_waits": locks.shared_waits,
                "shared_wait_ms": locks.shared_wait_ns as f64 / 1e6,
            }),
            "row_writes": json!({
                "rows": self.row_writes.load(std::sync::atomic::Ordering::Relaxed),
                "member_ops": self.row_plan_ops.load(std::sync::atomic::Ordering::Relaxed),
            }),
            "cache": cache,
            "write_cache": write_cache,
        })
    }

    /// Slot states as the superblocks record them (for tests and status).
    pub fn slot_states(&self) -> Vec<SlotState> {
        let st = self.read_state();
        (0..self.shape.disks)
            .map(|s| match st.array.rebuilding(s) {
                Some(m) => SlotState::Recovering {
                    checkpoint: m.next_clear(0).unwrap_or(m.len()),
                },
                None if st.array.is_failed(s) => SlotState::Failed,
                None => SlotState::InSync,
            })
            .collect()
    }
}
