//! Missing members: a remote member whose host went away (its requests timed out or its
//! connection was lost, `member::nbd`) is failed for the array, served degraded at once, but
//! kept as *missing*, not faulty: its superblock is left as it was (nothing can be written
//! to it anyway), and it is reconnected in the background and re-added by bitmap.
//!
//! The rule against rebuild storms (a flapping host):
//! 1. reconnection is tried with backoff: 0.25 s after it went away, doubling to 8 s;
//! 2. a host that answers is re-added only after it has stayed connected for the settle
//!    time, 1 s doubled for each time the device went away in the last 10 minutes (at most
//!    64 s); a connection lost while settling starts over;
//! 3. the re-add is by bitmap (`readd.rs`): only regions written while it was away are
//!    resynced; a device that goes away again during that partial resync keeps the event
//!    it first left at (bits are never cleared while its slot is not in sync), so its next
//!    return is partial again, never a full rebuild;
//! 4. no spare is rebuilt onto a missing member's slot until it has been away for the
//!    missing grace (`Options::missing_grace`): a short outage never starts a full rebuild.

use std::time::Duration;

use serde_json::{json, Value};

use super::{Controller, State};
use crate::member::{DevId, Member};
use crate::sync::Arc;
use std::time::Instant;

const BACKOFF_MIN: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(8);
const SETTLE_MIN: Duration = Duration::from_secs(1);
const SETTLE_MAX: Duration = Duration::from_secs(64);
/// How long a departure counts against a device's settle time.
const FLAP_WINDOW: Duration = Duration::from_secs(600);
/// Departures remembered (a bound on the history).
const FLAPS_MAX: usize = 256;

/// A member whose host is away.
pub(crate) struct Missing {
    pub dev: Arc<dyn Member>,
    pub slot: u32,
    /// Set when it went away during a partial re-add: the event it first left the slot in
    /// sync at (its superblock now says "recovering"), so its return is partial again.
    pub left: Option<u64>,
    pub since: Instant,
    next_try: Instant,
    backoff: Duration,
    /// Connected since (and the connection-loss count then): settling before the re-add.
    up: Option<(Instant, u64)>,
    settle: Duration,
    pub reconnects: u64,
}

/// Departures of remote devices, for the settle time (bounded, oldest dropped).
#[derive(Default)]
pub(crate) struct Flaps(Vec<(DevId, Instant)>);

impl Flaps {
    /// Record a departure of `id`; returns how many it had in the window, this one included.
    fn note(&mut self, id: DevId, now: Instant) -> u32 {
        self.0
            .retain(|(_, t)| now.saturating_duration_since(*t) < FLAP_WINDOW);
        if self.0.len() >= FLAPS_MAX {
            self.0.remove(0);
        }
        self.0.push((id, now));
        self.0.iter().filter(|(d, _)| *d == id).count() as u32
    }
}

/// Whether a device that just failed did so because its host is away (a remote member
/// whose connection is down), not because it returned errors.
pub(crate) fn is_away(dev: &Arc<dyn Member>) -> bool {
    dev.link().is_some_and(|l| !l.connected())
}

/// "slot K", or what is known of a member whose host was away at the start.
fn slot_text(slot: u32) -> String {
    if slot == u32::MAX {
        "no slot: a spare, or away since the start".into()
    } else {
        format!("slot {slot}")
    }
}

fn settle_for(departures: u32) -> Duration {
    let shift = departures.saturating_sub(1).min(6);
    (SETTLE_MIN * (1u32 << shift)).min(SETTLE_MAX)
}

impl Controller {
    /// Keep `dev`, just failed out of `slot` because its host is away, as missing.
    pub(crate) fn park_missing(&self, st: &mut State, dev: Arc<dyn Member>, slot: u32) {
        let now = Instant::now();
        let left = match st.readd_left.take() {
            Some((d, s, l)) if Arc::ptr_eq(&d, &dev) && s == slot => Some(l),
            other => {
                st.readd_left = other;
                None
            }
        };
        let n = st.flaps.note(dev.identity(), now);
        let at = slot_text(slot);
        crate::warn!(
            { "event": "MemberMissing", "slot": (slot != u32::MAX).then_some(slot), "device": dev.path(), "departures": n },
            "member {} ({at}): host away; missing, reconnecting in the background",
            dev.path()
        );
        st.missing.push(Missing {
            dev,
            slot,
            left,
            since: now,
            next_try: now + BACKOFF_MIN,
            backoff: BACKOFF_MIN,
            up: None,
            settle: settle_for(n),
            reconnects: 0,
        });
        self.any_missing
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Watch the remote members assembly could not reach (`uris`): missing, with their
    /// slot unknown until their superblock is read when they come back (a spare then
    /// stays a spare, a member is re-added, by bitmap when recent enough).
    pub fn watch_away(&self, uris: &[String]) {
        let need = self.shape.data_offset_bytes + self.shape.member_data_bytes;
        let mut st = self.write_state();
        for u in uris {
            if let Ok(m) = crate::member::nbd::NbdMember::offline(u, need) {
                self.park_missing(&mut st, Arc::new(m), u32::MAX);
            }
        }
    }

    /// Watch the remote members assembly found back after being away (their slot failed,
    /// their superblock still claiming it): missing, so they are re-added once settled.
    pub fn watch_returned(&self, devs: &[(Arc<dyn Member>, u32)]) {
        let mut st = self.write_state();
        for (d, slot) in devs {
            self.park_missing(&mut st, Arc::clone(d), *slot);
        }
    }

    /// Whether a spare may be rebuilt onto `slot` now: not while its member is missing for
    /// less than the grace.
    pub(crate) fn spare_may_take(&self, st: &State, slot: u32) -> bool {
        !st.missing
            .iter()
            .any(|m| m.slot == slot && m.since.elapsed() < self.opts.missing_grace)
    }

    /// One background pass: try to reconnect each missing device that is due, and re-add
    /// those that stayed connected for their settle time. Connection attempts are bounded
    /// by the member's request timeout.
    pub(crate) fn reconnect_missing(&self) {
        if !self.any_missing.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let now = Instant::now();
        let due: Vec<Arc<dyn Member>> = {
            let st = self.read_state();
            if st.missing.is_empty() {
                self.any_missing
                    .store(false, std::sync::atomic::Ordering::Relaxed);
            }
            st.missing
                .iter()
                .filter(|m| m.next_try <= now)
                .map(|m| Arc::clone(&m.dev))
                .collect()
        };
        for dev in due {
            // A reconnect and one read of the superblock area: the host answers.
            let up = dev.link().map(|l| {
                l.reconnect()
                    .and_then(|()| dev.read_at(&mut [0u8; 4096], 0))
                    .map(|()| l.drops())
            });
            let now = Instant::now();
            let mut st = self.write_state();
            let Some(i) = st.missing.iter().position(|m| Arc::ptr_eq(&m.dev, &dev)) else {
                continue; // removed meanwhile (`ctl remove`)
            };
            let busy = self.rebuild_active();
            let m = &mut st.missing[i];
            match up {
                Some(Ok(drops)) => match m.up {
                    Some((t, d)) if d == drops && now.saturating_duration_since(t) >= m.settle => {
                        if busy {
                            // Another slot is being rebuilt: wait, rather than turn this
                            // device into a spare and rebuild it in full.
                            m.next_try = now + m.settle;
                            continue;
                        }
                        let m = st.missing.remove(i);
                        drop(st);
                        self.re_add_returned(m);
                    }
                    Some((_, d)) if d == drops => m.next_try = now + BACKOFF_MIN,
                    _ => {
                        m.reconnects += 1;
                        m.up = Some((now, drops));
                        m.next_try = now + m.settle;
                        crate::info!(
                            { "event": "MemberBack", "slot": m.slot, "device": m.dev.path() },
                            "member {} ({}): host answers again; re-add in {} ms if it stays",
                            m.dev.path(),
                            slot_text(m.slot),
                            m.settle.as_millis()
                        );
                    }
                },
                _ => {
                    m.up = None;
                    m.next_try = now + m.backoff;
                    m.backoff = (m.backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    /// Re-add a device whose host came back (by bitmap when its record allows).
    fn re_add_returned(&self, m: Missing) {
        let path = m.dev.path().to_string();
        let remembered = m.left.map(|l| (m.slot, l));
        match self.re_add_inner(Arc::clone(&m.dev), remembered) {
            Ok(r) => crate::info!(
                { "event": "MemberReAdded", "device": path, "resync": if r.is_partial() { "partial" } else { "full" },
                  "bytes": r.bytes, "member_bytes": r.member_bytes },
                "member {path} is back after {} ms away: {}",
                m.since.elapsed().as_millis(),
                if r.is_partial() { "re-added, resyncing its dirty regions" } else { "a spare, to be rebuilt in full" }
            ),
            Err(e) => {
                crate::warn!({ "device": path, "error": e.to_string() }, "re-add of returning member {path} failed: {e}");
                // Kept as missing: the next pass tries again.
                let mut st = self.write_state();
                if st.dead.is_none() && st.role_of(m.dev.identity()).is_none() {
                    st.missing.push(Missing {
                        up: None,
                        next_try: Instant::now() + BACKOFF_MAX,
                        ..m
                    });
                }
            }
        }
    }

    /// The missing devices, for `ctl status`.
    pub(crate) fn missing_json(st: &State) -> Vec<Value> {
        st.missing
            .iter()
            .map(|m| {
                json!({
                    "path": m.dev.path(),
                    "slot": (m.slot != u32::MAX).then_some(m.slot),
                    "away_ms": m.since.elapsed().as_millis() as u64,
                    "settling": m.up.is_some(),
                    "settle_ms": m.settle.as_millis() as u64,
                    "reconnects": m.reconnects,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctrl::tests::{controller, mem_members, pattern, shape};
    use crate::ctrl::Options;
    use crate::member::nbd::Link;
    use crate::member::MemMember;
    use raidlab::array::Level;
    use std::io;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// An in-memory member behind a link a test sets down and up.
    #[derive(Debug)]
    struct Flaky {
        inner: MemMember,
        up: AtomicBool,
    }

    impl Flaky {
        fn check(&self) -> io::Result<()> {
            if self.up.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err(io::Error::new(io::ErrorKind::NotConnected, "host away"))
            }
        }
    }

    impl Member for Flaky {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.check()?;
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.check()?;
            self.inner.write_at(buf, offset)
        }
        fn sync(&self) -> io::Result<()> {
            self.check()
        }
        fn len_bytes(&self) -> u64 {
            self.inner.len_bytes()
        }
        fn path(&self) -> &str {
            "nbd://flaky/"
        }
        fn identity(&self) -> DevId {
            self.inner.identity()
        }
        fn link(&self) -> Option<&dyn Link> {
            Some(self)
        }
    }

    impl Link for Flaky {
        fn connected(&self) -> bool {
            self.up.load(Ordering::SeqCst)
        }
        fn reconnect(&self) -> io::Result<()> {
            self.check()
        }
        fn drops(&self) -> u64 {
            0
        }
    }

    /// A RAID-5 of 4 whose slot 1 is `Flaky`, with a spare.
    fn rig(grace: Duration) -> (Controller, Arc<Flaky>) {
        let sh = shape(Level::Raid5, 4, 8);
        let mems = mem_members(&sh, "m", 4);
        let (c, _) = controller(
            &sh,
            &mems,
            Options {
                missing_grace: grace,
                ..Options::default()
            },
        );
        let flaky = Arc::new(Flaky {
            inner: MemMember::new("flaky", sh.data_offset_bytes + sh.member_data_bytes),
            up: AtomicBool::new(true),
        });
        c.write_state().devs[1] = Some(flaky.clone());
        c.add_spare(Arc::new(MemMember::new("spare", flaky.len_bytes())))
            .unwrap();
        (c, flaky)
    }

    #[test]
    fn a_host_away_is_missing_not_faulty_and_its_slot_waits_the_grace() {
        let (c, flaky) = rig(Duration::from_secs(3600));
        let data = pattern(3, c.size_bytes() as usize);
        c.write(0, &data, false).unwrap();
        flaky.up.store(false, Ordering::SeqCst);
        // No client error: served degraded at once. (At 16 KiB: row 0's second data chunk,
        // on slot 1, so the write reaches the member that is away.)
        let more = pattern(4, 64 * 1024);
        c.write(16 * 1024, &more, false).unwrap();
        let mut back = vec![0u8; data.len()];
        c.read(0, &mut back).unwrap();
        assert_eq!(&back[16 * 1024..16 * 1024 + more.len()], &more[..]);
        assert_eq!(&back[..16 * 1024], &data[..16 * 1024]);
        let st = c.status();
        assert_eq!(st["members"][1]["state"], "missing", "{st}");
        assert_eq!(st["missing"][0]["slot"], 1);
        assert_eq!(st["faulty"].as_array().map(Vec::len), Some(0));
        assert!(!c.maybe_start_rebuild(), "the grace keeps the spare out");
        assert!(c.write_state().role_of(flaky.identity()).is_some());
        // The operator gives up on the host: the spare takes the slot.
        assert_eq!(c.remove("1").unwrap(), "nbd://flaky/");
        assert_eq!(c.status()["missing"].as_array().map(Vec::len), Some(0));
        assert!(c.maybe_start_rebuild());
    }

    #[test]
    fn without_grace_a_spare_takes_the_slot_at_once() {
        let (c, flaky) = rig(Duration::ZERO);
        flaky.up.store(false, Ordering::SeqCst);
        c.write(16 * 1024, &pattern(5, 4096), false).unwrap();
        assert_eq!(c.status()["missing"][0]["slot"], 1);
        assert!(c.maybe_start_rebuild());
    }

    #[test]
    fn a_returning_host_settles_then_is_re_added() {
        let (c, flaky) = rig(Duration::from_secs(3600));
        flaky.up.store(false, Ordering::SeqCst);
        c.write(16 * 1024, &pattern(6, 4096), false).unwrap();
        c.reconnect_missing();
        assert_eq!(c.status()["missing"][0]["settling"], false, "still away");
        flaky.up.store(true, Ordering::SeqCst);
        let t = Instant::now();
        // Bounded: 5 s of passes, 50 ms apart.
        for _ in 0..100 {
            c.reconnect_missing();
            if c.status()["missing"].as_array().is_some_and(Vec::is_empty) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(t.elapsed() >= SETTLE_MIN, "re-added only after settling");
        assert_eq!(c.status()["missing"].as_array().map(Vec::len), Some(0));
        // This test sink keeps no superblocks to vouch for it: re-added as a spare, for a
        // full rebuild (the bitmap re-add is tested with real superblocks in Python).
        let st = c.read_state();
        assert!(st.spares.iter().any(|d| d.identity() == flaky.identity()));
    }

    #[test]
    fn settle_time_doubles_per_departure_and_is_capped() {
        assert_eq!(settle_for(1), Duration::from_secs(1));
        assert_eq!(settle_for(2), Duration::from_secs(2));
        assert_eq!(settle_for(4), Duration::from_secs(8));
        assert_eq!(settle_for(7), Duration::from_secs(64));
        assert_eq!(settle_for(100), Duration::from_secs(64));
        let mut f = Flaps::default();
        let (a, b) = (DevId::Remote(1), DevId::Remote(2));
        let t = Instant::now();
        assert_eq!(f.note(a, t), 1);
        assert_eq!(f.note(b, t), 1);
        assert_eq!(f.note(a, t), 2);
        // Departures older than the window no longer count.
        assert_eq!(f.note(a, t + FLAP_WINDOW + Duration::from_secs(1)), 1);
        for _ in 0..2 * FLAPS_MAX {
            f.note(b, t);
        }
        assert!(f.0.len() <= FLAPS_MAX);
    }
}
